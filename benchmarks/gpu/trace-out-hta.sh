#!/usr/bin/env bash
# On the GPU host, after scripts/gpu-build.sh: `tprobe profile --trace-out` on the GPU (the tiny
# model and the 26B-A4B shapes, one traced step each), then
#  - `tprobe kernels` on each trace against profile's own evidence: the same
#    results.kernel_table.totals (sum_ns, events) and the same phase x part rows;
#  - HolisticTraceAnalysis's TraceAnalysis loading each trace from HTA's source folder (HTA is not
#    a dependency: HTA_SRC names a checkout, run with a Python that has pandas and networkx),
#    with its kernel breakdown as proof that it read the kernels.
# Output under ${OUT:-$PWD/out}/trace-out-hta. docs/profile.md, "The step in a trace viewer".
set -u
cd "$(dirname "$0")/../.."
if [ -z "${HTA_SRC:-}" ] || [ ! -d "${HTA_SRC}/hta" ]; then
  echo "trace-out-hta.sh: set HTA_SRC to a HolisticTraceAnalysis source folder (the one holding" \
       "hta/); HTA is not installed here and not a dependency" >&2
  exit 2
fi
PY=${HTA_PYTHON:-python3}
T=build/cuda/src/app/tprobe
[ -x "$T" ] || { echo "trace-out-hta.sh: $T missing: run scripts/gpu-build.sh first" >&2; exit 2; }
D=${OUT:-$PWD/out}/trace-out-hta
mkdir -p "$D"
status=0
run_case() {  # name, then profile's arguments
  local name=$1
  shift
  mkdir -p "$D/$name"
  "$T" profile --device cuda "$@" --trace-out "$D/$name/step.json.gz" \
    --json "$D/$name/profile.json" >"$D/$name/profile.txt" 2>&1
  echo "$name: profile exit $?"
  "$T" kernels "$D/$name/step.json.gz" --json "$D/$name/kernels.json" >"$D/$name/kernels.txt" 2>&1
  echo "$name: kernels exit $?"
  "$PY" benchmarks/gpu/trace_out_hta.py --hta "$HTA_SRC" --dir "$D/$name" \
    >"$D/$name/check.txt" 2>&1
  local rc=$?
  cat "$D/$name/check.txt"
  [ $rc -eq 0 ] || status=1
}
run_case tiny --model gemma4-tiny --random-init --dtype bf16 --widths 256 --repeats 2 --rank 4 \
  --alpha 8
run_case 26b --model gemma4-26b-a4b --random-init --widths 2048 --repeats 2
exit $status
