#!/usr/bin/env bash
# GPU host: `tprobe profile` on the 26B-A4B shapes (random init, LoRA r64 on q,k,v,o,gate,up,down,
# checkpointing, chunked CE, batch 2, grouped_mm) at widths 2048/8192/16384 plus the padded point
# (2x16384, one row half padded), with --attn sdpa, --attn flash-window and flash-window with
# --norm fused (RUNS picks among them), each point with one
# CUPTI-traced step beside the untraced ones (the overhead check); then the Hugging Face + PEFT step
# at the same widths and the same padded point, with a torch.profiler trace at 2x2048 for
# `tprobe kernels`. Needs build/cuda/src/app/tprobe (scripts/gpu-build.sh). Budget: <= 480 s.
# Everything goes to "$OUT/profile/"; a short table comes last.
set -u
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
D=$OUT/profile
mkdir -p "$D"
LOG=$D/log.txt
T=build/cuda/src/app/tprobe
say() { echo "== $* ($(date +%T))" | tee -a "$LOG"; }
say start
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$LOG"
git rev-parse HEAD 2>/dev/null | tee -a "$LOG"

COMMON=(--model gemma4-26b-a4b --random-init --device cuda --dtype bf16 --batch 2 --table-width 2048
        --widths 2048,8192,16384 --pad-fraction 0.5 --moe grouped_mm --checkpointing on --lora-dtype model
        --ce chunked --ce-chunk 4096 --rank 64 --alpha 128 --warmup 1 --repeats 2)

# RUNS picks the tprobe configurations and their order (default: all three); each is
# profile-NAME.{json,txt}. flash-window-fused is flash-window with --norm fused (at::rms_norm).
RUNS=${RUNS:-"sdpa flash-window flash-window-fused"}
for a in $RUNS; do
  case $a in
    sdpa) args=(--attn sdpa --raw-trace "$D/raw-trace-sdpa-2048.json"); limit=200 ;;
    flash-window) args=(--attn flash-window); limit=130 ;;
    flash-window-fused) args=(--attn flash-window --norm fused); limit=110 ;;
    *) echo "unknown run $a" | tee -a "$LOG"; continue ;;
  esac
  say tprobe profile $a
  timeout $limit $T profile "${COMMON[@]}" "${args[@]}" --json "$D/profile-$a.json" \
    >"$D/profile-$a.txt" 2>&1
  echo "exit $? ($a)" | tee -a "$LOG"
  grep -E " ok| oom| error|peak|refused|dropped" "$D/profile-$a.txt" | head -20 | tee -a "$LOG"
done

say scaling-fit from the profile evidence
for a in $RUNS; do
  [ -f "$D/profile-$a.json" ] && timeout 5 $T scaling-fit --profile "$D/profile-$a.json" \
    --json "$D/fit-$a.json" >"$D/fit-$a.txt" 2>&1; echo "scaling-fit exit $? ($a)" | tee -a "$LOG"
done

say hf step sdpa
timeout 115 python3 benchmarks/hf_lora_step.py --attn sdpa --seq 2048 8192 16384 --reps 1 \
  --pad-fraction 0.5 --trace-out "$D/hf-trace-2048.json" --json "$D/hf-sdpa.json" \
  >"$D/hf-sdpa.txt" 2>&1
echo "exit $? (hf)" | tee -a "$LOG"
grep -E "HF " "$D/hf-sdpa.txt" | tee -a "$LOG"

if $T kernels --help >/dev/null 2>&1 && [ -f "$D/hf-trace-2048.json" ] && [ -f "$D/profile-sdpa.json" ]; then
  say kernels: HF torch.profiler trace vs tprobe CUPTI table at 2x2048
  timeout 20 $T kernels "$D/hf-trace-2048.json" "$D/profile-sdpa.json" --json "$D/kernels-hf-vs-tprobe.json" \
    >"$D/kernels-hf-vs-tprobe.txt" 2>&1; echo "kernels exit $?" | tee -a "$LOG"
fi

say summary
python3 - "$D" <<'PY' 2>&1 | tee -a "$LOG"
import json, os, sys
d = sys.argv[1]
def load(name):
    try:
        with open(os.path.join(d, name)) as f:
            return json.load(f)
    except Exception as e:
        return None
def med(xs):
    xs = sorted(xs)
    n = len(xs)
    return None if n == 0 else (xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2]))
rows = {}
RUNS = ("sdpa", "flash-window", "flash-window-fused")
for a in RUNS:
    ev = load(f"profile-{a}.json")
    if not ev:
        print(f"tprobe {a}: no evidence"); continue
    r = ev["results"]
    print(f"tprobe {a}: peak {r['peak']['tflops']} TFLOP/s ({r['peak']['source']}); "
          f"kernel table {r['kernel_table']}; resolved {r['provenance']['attn_resolved']}")
    for p in r["points"] + r["padded_points"]:
        key = (p["width"], bool(p["padded"]))
        s = med(p["samples_s"]) if p["outcome"] == "ok" else None
        kt = p.get("kernel_trace") or {}
        rows.setdefault(key, {})[a] = (p["outcome"], s, p["peak_allocated_bytes"] / 2**30,
                                       p.get("trace_overhead_ratio"), p.get("performed_mfu_ratio"),
                                       kt.get("dropped_records"))
hf = load("hf-sdpa.json")
for w in (hf or {}).get("widths", []):
    key = (w["seq"], bool(w.get("lengths")))
    rows.setdefault(key, {})["hf"] = (w["outcome"], w.get("best_step_s"),
                                       (w.get("peak_allocated_bytes") or 0) / 2**30, None, None, None)
print(f"{'2 x width':>16} {'HF sdpa':>18} " + " ".join(f"{'tprobe ' + a:>30}" for a in RUNS))
def cell(v, extra=True):
    if v is None: return "-"
    o, s, g, ov, mfu, dr = v
    if o != "ok": return o
    t = f"{s:.3f} s {g:.1f} GiB"
    if extra and ov is not None: t += f" tr{ov*100:+.1f}%"
    if extra and mfu is not None: t += f" {mfu*100:.0f}%"
    return t
for key in sorted(rows):
    w, padded = key
    r = rows[key]
    print(f"{w:>10}{' pad' if padded else '    '}  {cell(r.get('hf'), False):>18} "
          + " ".join(f"{cell(r.get(a)):>30}" for a in RUNS))
print("tr = CUPTI-traced step vs untraced median; % = performed MFU vs the measured GEMM peak")
# The phase split of the traced step (CUPTI step tags): per phase, kernel time.
for a in RUNS:
    ev = load(f"profile-{a}.json")
    if not ev: continue
    for p in ev["results"]["points"][:1] + ev["results"]["padded_points"][:1]:
        kt = p.get("kernel_trace") or {}
        ph = {}
        for r in kt.get("by_phase_part") or []:
            ph[r["phase"]] = ph.get(r["phase"], 0) + r["kernel_s"]
        print(f"{a} 2x{p['width']}{' pad' if p['padded'] else ''}: records {kt.get('records')} "
              f"untagged {kt.get('untagged_records')} dropped {kt.get('dropped_records')} phases "
              + ", ".join(f"{k} {v*1e3:.1f} ms" for k, v in ph.items())
              + f"; problems {kt.get('problems')}")
PY
say done
