#!/usr/bin/env bash
# README command 1's build: the `release` preset (no tests, no benchmarks) into build/release, and
# only what the main job runs — the tprobe binary and its torch module (the manual page and shell
# completions are written by the binary after it links). Extra arguments go to the configure step.
# `cpack -G DEB` in build/release then packs them (README, "Install").
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset release "$@" >/dev/null
cmake --build --preset release -j "$(nproc)"
