#!/usr/bin/env bash
# GPU host: `tprobe suite` with the CUDA build, so the report's provenance shows a real device and
# libtorch 2.11, plus lora-gate on the PEFT-saved adapters. Brings back 5 files in
# $OUT/gate-report/: report.html, report.md, suite.json, stdout.txt and all.tar.gz (every evidence
# file and log; OUT defaults to ./out). The suite runs in a temporary folder, removed at exit.
# Needs build/cuda/src/app/tprobe (scripts/gpu-build.sh). With a usable device the suite's
# profile and levers run the 26B-A4B shapes (--device auto; docs/suite.md, "On a GPU"):
# estimated under 5 minutes on the H200, not yet measured (it was about 2 with the CPU steps).
set -uo pipefail
cd "$(dirname "$0")/../.."
dest="${OUT:-$PWD/out}/gate-report"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$dest" "$work/logs"
bin=build/cuda/src/app/tprobe
if [ ! -x "$bin" ]; then echo "gate-report: $bin missing (run scripts/gpu-build.sh)" | tee "$dest/stdout.txt"; exit 1; fi
{
  timeout 600 "$bin" suite --out "$work" --fixtures tests/fixtures --json "$work/suite.json"
  echo "suite exit $?"
  for a in tests/fixtures/adapters/peft-*; do
    [ -d "$a" ] || continue
    n=$(basename "$a")
    timeout 60 "$bin" lora-gate "$a" --checkpoint tests/fixtures/gemma4-tiny-hf \
      --json "$work/lora-gate-$n.json" > "$work/logs/lora-gate-$n.txt" 2>&1
    echo "lora-gate $n exit $?"
  done
  timeout 60 "$bin" report "$work" > "$work/logs/report-final.txt" 2>&1
  echo "report exit $?"
} > "$dest/stdout.txt" 2>&1
cp "$work/report.html" "$work/report.md" "$work/suite.json" "$dest/" 2>/dev/null
tar czf "$dest/all.tar.gz" -C "$work" . 2>/dev/null
cat "$dest/stdout.txt"
