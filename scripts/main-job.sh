#!/usr/bin/env bash
# The main job: `tprobe suite` — every probe on its embedded default (no checkpoint, no GPU, no
# network) into ${TPROBE_OUT:-out}/, the report next to the evidence files, a progress line per
# probe. The suite's step list is in probes/suite_probe.cpp (one line per probe).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${TPROBE_BIN:-build/release/src/app/tprobe}
out=${TPROBE_OUT:-out}
# The suite's own evidence goes inside --out, whose folder must exist before the output guard
# checks it (docs/suite.md): make it first.
mkdir -p "$out"
"$bin" suite --out "$out" --fixtures tests/fixtures --json "$out/suite.json"
