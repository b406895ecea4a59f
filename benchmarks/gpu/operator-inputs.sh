#!/usr/bin/env bash
# Issue 45 on the GPU host: the operator's inputs, measured.
#   PART=routing     build tprobe + its module; the family traces of issue 48
#                    (record-family-traces.sh); then `tprobe profile` on the 26B-A4B shapes
#                    (random weights, batch 2, 2,048 and 8,192, AdamW) under --routing computed,
#                    balanced, zipf:0.5, zipf:1.0 and zipf:1.5, one process each
#   PART=hf-routing  Hugging Face + PEFT + AdamW at the same points under the same forced routings
#                    (benchmarks/hf_lora_step.py --routing: a hook on every Gemma4TextRouter), one
#                    process for all
#   PART=load        a 26B-A4B-shaped checkpoint written with save_pretrained (random bf16,
#                    sharded + index); warm (page cache) then cold (posix_fadvise DONTNEED): HF's
#                    from_pretrained(device_map="cuda") and `tprobe profile --checkpoint` (the load,
#                    its host RssAnon peak and device peak; the step at 2x2,048), and the
#                    random-init step beside it
#   PART=routing-all PART=routing, then PART=hf-routing, in one call (one lease's time is short)
#   PART=combo       PART=load's warm half in one lease: the checkpoint written and the family
#                    traces recorded (SKIP_FAMILIES=1: not) while tprobe builds; TEMPS="warm cold"
#                    adds the cold pass; WAIT_PID=P: the loads wait until process P has ended;
#                    RANDOM_STEP=0: no random-init step (PART=routing's computed run stands for it)
#   PART=all         all of the above that fits one call's $BUDGET (550 s), in order of need
# Every part that builds runs one tiny CUDA step first (smoke(); SMOKE=0: not; SMOKE_STOP=0: go on
# after a failure). Output under $OUT/opin/, tarred into $OUT/opin-$PART.tgz (a call brings few
# files back).
set -u
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
D=$OUT/opin
mkdir -p "$D"
LOG=$D/log-${PART}.txt
T=build/cuda/src/app/tprobe
say() { echo "== $* ($(date +%T))" | tee -a "$LOG"; }
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader | tee -a "$LOG"
ROUTINGS=${ROUTINGS:-computed balanced zipf:0.5 zipf:1.0 zipf:1.5}
# One tiny step on the device right after the build (a few seconds): a GPU-only path the CPU tests
# cannot reach (2026-12-07: the allocator refused its statistics before CUDA had started, and every
# profile of a lease failed) shows here, its one-line error in the log, before the lease's minutes
# go on runs that would all fail the same way. SMOKE=0: not.
smoke() {
  [ "${SMOKE:-1}" = 1 ] || return 0
  say "smoke: tprobe profile --model gemma4-tiny --device cuda"
  if timeout 60 $T profile --model gemma4-tiny --device cuda --widths 64 --warmup 0 --repeats 1 \
      --trace off --memory off --json "$D/smoke.json" >"$D/smoke.txt" 2>"$D/smoke.err"; then
    echo "smoke ok" | tee -a "$LOG"
  else
    echo "smoke FAILED: $(tail -1 "$D/smoke.err")" | tee -a "$LOG"
    [ "${SMOKE_STOP:-1}" = 1 ] && { finish; exit 1; }
  fi
}
finish() { tar -C "$OUT" -czf "$OUT/opin-$PART.tgz" opin ${EXTRA_TAR:-}; ls -la "$OUT"; }
# PART=all: everything issue 45 needs of one lease, in order of need, inside $BUDGET seconds:
# the build with the checkpoint written beside it; tprobe's and HF's warm loads and steps; the
# forced routings (tprobe, then HF; HF_ROUTING=0: not); the cold pass; LATE_ROUTINGS (tprobe
# alone); each piece only if its time is left.
if [ "$PART" = all ]; then
  START=$(date +%s); BUDGET=${BUDGET:-550}
  left() { echo $(( BUDGET - ($(date +%s) - START) )); }
  C=${CKPT_DIR:-$PWD/.gpu-ckpt-26b}
  rm -rf "$C"
  ( timeout 300 python3 benchmarks/checkpoint_load.py write "$C" >"$D/write.json" 2>"$D/write.err" ) &
  wpid=$!
  say "all: build, the checkpoint written beside it"
  TPROBE_BUILD_TARGETS="tprobe tprobe_torch" bash scripts/gpu-build.sh -DTPROBE_WERROR=ON >"$D/build.txt" 2>&1
  echo "build exit $? in $(( $(date +%s) - START )) s; warnings: $(grep -c 'warning:' "$D/build.txt")" | tee -a "$LOG"
  grep -m5 -A6 'error:\|warning:' "$D/build.txt" | tee -a "$LOG"
  smoke
  wait $wpid; echo "write exit $?" | tee -a "$LOG"; cat "$D/write.json" | tee -a "$LOG"
  du -sh "$C" | tee -a "$LOG"
  summarize() {
    python3 - "$1" <<'PY' | tee -a "$LOG"
import json, sys
r = json.load(open(sys.argv[1]))["results"]
l = r.get("load") or {}
g = lambda v: f"{v / 2**30:.2f} GiB" if v else "-"
if l:
    print(f'load {l.get("seconds", 0):.1f} s ({l.get("bytes", 0) / 2**30:.1f} GiB, {l.get("readers")} readers), '
          f'RssAnon peak {g(l.get("host_rss_anon_peak_bytes"))}, device peak {g(l.get("device_peak_allocated_bytes"))}')
for p in r["points"]:
    el = p.get("expert_load") or []
    mm = max((e["max_over_mean"] for e in el), default=0)
    st = p["step"]["median_s"] if p.get("step") else None
    print(f'{p["batch"]}x{p["width"]} {p["outcome"]}: step {st} s, peak {g(p.get("peak_allocated_bytes"))}, '
          f'max/mean (worst layer) {mm:.2f}; init {r["init_s"]:.1f} s')
PY
  }
  prof() {  # name, seconds allowed, then profile's arguments
    local name=$1 t=$2; shift 2
    [ "$(left)" -gt "$t" ] || { echo "skip $name: $(left) s left" | tee -a "$LOG"; return; }
    say "tprobe $name"
    timeout "$t" $T profile --trace off --memory off --json "$D/$name.json" "$@" >"$D/$name.txt" 2>"$D/$name.err"
    echo "exit $?" | tee -a "$LOG"; tail -2 "$D/$name.err" | tee -a "$LOG"
    [ -s "$D/$name.json" ] && summarize "$D/$name.json"
  }
  hfload() {
    [ "$(left)" -gt 60 ] || { echo "skip HF $1: $(left) s left" | tee -a "$LOG"; return; }
    say "HF from_pretrained ($1)"
    timeout 90 python3 benchmarks/checkpoint_load.py hf "$C" 2>"$D/hf-$1.err" | tee -a "$LOG" "$D/hf-$1.json"
    tail -1 "$D/hf-$1.err" | tee -a "$LOG"
  }
  prof ckpt-warm 120 --checkpoint "$C" --widths 2048 --warmup 1 --repeats 3
  hfload warm
  for r in $ROUTINGS; do
    prof "routing-${r/:/-}" 90 --model gemma4-26b-a4b --widths 2048,8192 --warmup 1 --repeats 2 --routing "$r"
  done
  if [ "${HF_ROUTING:-1}" = 1 ] && [ "$(left)" -gt 150 ]; then
    say "HF + PEFT + AdamW, forced routings: $ROUTINGS"
    timeout $(( $(left) - 100 )) python3 benchmarks/hf_lora_step.py --seq 2048 8192 --reps 2 \
      --routing $ROUTINGS --json "$D/hf-routing.json" >"$D/hf-routing.txt" 2>&1
    echo "exit $?" | tee -a "$LOG"; grep -E "^HF|routing hook|Error" "$D/hf-routing.txt" | tee -a "$LOG"
  else
    echo "skip HF routing: $(left) s left" | tee -a "$LOG"
  fi
  if [ "$(left)" -gt 150 ]; then
    python3 benchmarks/checkpoint_load.py evict "$C" | tee -a "$LOG"
    prof ckpt-cold 90 --checkpoint "$C" --widths 2048 --warmup 1 --repeats 3
    python3 benchmarks/checkpoint_load.py evict "$C" | tee -a "$LOG"
    hfload cold
  else
    echo "skip the cold pass: $(left) s left" | tee -a "$LOG"
  fi
  for r in ${LATE_ROUTINGS:-}; do  # tprobe alone, after the cold pass, while time is left
    prof "routing-${r/:/-}" 90 --model gemma4-26b-a4b --widths 2048,8192 --warmup 1 --repeats 2 --routing "$r"
  done
  finish; exit 0
fi
case "$PART" in
routing-all)
  PART=routing bash "$0"; PART=hf-routing bash "$0"
  PART=routing-all; finish ;;
routing)
  say build
  s=$(date +%s)
  TPROBE_BUILD_TARGETS="tprobe tprobe_torch" bash scripts/gpu-build.sh -DTPROBE_WERROR=ON >"$D/build.txt" 2>&1
  echo "build exit $? in $(( $(date +%s) - s )) s; warnings: $(grep -c 'warning:' "$D/build.txt")" | tee -a "$LOG"
  grep -m5 -A6 'error:\|warning:' "$D/build.txt" | tee -a "$LOG"
  smoke
  if [ -z "${SKIP_FAMILIES:-}" ]; then
    say family traces
    timeout 150 bash benchmarks/gpu/record-family-traces.sh >"$D/families.txt" 2>&1
    echo "families exit $?" | tee -a "$LOG"; tail -5 "$D/families.txt" | tee -a "$LOG"
    EXTRA_TAR=family-traces
  fi
  for r in $ROUTINGS; do
    say "tprobe --routing $r"
    timeout 150 $T profile --model gemma4-26b-a4b --widths 2048,8192 --warmup 1 --repeats 2 \
      --trace off --memory off --routing "$r" --json "$D/tprobe-${r/:/-}.json" \
      >"$D/tprobe-${r/:/-}.txt" 2>"$D/tprobe-${r/:/-}.err"
    echo "exit $?" | tee -a "$LOG"
    python3 - "$D/tprobe-${r/:/-}.json" <<'PY' | tee -a "$LOG"
import json, sys, statistics
r = json.load(open(sys.argv[1]))["results"]
for p in r["points"]:
    el = p.get("expert_load") or []
    mm = max((e["max_over_mean"] for e in el), default=0)
    print(f'{p["batch"]}x{p["width"]} {p["outcome"]}: step {p["step"]["median_s"] if p["step"] else None} s, '
          f'peak {p["peak_allocated_bytes"] / 2**30 if p["peak_allocated_bytes"] else 0:.2f} GiB, '
          f'max/mean (worst layer) {mm:.2f}, init {r["init_s"]:.1f} s')
PY
  done
  finish ;;
hf-routing)
  say "HF + PEFT + AdamW, forced routings: $ROUTINGS"
  timeout 560 python3 benchmarks/hf_lora_step.py --seq 2048 8192 --reps 2 --routing $ROUTINGS \
    --json "$D/hf-routing.json" >"$D/hf-routing.txt" 2>&1
  echo "exit $?" | tee -a "$LOG"; grep -E "^HF|routing hook|Error" "$D/hf-routing.txt" | tee -a "$LOG"
  finish ;;
load|combo)
  df -h . /tmp | tee -a "$LOG"
  free -g | tee -a "$LOG"
  C=${CKPT_DIR:-$PWD/.gpu-ckpt-26b}
  if [ "$PART" = combo ]; then
    # One lease: the checkpoint written and the family traces recorded on the GPU while the CPU
    # builds tprobe; then the warm loads (no cold pass).
    say "combo: write + family traces in the background, build in front"
    rm -rf "$C"
    ( timeout 420 python3 benchmarks/checkpoint_load.py write "$C" >"$D/write.json" 2>"$D/write.err" ) &
    wpid=$!
    fpid=
    if [ -z "${SKIP_FAMILIES:-}" ]; then
      ( timeout 200 bash benchmarks/gpu/record-family-traces.sh >"$D/families.txt" 2>&1 ) &
      fpid=$!
    fi
    s=$(date +%s)
    TPROBE_BUILD_TARGETS="tprobe tprobe_torch" bash scripts/gpu-build.sh -DTPROBE_WERROR=ON >"$D/build.txt" 2>&1
    echo "build exit $? in $(( $(date +%s) - s )) s; warnings: $(grep -c 'warning:' "$D/build.txt")" | tee -a "$LOG"
    grep -m5 -A6 'error:\|warning:' "$D/build.txt" | tee -a "$LOG"
    smoke
    if [ -n "$fpid" ]; then
      wait $fpid; echo "families exit $?" | tee -a "$LOG"; tail -4 "$D/families.txt" | tee -a "$LOG"
      EXTRA_TAR=family-traces
    fi
    wait $wpid; echo "write exit $?" | tee -a "$LOG"; cat "$D/write.json" | tee -a "$LOG"; tail -3 "$D/write.err" | tee -a "$LOG"
    EXTRA_TAR=family-traces
  fi
  if [ ! -x "$T" ]; then
    say build
    TPROBE_BUILD_TARGETS="tprobe tprobe_torch" bash scripts/gpu-build.sh -DTPROBE_WERROR=ON >"$D/build.txt" 2>&1
    echo "build exit $?" | tee -a "$LOG"; grep -m5 -A6 'error:' "$D/build.txt" | tee -a "$LOG"
  fi
  if [ ! -f "$C/model.safetensors.index.json" ]; then
    say "write the checkpoint to $C"
    rm -rf "$C"
    timeout 300 python3 benchmarks/checkpoint_load.py write "$C" 2>"$D/write.err" | tee -a "$LOG"
    tail -3 "$D/write.err" | tee -a "$LOG"
  fi
  du -sh "$C" | tee -a "$LOG"
  if [ -n "${WAIT_PID:-}" ]; then  # a GPU job started beside this one: the loads run alone
    say "wait for process $WAIT_PID"
    while kill -0 "$WAIT_PID" 2>/dev/null; do sleep 2; done
  fi
  tp() {  # one tprobe profile on the checkpoint, or random init when $2 is empty
    local src=(--model gemma4-26b-a4b); [ -n "$2" ] && src=(--checkpoint "$2")
    timeout 200 $T profile "${src[@]}" --widths 2048 --warmup 1 \
      --repeats 3 --trace off --memory off --json "$D/$1.json" >"$D/$1.txt" 2>"$D/$1.err"
    echo "exit $?" | tee -a "$LOG"
    python3 - "$D/$1.json" <<'PY' | tee -a "$LOG"
import json, sys
r = json.load(open(sys.argv[1]))["results"]
l = r.get("load", {})
p = r["points"][0]
g = lambda v: f"{v / 2**30:.2f} GiB" if v else "-"
print(f'load {l.get("seconds", 0):.1f} s ({l.get("bytes", 0) / 2**30:.1f} GiB, {l.get("readers")} readers), '
      f'RssAnon peak {g(l.get("host_rss_anon_peak_bytes"))}, device peak {g(l.get("device_peak_allocated_bytes"))}; '
      f'init {r["init_s"]:.1f} s; step {p["step"]["median_s"]:.4f} s, peak {g(p["peak_allocated_bytes"])}')
PY
  }
  temps=${TEMPS:-warm cold}; [ "$PART" = combo ] && temps=${TEMPS:-warm}
  for temp in $temps; do
    if [ $temp = cold ]; then python3 benchmarks/checkpoint_load.py evict "$C" | tee -a "$LOG"; fi
    say "tprobe profile --checkpoint ($temp)"
    tp "tprobe-ckpt-$temp" "$C"
    if [ $temp = cold ]; then python3 benchmarks/checkpoint_load.py evict "$C" | tee -a "$LOG"; fi
    say "HF from_pretrained ($temp)"
    timeout 200 python3 benchmarks/checkpoint_load.py hf "$C" 2>"$D/hf-$temp.err" | tee -a "$LOG" "$D/hf-$temp.json"
    tail -2 "$D/hf-$temp.err" | tee -a "$LOG"
  done
  if [ "${RANDOM_STEP:-1}" = 1 ]; then  # RANDOM_STEP=0: PART=routing's `computed` run is the reference
    say "tprobe random init"
    tp tprobe-random ""
  fi
  finish ;;
*) echo "PART=routing|hf-routing|load|combo" >&2; exit 2 ;;
esac
