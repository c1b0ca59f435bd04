#!/usr/bin/env bash
# One GPU call: the queue's next runs (gpu/queue.yaml) on the lent machine, from the repository
# root there, every finished run packed at once into OUT/<study>.tar.xz (python -m nmt gpu wave).
#   bash gpu/wave.sh OUT LIMIT [wave options: --parallel N, --mps, --check, ...]
# LIMIT: the call's time limit in seconds (the wave stops its runs 45 s before it and packs). The
# machine's Python lacks pytorch-ignite, nltk and submitit: `make gpu-prep` here puts their wheels and a
# copy of the data in .gpu/ (git-ignored; name .gpu in the call's carry), installed and used from here.
# At home: make gpu-unpack FILES="OUT/*.tar.xz" (archive, tables, what changed).
set -u
OUT=$1 LIMIT=$2
shift 2
mkdir -p "$OUT"
if compgen -G ".gpu/wheels/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/wheels/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
[ -z "${MULTI30K_DIR:-}" ] && [ -d .gpu/data/multi30k-fr-en ] && export MULTI30K_DIR=$PWD/.gpu/data/multi30k-fr-en
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv -l 15 >"$OUT/gpu.csv" 2>/dev/null &
SMI=$!
python3 -m nmt gpu wave --out "$OUT" --limit "$(( LIMIT - 5 ))" "$@"
CODE=$?
kill $SMI 2>/dev/null
exit $CODE
