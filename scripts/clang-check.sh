#!/usr/bin/env bash
# CI's second compiler (docs/ARCHITECTURE.md, "Two builds, one tree"): Debian's clang++ parses every
# torch-free translation unit (core, the CUPTI layer, the engine interface, probes, the binary) with the build's own
# flags and -Werror, -fsyntax-only — warnings, no code generation, no second build. It reads the
# compile commands of an already configured build (default build/asan), so the flags, include
# folders and generated headers are exactly the ones g++ used. A GCC-only warning (g++ 13's
# -Wdangling-reference on the GPU host) is not caught here, but clang's own set is.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/asan}
clang=${TPROBE_CLANG:-clang++}
python3 - "$build" "$clang" "${TPROBE_CLANG_JOBS:-$(nproc)}" <<'EOF'
import json, os, shlex, subprocess, sys
from concurrent.futures import ThreadPoolExecutor

build, clang, jobs = sys.argv[1], sys.argv[2], int(sys.argv[3])
root = os.getcwd()
torch_free = ("src/core/", "src/cupti/", "src/engine/", "src/runs/", "probes/", "src/app/")
# g++ spellings clang does not know (it would fail -Werror on the unknown option), and the
# precompiled header g++ built (clang reads its own format only).
drop = {"-Wshadow=local", "-Wno-maybe-uninitialized", "-Winvalid-pch"}
units = []
for c in json.load(open(os.path.join(build, "compile_commands.json"))):
    rel = os.path.relpath(c["file"], root)
    if "/Unity/unity_" in c["file"]:
        # A unity batch (TPROBE_UNITY): checked whole, named by the sources it includes, which
        # all belong to one target.
        with open(c["file"]) as f:
            parts = [os.path.relpath(l.split('"')[1], root) for l in f if l.startswith("#include")]
        if not parts or not parts[0].startswith(torch_free):
            continue
        rel = " + ".join(parts)
    elif not rel.startswith(torch_free):
        continue
    args = shlex.split(c["command"]) if "command" in c else c["arguments"]
    if args and args[0].endswith("ccache"):
        args = args[1:]
    out, skip = [clang], False
    for a in args[1:]:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MT", "-include"):
            skip = True  # the output, dependency file, and the g++ precompiled header
            continue
        if a in drop or a in ("-c", "-MD"):
            continue
        out.append(a)
    # -Wshadow=local in clang's terms.
    out += ["-fsyntax-only", "-Wshadow-uncaptured-local", "-Werror"]
    units.append((rel, out, c["directory"]))

# The third-party headers every unit parses, precompiled once per set of flags (clang's own PCH
# format; g++'s is dropped above): 167 s -> 133 s on the 2-core machine (CLI11 in it made it
# slower: 167 s). A PCH that does not build leaves its units parsing the headers themselves.
import tempfile
pch_dir = tempfile.mkdtemp(prefix="tprobe-clang-pch.")
pch_header = os.path.join(pch_dir, "common.hpp")
with open(pch_header, "w") as f:
    f.write("".join(f"#include <{h}>\n" for h in (
        "fmt/format.h", "nlohmann/json.hpp", "map", "memory", "optional", "string", "vector")))
def flags_of(cmd):
    return tuple(a for a in cmd[1:] if not a.endswith((".cpp", ".cc", ".cxx")))
groups = {}
for rel, cmd, cwd in units:
    groups.setdefault((flags_of(cmd), cwd), len(groups))
def build_pch(item):
    (flags, cwd), n = item
    out = os.path.join(pch_dir, f"common-{n}.pch")
    cmd = [clang] + [a for a in flags if a not in ("-fsyntax-only", "-Werror")] + \
          ["-x", "c++-header", pch_header, "-o", out]
    ok = subprocess.run(cmd, cwd=cwd, capture_output=True).returncode == 0
    return (flags, cwd), (out if ok else None)
with ThreadPoolExecutor(max_workers=jobs) as pool:
    pch = dict(pool.map(build_pch, groups.items()))

def check(unit):
    rel, cmd, cwd = unit
    built = pch.get((flags_of(cmd), cwd))
    if built:
        cmd = cmd + ["-include-pch", built]
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    return rel, p.returncode, p.stderr

failed = 0
with ThreadPoolExecutor(max_workers=jobs) as pool:
    for rel, rc, err in pool.map(check, units):
        if rc != 0:
            failed += 1
            sys.stderr.write(f"clang-check: {rel}\n{err}")
import shutil
shutil.rmtree(pch_dir, ignore_errors=True)
print(f"clang-check: {len(units)} torch-free translation units ({sum(1 for v in pch.values() if v)} "
      f"of {len(pch)} precompiled headers built), {failed} with warnings or errors")
sys.exit(1 if failed else 0)
EOF
