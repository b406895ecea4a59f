#!/usr/bin/env bash
# GPU-host call 2 for `tprobe mask`: SDPA backend eligibility of the 26B-A4B layer shapes on this
# card (each backend pinned alone, repeated K/V and GQA, no mask / band / padded band, plus
# tprobe's windowed flash path), at width 4,096 (batch 2) and 16,384 (batch 1), and the
# materialised mask check on the GPU; first, benchmarks/gpu/mask.sh (transformers' own mask rules,
# Python, <= 60 s) into $OUT/mask_backends/hf/. Needs build/cuda (scripts/gpu-build.sh).
# At most ~145 s in all. Output: $OUT/mask_backends/ (evidence JSON, stdout tables, summary last).
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
D=$OUT/mask_backends
mkdir -p "$D"
T=build/cuda/src/app/tprobe
LOG=$D/log.txt
say() { echo "== $* ($(date +%T))" | tee -a "$LOG"; }
say start
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$D/nvidia-smi.txt" 2>&1
cat "$D/nvidia-smi.txt" | tee -a "$LOG"
say "hf mask rules (benchmarks/gpu/mask.sh)"
MASK_HF_OUT=$D/hf bash benchmarks/gpu/mask.sh >"$D/hf-mask.log" 2>&1
echo "mask.sh rc $?" | tee -a "$LOG"
if [ ! -x "$T" ]; then
  echo "no $T: run scripts/gpu-build.sh first" | tee -a "$LOG"
  exit 1
fi
step() {  # name timeout args...
  local name=$1 limit=$2
  shift 2
  say "$name"
  timeout "$limit" "$T" mask "$@" --json "$D/$name.json" >"$D/$name.txt" 2>"$D/$name.err"
  echo "$name rc $?" | tee -a "$LOG"
}
# Smaller width first: its evidence comes back even if the wide run is cut off.
step backends-4096 40 --width 4096 --batch 2 --backends --warmup 1 --repeats 5
step backends-16384 70 --width 16384 --batch 1 --backends --warmup 1 --repeats 3
step materialised-cuda 20 --width 16384 --lengths 16384,8192 --materialise --device cuda
step geometry 5 --width 16384 --lengths 16384,8192
say summary
python3 - "$D" <<'PY' 2>&1 | tee "$D/summary.txt"
import json, os, sys
d = sys.argv[1]
for name in ("backends-4096", "backends-16384"):
    p = os.path.join(d, name + ".json")
    if not os.path.exists(p):
        print(name, ": no evidence (see", name + ".err)")
        continue
    r = json.load(open(p))["results"]
    st = r.get("backends_status", {})
    print("\n%s  width %s batch %s  supported=%s %s" % (name, r["width"], r["batch"],
                                                        st.get("supported"), st.get("reason", "")))
    print("%-18s %-8s %-24s %-12s %-14s %9s %9s %s" % ("layer", "kv", "mask", "backend", "outcome",
                                                       "fwd_ms", "fwdbwd_ms", "finite"))
    for b in r.get("backends", []):
        f = b.get("fwd_median_s"); fb = b.get("fwd_bwd_median_s")
        print("%-18s %-8s %-24s %-12s %-14s %9s %9s %s" % (
            b["layer_type"], b["kv"], b["mask_case"], b["backend"], b["outcome"],
            "%.2f" % (f * 1e3) if f is not None else "-",
            "%.2f" % (fb * 1e3) if fb is not None else "-", b.get("output_finite")))
m = os.path.join(d, "materialised-cuda.json")
if os.path.exists(m):
    r = json.load(open(m))["results"].get("materialised", {})
    print("\nmaterialised on", r.get("device"), "ok", r.get("ok"), "wall_s", r.get("wall_s"))
PY
say done
