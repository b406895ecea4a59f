#!/usr/bin/env bash
# The unit and CLI tests again, built with AddressSanitizer + UndefinedBehaviorSanitizer (the
# `asan` preset). Run by scripts/test.sh after the plain suite. The libtorch model tests and the
# torch-backed parity CLI tests stay in the plain run: their translation units take minutes to
# build instrumented, and libtorch itself is not instrumented (docs/fuzzing.md).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset asan "$@" >/dev/null
targets=(tprobe tprobe_core_tests tprobe_cli_tests tprobe_scale_tests tprobe_fuzz_corpus_tests)
cmake --build build/asan -j "$(nproc)" --target "${targets[@]}"
# Tests of executables not built here show up as *_NOT_BUILT placeholders; ParityCli needs
# libtorch. Everything else (every reader's tests) runs.
ctest --preset asan -j "$(nproc)" -E 'NOT_BUILT|ParityCli'
