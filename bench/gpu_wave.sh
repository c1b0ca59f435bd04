#!/usr/bin/env bash
# Train some runs of a study on one lent GPU as a single wave of parallel processes and pack their
# small archived files (how report/multi30k-best-all/ was made): run from the repository root on the
# GPU machine, with MULTI30K_DIR pointing at the data.
#   bash bench/gpu_wave.sh OUT STUDY "SCHEMES" "SEEDS" ["LOW_SEEDS"]
# SEEDS: every scheme x seed trained at once at normal priority. LOW_SEEDS (optional): trained at
# once beside them at the lowest CPU priority (nice 19), so they take what the first group leaves
# and cannot delay it: on a GPU these small runs are host-bound, one core each. LIMIT (seconds,
# default 540) stops whatever is still training (those runs are lost: a checkpoint is too large to
# bring back); a study that ignores the stop is killed 20 s later. PARALLEL (default: every run of a
# group at once) caps the runs training at a time, the rest queued: ~20 processes keep an H100 busy
# (46 runs of 800 updates, 23 at a time: 7 minutes, 2026-11-27). The runs write no tables (--no-tail:
# the tail of those 46 runs on 16 cores outlasted the limit): remake them at home with
# python -m nmt study STUDY --table once runs.tar.gz is unpacked at the repository root. OUT receives
# wave.log, gpu.csv (use and memory every 30 s) and runs.tar.gz: the archived folders of the runs
# that finished and every run's log.
set -u
OUT=$1 STUDY=$2 SCHEMES=$3 SEEDS=$4 LOW_SEEDS=${5:-}
LIMIT=${LIMIT:-540} DEVICE=${DEVICE:-cuda} PY=${PY:-python3}
mkdir -p "$OUT"
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1
START=$(date +%s)
LOG="$OUT/wave.log"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; date -u +%FT%TZ; } >"$LOG" 2>&1
nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv -l 30 >"$OUT/gpu.csv" 2>/dev/null &
SMI=$!

count() { echo "${PARALLEL:-$(( $(wc -w <<<"$SCHEMES") * $(wc -w <<<"$1") ))}"; }
# shellcheck disable=SC2086  # SCHEMES and SEEDS are word lists
timeout -k 20 "$LIMIT" $PY -m nmt study "$STUDY" --schemes $SCHEMES --seeds $SEEDS --device "$DEVICE" --no-tail \
  --parallel "$(count "$SEEDS")" >>"$LOG" 2>&1 &
MAIN=$!
LOW=
if [ -n "$LOW_SEEDS" ]; then
  # The low group starts once the first has filled the data caches (its "N runs, ..." line).
  until grep -q " at a time with " "$LOG" || ! kill -0 $MAIN 2>/dev/null || [ $(( $(date +%s) - START )) -gt 90 ]; do
    sleep 2
  done
  LEFT=$(( LIMIT - ($(date +%s) - START) ))
fi
if [ -n "$LOW_SEEDS" ] && [ "$LEFT" -gt 30 ]; then
  # shellcheck disable=SC2086
  nice -n 19 timeout -k 20 "$LEFT" $PY -m nmt study "$STUDY" --schemes $SCHEMES --seeds $LOW_SEEDS --device "$DEVICE" \
    --no-tail --parallel "$(count "$LOW_SEEDS")" >"$OUT/wave-low.log" 2>&1 &
  LOW=$!
fi
wait $MAIN
echo "== main group ended (exit $?) after $(( $(date +%s) - START )) s" >>"$LOG"
if [ -n "$LOW" ]; then
  wait "$LOW"
  echo "== low group ended (exit $?) after $(( $(date +%s) - START )) s" >>"$LOG"
  cat "$OUT/wave-low.log" >>"$LOG" && rm "$OUT/wave-low.log"
fi
kill $SMI 2>/dev/null
where() { $PY -c "import os; from studies.catalog import load_studies; print(os.path.relpath(load_studies()['$STUDY'].$1))"; }
ARCHIVE=$(where archive) RUNS=$(where out)
PACK=()
for s in $SCHEMES; do
  for seed in $SEEDS $LOW_SEEDS; do
    name=$s; [ "$seed" != 1 ] && name=$s-seed$seed
    [ -f "$ARCHIVE/$name/manifest.json" ] && PACK+=("$ARCHIVE/$name")
  done
done
[ -d "$RUNS/logs" ] && PACK+=("$RUNS/logs")
tar czf "$OUT/runs.tar.gz" "${PACK[@]}" 2>>"$LOG"
echo "== packed ${#PACK[@]} archived runs after $(( $(date +%s) - START )) s" >>"$LOG"
cat "$LOG"
