#!/usr/bin/env bash
# Issue 44 on the GPU host, part 1: the whole tree built with -DTPROBE_WERROR=ON and its ctest, then
# `tprobe profile` on the 26B-A4B shapes (random weights, batch 2, --optimizer adamw, the default)
# over 2,048-8,192 with --gpu-memory at the card's full memory and at one or two smaller budgets
# (H100: 72 GiB; H200: 80 and 92.6 GiB), each budget's width edge at batch 2 and batch edge at
# 8,192 searched by running 3-step probes under the budget's allocator cap. The search's wall time
# is the evidence's (the sweep's and the search's probes; the process's time beside it). Then a
# 2,048 / 8,192 profile with the memory step (the breakdown with AdamW in its peak) and
# `--trace-out` of its traced step, for HTA (benchmarks/trace_out_hta.py, run on the CPU machine).
# PART=search (the build, ctest and the search) or PART=memory (the memory-step profiles, the trace,
# then Hugging Face + PEFT + AdamW at each searched edge and the step past it, under the same cap:
# benchmarks/hf_lora_step.py --points --cap-gib; needs PART=search's build and edges.tsv); both
# when unset. Output: $OUT/edge/ (edges.tsv: one line per searched edge).
set -u
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
D=$OUT/edge
mkdir -p "$D"
LOG=$D/log.txt
T=build/cuda/src/app/tprobe
say() { echo "== $* ($(date +%T))" | tee -a "$LOG"; }
say start
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader | tee -a "$LOG"
card_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
card=$(python3 -c "print(f'{$card_mib / 1024:.1f}')")
if [ "${card%.*}" -ge 120 ]; then budgets="$card,$card,$card"; reserves="0,$(python3 -c "print(round($card - 92.6, 1))"),$(python3 -c "print(round($card - 80, 1))")"
else budgets="$card,$card"; reserves="0,$(python3 -c "print(round($card - 72, 1))")"; fi
budgets=${GPU_MEMORY:-$budgets}; reserves=${RESERVE:-$reserves}  # e.g. one budget: 79.6 / 7.6
echo "card ${card} GiB; --gpu-memory $budgets --reserve $reserves" | tee -a "$LOG"
PART=${PART:-all}
if [ "$PART" != memory ]; then
  say build ${TPROBE_BUILD_TARGETS:-every target} -DTPROBE_WERROR=ON
  s=$(date +%s)
  bash scripts/gpu-build.sh -DTPROBE_WERROR=ON >"$D/build.txt" 2>&1
  echo "build exit $? in $(( $(date +%s) - s )) s; warnings: $(grep -c 'warning:' "$D/build.txt")" | tee -a "$LOG"
  grep -m5 -A6 'error:\|warning:' "$D/build.txt" | tee -a "$LOG"
  [ -n "${TPROBE_BUILD_TARGETS:-}" ] || { say ctest
  (cd build/cuda && OMP_NUM_THREADS=4 timeout 240 ctest -j 8 --timeout 200 >"$D/ctest.txt" 2>&1)
  echo "ctest exit $?" | tee -a "$LOG"; grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)" "$D/ctest.txt" | tee -a "$LOG"; }
fi
if [ "$PART" != memory ]; then
say "profile + edge search (26B, adamw)"
s=$(date +%s.%N)
timeout ${SEARCH_TIMEOUT:-420} $T profile --model gemma4-26b-a4b --widths 2048,4096,6144,8192 --warmup 1 --repeats 1 \
  --trace off --memory off --gpu-memory "$budgets" --reserve "$reserves" \
  --json "$D/search.json" >"$D/search.txt" 2>"$D/search.err"
echo "exit $? (profile + search) in $(python3 -c "import time; print(f'{time.time() - $s:.1f}')") s wall" | tee -a "$LOG"
tail -3 "$D/search.err" | tee -a "$LOG"
python3 - "$D/search.json" "$D/edges.tsv" <<'PY' | tee -a "$LOG"
import json, sys
r = json.load(open(sys.argv[1]))["results"]
mf = r["memory_fit"]
print(f"fit: {json.dumps(mf.get('fit', {}).get('coefficients', mf.get('fit', {})))[:300]}")
rows = []
for b in mf["budgets"]:
    gib = b["budget_bytes"] / 2**30
    for s in b.get("searches", []):
        probes = s["probes"]
        wall = sum(p["wall_s"] for p in probes)
        fixed = f"batch {s['batch']}" if s["axis"] == "width" else f"width {s['width']}"
        print(f"{gib:7.2f} GiB  {s['axis']:5} at {fixed:11}  predicted {s['predicted']}  edge {s['edge']}  "
              f"past {s['past']}  error {s['error_steps']} steps  {len(probes)} probes {wall:.1f} s  {s['status']}")
        for p in probes:
            pk = p["peak_reserved_bytes"]
            print(f"      {p['batch']}x{p['width']}: {p['outcome']:4} "
                  f"{'-' if pk is None else f'{pk / 2**30:.2f} GiB reserved'}  {p['wall_s']:.1f} s")
        if s["status"] == "found":
            if s["axis"] == "width":
                rows.append((gib, f"{s['batch']}x{s['edge']}", f"{s['batch']}x{s['past']}"))
            else:
                rows.append((gib, f"{s['edge']}x{s['width']}", f"{s['past']}x{s['width']}"))
with open(sys.argv[2], "w") as f:
    for gib, a, b in rows:
        f.write(f"{gib:.3f}\t{a}\t{b}\n")
PY
fi
if [ "$PART" != search ]; then
say "profile 2,048 / 8,192 with the memory step (adamw and none) and --trace-out"
for opt in ${OPTIMIZERS:-adamw none}; do
  extra=(); [ "$opt" = adamw ] && extra=(--trace-out "$D/trace-out.json.gz")
  timeout 300 $T profile --model gemma4-26b-a4b --widths 2048,8192 --warmup 1 --repeats 2 \
    --optimizer $opt "${extra[@]}" --json "$D/profile-$opt.json" >"$D/profile-$opt.txt" 2>&1
  echo "exit $? (profile --optimizer $opt)" | tee -a "$LOG"
done
python3 - "$D/profile-adamw.json" "$D/profile-none.json" <<'PY' | tee -a "$LOG"
import json, sys
for path in sys.argv[1:]:
    r = json.load(open(path))["results"]
    for p in r.get("points", []):
        pt = p.get("point", p)
        print(f"{path.rsplit('-', 1)[-1][:-5]:5} {pt.get('batch')}x{pt.get('width')}: {p.get('outcome')} "
              f"peak_allocated {p.get('peak_allocated_bytes', 0) / 2**30:.3f} GiB "
              f"reserved {p.get('peak_reserved_bytes', 0) / 2**30:.3f} GiB "
              f"step {p.get('best_step_s', p.get('step_s'))}")
PY
if [ -s "$D/trace-out.json.gz" ]; then
  timeout 120 $T kernels "$D/trace-out.json.gz" --json "$D/trace-out-kernels.json" >"$D/trace-out-kernels.txt" 2>&1
  echo "exit $? (kernels reads the trace back); $(du -h "$D/trace-out.json.gz" | cut -f1)" | tee -a "$LOG"
fi
say "HF + PEFT + AdamW at each searched edge and the step past it, under the same cap"
[ "${HF:-1}" = 1 ] && while IFS=$'\t' read -r gib fits past; do
  timeout 200 python3 benchmarks/hf_lora_step.py --points "$fits" "$past" --cap-gib "$gib" --reps 2 \
    --optimizer adamw --json "$D/hf-$gib-$fits.json" >"$D/hf-$gib-$fits.txt" 2>&1
  echo "exit $? (HF at $gib GiB: $fits, $past)" | tee -a "$LOG"
  grep -E "^HF .*(best|OOM)" "$D/hf-$gib-$fits.txt" | tee -a "$LOG"
done <"${EDGES:-$D/edges.tsv}"
say "HF + PEFT + AdamW at 2,048 / 8,192, no cap (the peak beside tprobe's)"
[ "${HF:-1}" = 1 ] && timeout 200 python3 benchmarks/hf_lora_step.py --seq 2048 8192 --reps 2 --optimizer adamw \
  --json "$D/hf-adamw.json" >"$D/hf-adamw.txt" 2>&1
echo "exit $? (HF 2,048 / 8,192)" | tee -a "$LOG"; grep -E "^HF " "$D/hf-adamw.txt" | tee -a "$LOG"
fi
say done
# One file back (the device returns a few files only): $OUT/edge.tgz.
tar -czf "$OUT/edge.tgz" -C "$OUT" edge && rm -rf "$D"
