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
fx=tests/fixtures/gemma4-tiny-hf  # written by Hugging Face transformers (scripts/make_parity_fixture.py)
run parity --checkpoint "$fx" --reference "$fx/reference.safetensors" --json "$out/parity.json"
echo
echo "evidence files written to $out/:"
ls -1 "$out"
