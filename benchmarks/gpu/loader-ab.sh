#!/usr/bin/env bash
# Issue 46, item 2 on the GPU host: the tree built with -DTPROBE_WERROR=ON and its whole ctest, then
# the checkpoint loader of this tree (pread into owned buffers) beside the loader before it (a
# read-only mmap, tree OLD_TREE: a `git archive` of the commit before issue 46, carried unpacked in
# .gpu/old) on one 26B-A4B-shaped checkpoint (tprobe_make_checkpoint: the real tensor names and
# shapes, sparse zero data — what it times is the loader's own path from the page cache to the
# device, not a disk). Each loader loads it REPEATS times, alternating, through `profile
# --checkpoint` (one 1×256 step, no trace, no memory step); the figure is the evidence's init_s
# (the model built from the checkpoint and its LoRA added, synchronised) and the process's peak
# RSS (/usr/bin/time). Output: $OUT/loader-ab/.
# Here, before the call: scripts/stage-deps.sh; echo /.gpu/ >>.git/info/exclude; mkdir -p .gpu/old &&
#   git archive 03af0d7 CMakeLists.txt CMakePresets.json cmake src include probes benchmarks scripts |
#   tar -x -C .gpu/old — then carry .deps and .gpu.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-./out}/loader-ab
mkdir -p "$out"
REPEATS=${REPEATS:-3}
{ time bash scripts/gpu-build.sh -DTPROBE_WERROR=ON; } >"$out/build.log" 2>&1
echo "build rc $? ; warnings/errors: $(grep -cE 'warning|error:|FAILED' "$out/build.log")"
grep -E 'warning|error:|FAILED' "$out/build.log" | head -20
(cd build/cuda && ctest -j 8 >"$out/ctest.log" 2>&1); echo "ctest rc $?"; tail -4 "$out/ctest.log"
if [ -d .gpu/old ]; then
  (cd .gpu/old && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
     -DCMAKE_PREFIX_PATH="$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')" \
     -DTPROBE_DEPS_DIR="$PWD/../../.deps" -DTPROBE_ENABLE_CUPTI=OFF -DTPROBE_BUILD_TESTS=OFF \
     -DTPROBE_BUILD_BENCHMARKS=OFF >"$PWD/../../$out/old-configure.log" 2>&1 &&
   cmake --build build -j "$(nproc)" --target tprobe tprobe_torch >"$PWD/../../$out/old-build.log" 2>&1)
  echo "old build rc $?"
fi
ck=$(mktemp -d); trap 'rm -rf "$ck"' EXIT
build/cuda/tests/tprobe_make_checkpoint "$ck/ck" --model gemma4-26b-a4b --shards 4 || exit 1
du -sh --apparent-size "$ck/ck"
cat "$ck"/ck/*.safetensors >/dev/null  # into the page cache once, for both
printf '%-6s %3s %10s %12s %s\n' loader run init_s peak_rss_gib outcome
for i in $(seq 1 "$REPEATS"); do
  for which in new old; do
    bin=build/cuda/src/app/tprobe; [ "$which" = old ] && bin=.gpu/old/build/src/app/tprobe
    [ -x "$bin" ] || continue
    /usr/bin/time -f '%M' -o "$out/$which-$i.rss" "$bin" profile --device cuda --checkpoint "$ck/ck" \
      --widths 256 --batch 1 --warmup 0 --repeats 1 --trace off --memory off \
      --json "$out/$which-$i.json" >"$out/$which-$i.log" 2>&1
    rc=$?
    python3 - "$out/$which-$i.json" "$out/$which-$i.rss" "$which" "$i" "$rc" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))["results"]
    init = r.get("init_s") or r.get("steps", {}).get("init_s")
except Exception as e:
    init = None
rss = int(open(sys.argv[2]).read().split()[-1]) / 2**20
print(f"{sys.argv[3]:<6} {sys.argv[4]:>3} {init if init is None else f'{init:10.2f}'} {rss:12.2f} rc={sys.argv[5]}")
PY
  done
done
