#!/usr/bin/env bash
# The GPU measurements of docs/performance.md's "Training on a GPU" in one call of about eight
# minutes (a lent GPU's session is short): run from the repository root on the GPU machine.
#   bash gpu/session.sh [OUT]      (OUT: where the tables go; default runs/gpu)
# In priority order, each step under its own time limit so that the earlier ones always finish:
#  (a) make gpu-check for sinusoidal, RoPE, ALiBi, T5 and DeBERTa, the step options off and on
#      (the same tree: "before" is "options off"), each scheme's figure printed twice (--repeat);
#  (b) Transformer-base against torch.nn.Transformer at ~4k, ~16k and ~64k target tokens a batch,
#      eager and with CUDA graphs (bench/base_speed.py), the same schemes;
#  (c) gpu-check with the options on for every other scheme;
#  (d) inductor inside the captured step: the options on + train.compile=true for (a)'s schemes and
#      CoPE; then + model.attention_kernel=flex for the schemes FlexAttention serves (its bias from
#      positions, or FoX's gates: docs/schemes.md), against (a)'s "on" rows of the same call.
# (d) compiles every shape once: with (a)-(c) it outlasts one call; SKIP_D=1 leaves it out of a
# first call, ONLY_D=1 runs it in a second with (a)'s "on" rows alone beside it.
# OFF, SKIP_ON and REST_ONLY narrow (a) and (c) to finish an interrupted session's list; FIRST names
# (a)'s schemes (a few new ones beside a reference) and SKIP_BASE=1 leaves (b) out.
# Wheels for packages the machine lacks (pytorch-ignite, nltk) are installed from .whl/ if present.
set -u
OUT=${1:-${OUT:-runs/gpu}}
mkdir -p "$OUT"
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
FIRST=${FIRST:-sinusoidal rope alibi t5 deberta}
ON="train.static_shapes=true train.fused_optimizer=true train.cuda_graphs=true"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv 2>&1 | tee "$OUT/device.txt"
date -u +%FT%TZ | tee -a "$OUT/device.txt"

echo "== (a) gpu-check, options off"
[ -z "${ONLY_D:-}" ] && timeout 120 $PY -m nmt gpu check --schemes ${OFF:-$FIRST} --batches 20 --repeat 2 2>&1 | tee "$OUT/check_off.md"
echo "== (a) gpu-check, options on"
[ -z "${SKIP_ON:-}" ] && timeout 130 $PY -m nmt gpu check --schemes $FIRST --batches 20 --repeat 2 $ON 2>&1 | tee "$OUT/check_on.md"
echo "== (b) Transformer-base against torch.nn.Transformer"
[ -z "${SKIP_BASE:-}${ONLY_D:-}" ] && timeout 110 $PY -m nmt bench base-speed --schemes $FIRST --rounds 8 2>&1 | tee "$OUT/base.md"
echo "== (c) gpu-check, options on, the other schemes"
REST=$($PY -c "from models.positional import SCHEMES; print(' '.join(s for s in SCHEMES if s not in '$FIRST'.split()))")
[ -z "${ONLY_D:-}" ] && timeout 150 $PY -m nmt gpu check --schemes ${REST_ONLY:-$REST} --batches 20 --repeat 1 $ON 2>&1 | tee "$OUT/check_rest.md"
if [ -z "${SKIP_D:-}" ]; then
  echo "== (d) options on + train.compile"
  timeout 240 $PY -m nmt gpu check --schemes $FIRST cope --batches 20 --repeat 1 $ON train.compile=true 2>&1 \
    | tee "$OUT/check_compile.md"
  FLEX=$($PY -c "from models.positional import SCHEMES; print(' '.join(n for n, s in SCHEMES.items() if s.flex_form().startswith('score_mod')))")
  echo "== (d) options on + train.compile + model.attention_kernel=flex: $FLEX"
  timeout 240 $PY -m nmt gpu check --schemes $FLEX --batches 20 --repeat 1 $ON train.compile=true \
    model.attention_kernel=flex 2>&1 | tee "$OUT/check_flex.md"
fi
echo "== done"
