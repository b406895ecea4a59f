#!/usr/bin/env python3
"""The library layering of docs/ARCHITECTURE.md, checked from the sources.

Every quoted #include in include/tprobe/, src/ and probes/ is mapped to the unit it names (a core
folder, torch_api, model, cupti, probes, app) and checked against the table below: a unit may
include only the units it lists, so no include runs back up and no two units include each other.
A quoted include of a private header ("src/...") from outside its own library is refused too.

Usage: check-layers.py [REPO_ROOT]   (exit 0: clean; 1: every offending line printed)
"""
import os
import re
import sys

CORE = ["core/base", "core/io", "core/gemma4", "core/step", "core/data", "core/cost", "core/mask",
        "core/trace", "core/adapter", "core/report"]

# unit -> the units it may include (besides itself). Keep in step with docs/ARCHITECTURE.md.
ALLOWED = {
    "core/base": [],
    "core/io": ["core/base"],
    "core/gemma4": ["core/base", "core/io"],
    "core/step": ["core/base"],
    "core/data": ["core/base", "core/io", "core/gemma4", "core/report"],
    "core/cost": ["core/base", "core/io", "core/gemma4", "core/step", "core/report"],
    "core/mask": ["core/base", "core/gemma4", "core/step", "core/report"],
    "core/trace": ["core/base", "core/io", "core/report"],
    "core/adapter": ["core/base", "core/io", "core/gemma4", "core/report"],
    "core/report": ["core/base"],
    "cupti": ["core/base", "core/trace"],
    "torch_api": CORE,
    "model": CORE + ["torch_api", "cupti"],
    "probes": CORE + ["torch_api"],
    "app": ["core/base", "probes"],
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def unit_of_file(rel):
    parts = rel.split("/")
    if parts[0] == "include" and len(parts) > 3 and parts[1] == "tprobe":
        parts = parts[2:]
    elif parts[0] == "src" and len(parts) > 2:
        parts = parts[1:]
    elif parts[0] == "probes":
        return "probes"
    else:
        return None
    if parts[0] == "core":
        return "core/" + parts[1] if len(parts) > 2 else None
    return parts[0]


def unit_of_include(inc, from_unit):
    """The unit an include names, or None for the generated config header and third parties."""
    if inc == "tprobe/config.hpp":
        return None
    if inc.startswith("tprobe/"):
        parts = inc.split("/")[1:]
        if parts[0] == "core" and len(parts) > 2:
            return "core/" + parts[1]
        return parts[0]
    if inc.startswith("probes/"):
        return "probes"
    if inc.startswith("src/"):
        return "private:" + inc
    # A path relative to src/core (core's private headers: "base/strict_json.hpp").
    first = inc.split("/")[0]
    if from_unit.startswith("core/") and "core/" + first in CORE:
        return "core/" + first
    return None


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), ".."))
    problems = []
    seen_units = set()
    for top in ("include/tprobe", "src", "probes"):
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if not f.endswith((".cpp", ".hpp", ".h")):
                    continue
                path = os.path.join(d, f)
                rel = os.path.relpath(path, root)
                unit = unit_of_file(rel)
                if unit is None:
                    continue
                if unit not in ALLOWED:
                    problems.append(f"{rel}: unit '{unit}' is not in the layering table")
                    continue
                seen_units.add(unit)
                with open(path, encoding="utf-8") as fh:
                    text = fh.read()
                for m in INCLUDE.finditer(text):
                    inc = m.group(1)
                    target = unit_of_include(inc, unit)
                    if target is None or target == unit:
                        continue
                    line = text.count("\n", 0, m.start()) + 1
                    if target.startswith("private:"):
                        problems.append(f"{rel}:{line}: includes a private header \"{inc}\"")
                    elif target not in ALLOWED[unit]:
                        problems.append(f"{rel}:{line}: {unit} may not include {target} (\"{inc}\")")
    missing = sorted(set(ALLOWED) - seen_units)
    for u in missing:
        problems.append(f"unit '{u}' has no files: the layering table is out of date")
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} layering problem(s); the table is in scripts/check-layers.py and "
              "docs/ARCHITECTURE.md")
        return 1
    print(f"layering clean: {len(seen_units)} units")
    return 0


if __name__ == "__main__":
    sys.exit(main())
