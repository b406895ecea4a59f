#!/usr/bin/env bash
# The main job: every probe on its embedded default, no checkpoint, no GPU, no network.
# Tables go to stdout; evidence files to ${TPROBE_OUT:-out}/. Each later probe adds a line here.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${TPROBE_BIN:-build/cpu/src/app/tprobe}
out=${TPROBE_OUT:-out}
mkdir -p "$out"
run() {
  echo
  echo "\$ tprobe $*"
  "$bin" "$@"
}
run env --json "$out/env.json"
run inspect --model gemma4-26b-a4b --json "$out/inspect.json"
echo
echo "evidence files written to $out/:"
ls -1 "$out"
