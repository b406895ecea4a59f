#!/usr/bin/env bash
# GPU host: what the autograd links cost the traced step. `tprobe profile --model gemma4-26b-a4b
# --widths W (default 2048) --repeats 5 --memory off`, with the RecordFunction links on (the
# default) and off (TPROBE_AUTOGRAD_LINKS=off), each point's traced step against its timed median.
# Expects a built tree (run after levers-edge.sh). Output: $OUT/linksab/.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
D=$OUT/linksab
W=${W:-2048}
mkdir -p "$D"
LOG=$D/log.txt
T=build/cuda/src/app/tprobe
for links in on off; do
  echo "== links $links ($(date +%T))" | tee -a "$LOG"
  TPROBE_AUTOGRAD_LINKS=$links timeout ${AB_TIMEOUT:-45} $T profile --model gemma4-26b-a4b --widths $W \
    --repeats 5 --memory off --json "$D/links-$links.json" >"$D/links-$links.txt" 2>&1
  echo "exit $?" | tee -a "$LOG"
  python3 - "$D/links-$links.json" <<'PY' 2>&1 | tee -a "$LOG"
import json, sys
for p in json.load(open(sys.argv[1]))["results"]["points"]:
    kt = p.get("kernel_trace") or {}
    print(f"{p['batch']}x{p['width']}: median {p['step']['median_s']:.4f} s, traced {p.get('traced_step_s')}, "
          f"overhead {100 * (p.get('trace_overhead_ratio') or 0):+.2f} %, untagged {(kt.get('attribution') or {}).get('untagged_records')}")
PY
done
