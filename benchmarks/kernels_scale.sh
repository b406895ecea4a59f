#!/usr/bin/env bash
# `tprobe kernels` against the number of steps in one trace (issue 48, item 5): for each N, writes
# an N-step copy of a recorded trace (benchmarks/trace_repeat.py), then reports wall time, CPU
# time and peak RSS (/usr/bin/time -v) of `tprobe kernels --config CONFIG` on it, and of Python's
# json.load of the same file (and HTA's TraceAnalysis if /tmp/hta exists: its loader only), and
# deletes the file. Every run writes its evidence to a scratch file; the tprobe run's step count
# is printed so a reader can see all N steps were read.
#
# json.load and HTA run only on files of at most PY_MAX_MIB MiB of JSON (default 1200: json.load
# takes ~4.4x the file in RAM, HTA more); above that their lines say "skipped".
#
# Usage: benchmarks/kernels_scale.sh TPROBE TRACE CONFIG "N1 N2 ..." [gz]
#   e.g. benchmarks/kernels_scale.sh build/release/src/app/tprobe \
#          tests/fixtures/traces/hf-sdpa-stack-nonreentrant-2x256.json.gz \
#          tests/fixtures/gemma4-tiny-hf/config.json "1 5 46"
# Scratch files go under ${SCALE_DIR:-/tmp/kernels-scale} (check df -h first: ~22 MiB a step).
set -euo pipefail
tprobe=$1
trace=$2
config=$3
counts=$4
gz=${5:-}
py_max=${PY_MAX_MIB:-1200}
here=$(cd "$(dirname "$0")" && pwd)
dir=${SCALE_DIR:-/tmp/kernels-scale}
mkdir -p "$dir"

measure() {  # label command...: prints "label wall_s cpu_s peak_rss_mib"
  local label=$1
  shift
  local t
  t=$(mktemp)
  /usr/bin/time -v -o "$t" "$@" > /dev/null
  python3 - "$label" "$t" <<'EOF'
import re, sys
text = open(sys.argv[2]).read()
def field(name):
    return re.search(re.escape(name) + r": (.*)", text).group(1).strip()
wall = field("Elapsed (wall clock) time (h:mm:ss or m:ss)").split(":")
wall_s = sum(float(x) * 60 ** i for i, x in enumerate(reversed(wall)))
cpu = float(field("User time (seconds)")) + float(field("System time (seconds)"))
rss = int(field("Maximum resident set size (kbytes)")) / 1024
print(f"{sys.argv[1]:<12} wall {wall_s:7.2f} s  cpu {cpu:7.2f} s  peak RSS {rss:8.1f} MiB")
EOF
  rm -f "$t"
}

echo "# $(nproc) cores; tprobe: $tprobe; trace: $trace; config: $config"
for n in $counts; do
  out="$dir/repeat-$n.json${gz:+.gz}"
  python3 "$here/trace_repeat.py" "$trace" "$n" "$out" 2>/dev/null
  size=$(stat -c %s "$out")
  raw=$size
  [[ -n "$gz" ]] && raw=$(gzip -dc "$out" | wc -c)
  echo "## N=$n: $out, $((size / 1048576)) MiB on disk, $((raw / 1048576)) MiB of JSON"
  measure "tprobe" "$tprobe" kernels "$out" --config "$config" --top 3 \
    --json "$dir/evidence-$n.json"
  python3 -c "import json,sys; e=json.load(open(sys.argv[1])); print('   steps read:', len(e['results']['kernel_table']['steps']))" \
    "$dir/evidence-$n.json" 2>/dev/null || true
  if ((raw / 1048576 > py_max)); then
    echo "json.load    skipped (over PY_MAX_MIB=$py_max MiB)"
  else
    if [[ -n "$gz" ]]; then
      measure "json.load" python3 -c "import gzip,json,sys; json.load(gzip.open(sys.argv[1]))" "$out"
    else
      measure "json.load" python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$out"
    fi
    if [[ -d /tmp/hta ]]; then
      hta_dir=$(mktemp -d)
      ln -s "$(realpath "$out")" "$hta_dir/rank-0.json${gz:+.gz}"
      measure "hta" /usr/bin/python3 -c "import sys; sys.path.insert(0, '/tmp/hta')
from hta.trace_analysis import TraceAnalysis
a = TraceAnalysis(trace_dir=sys.argv[1]); a.get_gpu_kernel_breakdown(visualize=False)" \
        "$hta_dir" || echo "hta          failed"
      rm -rf "$hta_dir"
    fi
  fi
  rm -f "$out" "$dir/evidence-$n.json"
done
