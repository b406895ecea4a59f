#!/usr/bin/env bash
# On the GPU host, after scripts/gpu-build.sh: tprobe profile with another CUPTI subscriber already
# in the process (benchmarks/gpu/other_subscriber.c, LD_PRELOAD). Expected: the traced step is
# refused loudly (cupti_refused in the table and the evidence), the timings are still measured,
# and the run exits 0. Output under ${OUT:-$PWD/out}/cupti-refusal.
set -u
cd "$(dirname "$0")/../.."
D=${OUT:-$PWD/out}/cupti-refusal
mkdir -p "$D"
cupti=$(grep -E '^TPROBE_CUPTI_LIBRARY' build/cuda/CMakeCache.txt | cut -d= -f2)
inc=$(grep -E '^TPROBE_CUPTI_INCLUDE_DIR' build/cuda/CMakeCache.txt | cut -d= -f2)
gcc -shared -fPIC -O1 -I"$inc" benchmarks/gpu/other_subscriber.c -o "$D/libother_subscriber.so" \
  "$cupti" -Wl,-rpath,"$(dirname "$cupti")" || exit 1
run() {
  build/cuda/src/app/tprobe profile --model gemma4-tiny --random-init --device cuda --dtype bf16 \
    --moe loop --lora-dtype model --widths 128,256 --repeats 2 --rank 4 --alpha 8 "$@"
}
run --json "$D/alone.json" >"$D/alone.txt" 2>&1
echo "alone: exit $?"
LD_PRELOAD="$D/libother_subscriber.so" run --json "$D/with-other.json" >"$D/with-other.txt" 2>&1
echo "with another subscriber: exit $?"
grep -iE "subscriber|cupti|refus|ok: step" "$D/with-other.txt" | head -12
python3 - "$D" <<'PY'
import json, sys
d = sys.argv[1]
for name in ("alone", "with-other"):
    ev = json.load(open(f"{d}/{name}.json"))
    r = ev["results"]
    codes = [x["code"] for x in ev["status"]["diagnostics"]]
    steps = [round(p["step"]["median_s"] * 1e3, 2) if p.get("step") else None for p in r["points"]]
    over = [p.get("trace_overhead_ratio") for p in r["points"]]
    untagged = [(p.get("kernel_trace") or {}).get("untagged_records") for p in r["points"]]
    print(f"{name:11} outcome={ev['status']['outcome']} median_ms={steps} "
          f"overhead={over} untagged={untagged} trace={r['kernel_trace_status']} diagnostics={codes}")
PY
