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
# The embedded synthetic corpus; truncation at 8,192 as in the post-mortem (domain.md item 8).
run padding --max-seq-len 8192 --json "$out/padding.json"
# --cost: the post-mortem's published fit (domain.md item 1), until a scaling-fit file is at hand.
run bucket --cost 6.8715e-4,8.8509e-8 --json "$out/bucket.json" --emit-order "$out/bucket-order.jsonl"
echo
echo "evidence files written to $out/:"
ls -1 "$out"
