#!/usr/bin/env bash
# README command 2 (and .ci/run): install dependencies, build with -Werror — every torch-free
# translation unit under AddressSanitizer + UndefinedBehaviorSanitizer (the `asan` preset) — and
# run every test: unit, CLI, model, report browser test (docs/fuzzing.md says why one build); and
# clang -fsyntax-only -Werror over the torch-free code (scripts/clang-check.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
cmake --preset asan -DTPROBE_WERROR=ON "$@" >/dev/null
cmake --build build/asan -j "$(nproc)"
# The second compiler: clang parses the torch-free translation units with -Werror (about a minute).
scripts/clang-check.sh build/asan
ctest --preset asan -j "$(nproc)"
