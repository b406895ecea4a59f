#!/usr/bin/env bash
# GPU host: `tprobe kernels` on the user's own run — a torch.profiler trace (with_stack=True) of
# one Hugging Face + PEFT LoRA step of the 26B-A4B shapes at 2x2,048 (benchmarks/hf_lora_step.py)
# — attributed by phase x part, beside `tprobe profile --attn sdpa --lora-dtype fp32` on the same
# shapes (the same computation: transformers' grouped_mm experts, MOE=grouped_mm for tprobe's
# own permutation), the part-level diff of the two, and the read time of the trace
# with and without its module events. Output: $OUT/user-trace/ (OUT defaults to ./out); the
# trace itself (87.7 MB of JSON at 2x2,048) goes to a temporary folder, removed at exit.
set -u
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
D=$OUT/user-trace
mkdir -p "$D"
LOG=$D/log.txt
T=build/cuda/src/app/tprobe
W=${WIDTH:-2048}
say() { echo "== $* ($(date +%T))" | tee -a "$LOG"; }
say start
nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader | tee -a "$LOG"
if [ ! -x "$T" ]; then
  say build
  TPROBE_BUILD_TARGETS="tprobe" bash scripts/gpu-build.sh >"$D/build.txt" 2>&1
  echo "build exit $?" | tee -a "$LOG"
fi
TMPD=$(mktemp -d)
trap 'rm -rf "$TMPD"' EXIT
TR=$TMPD/user-trace-hf-$W.json
say hf step with a with_stack trace
timeout 200 python3 benchmarks/hf_lora_step.py --attn sdpa --seq $W --reps 1 --trace-out $TR \
  --with-stack --json "$D/hf.json" >"$D/hf.txt" 2>&1
echo "exit $? (hf)" | tee -a "$LOG"; grep -E "HF |trace" "$D/hf.txt" | tee -a "$LOG"; ls -la $TR | tee -a "$LOG"
say kernels on the HF trace
/usr/bin/time -f "read %e s %M KiB" timeout 120 $T kernels $TR --model gemma4-26b-a4b \
  --json "$D/kernels-hf.json" >"$D/kernels-hf.txt" 2>"$D/time-with-modules.txt"
echo "exit $? (kernels)" | tee -a "$LOG"; cat "$D/time-with-modules.txt" | tail -1 | tee -a "$LOG"
python3 - "$TR" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["traceEvents"] = [e for e in d["traceEvents"] if e.get("cat") not in ("python_function", "fwdbwd")]
json.dump(d, open(sys.argv[1] + ".nomod.json", "w"))
PY
/usr/bin/time -f "read %e s %M KiB" timeout 120 $T kernels $TR.nomod.json --model gemma4-26b-a4b \
  >/dev/null 2>"$D/time-without-modules.txt"
tail -1 "$D/time-without-modules.txt" | tee -a "$LOG"
say read CPU time: with module events, the same with --parts off, without them, alternating, ${READS:-7} each
for i in $(seq ${READS:-7}); do
  for v in with with-off without; do
    f=$TR; [ $v = without ] && f=$TR.nomod.json
    x=; [ $v = with-off ] && x="--parts off"
    /usr/bin/time -f "$v %U %S" $T kernels $f --model gemma4-26b-a4b $x >/dev/null 2>>"$D/read-times.txt"
  done
done
python3 - "$D/read-times.txt" <<'PY' 2>&1 | tee -a "$LOG"
import statistics, sys
t = {"with": [], "with-off": [], "without": []}
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) == 3 and p[0] in t:
        t[p[0]].append(float(p[1]) + float(p[2]))  # user + sys CPU seconds
m = {k: statistics.median(v) for k, v in t.items()}
print(f"read CPU median of {len(t['with'])}: with module events {m['with']:.3f} s, the same with "
      f"--parts off {m['with-off']:.3f} s, without the events {m['without']:.3f} s")
print(f"  attribution (with / with-off): +{(m['with'] / m['with-off'] - 1) * 100:.1f} %; "
      f"reading the events (with-off / without): +{(m['with-off'] / m['without'] - 1) * 100:.1f} %")
PY
say tprobe profile sdpa fp32 lora
timeout 200 $T profile --model gemma4-26b-a4b --random-init --attn sdpa --lora-dtype fp32 \
  --moe ${MOE:-hf_grouped_mm} --widths $W --repeats 2 --json "$D/profile.json" >"$D/profile.txt" 2>&1
echo "exit $? (profile)" | tee -a "$LOG"; grep " ok:" "$D/profile.txt" | tee -a "$LOG"
say part-level diff
timeout 120 $T kernels $TR "$D/profile.json" --model gemma4-26b-a4b >"$D/diff.txt" 2>&1
echo "exit $? (diff)" | tee -a "$LOG"
say compare forward part shares
python3 - "$D" <<'PY' 2>&1 | tee -a "$LOG"
import json, os, sys
d = sys.argv[1]
k = json.load(open(os.path.join(d, "kernels-hf.json")))["results"]
p = json.load(open(os.path.join(d, "profile.json")))["results"]["points"][0]["kernel_trace"]
def shares(rows, phase):
    tot = sum(r["kernel_s"] for r in rows if r["phase"] == phase)
    out = {}
    for r in rows:
        if r["phase"] == phase:
            key = (r["layer_kind"], r["part"])
            out[key] = out.get(key, 0) + r["kernel_s"] / tot
    return out, tot
a, ta = shares(k["by_phase_part"], "forward")
b, tb = shares(p["by_phase_part"], "forward")
print(f"HF trace: untagged {k['attribution']['untagged_kernel_share_ratio'] * 100:.2f} % of kernel time;"
      f" rows sum {sum(r['kernel_s'] for r in k['by_phase_part']):.6f} s vs kernel_s {k['attribution']['kernel_s']:.6f} s;"
      f" outside the model's modules {(k['attribution'].get('outside_model_kernel_share_ratio') or 0) * 100:.2f} %"
      f" ({k['attribution'].get('outside_model_rows')} rows: {[(o['op'], o['phase'], o['rows']) for o in (k.get('outside_model') or [])][:6]})")
print(f"forward kernel time: HF {ta * 1e3:.1f} ms, tprobe {tb * 1e3:.1f} ms")
worst = 0
for key in sorted(set(a) | set(b)):
    da, db = a.get(key, 0) * 100, b.get(key, 0) * 100
    worst = max(worst, abs(da - db))
    print(f"  forward {key[0]:>7} {key[1]:<15} HF {da:5.1f} %  tprobe {db:5.1f} %  diff {da - db:+5.1f} pt")
print(f"worst forward part share difference: {worst:.1f} points")
PY
say done
