#!/usr/bin/env python3
"""The library layering of docs/ARCHITECTURE.md, checked from the sources.

Every quoted #include in include/tprobe/, src/ and probes/ is mapped to the unit it names (a core
folder, engine, runs, model, cupti, probes, app) and checked against the table below: a unit
may include only the units it lists, so no include runs back up and no two units include each
other.
A quoted include of a private header ("src/...") from outside its own library is refused too.

docs/ARCHITECTURE.md is checked against the same table: its library table's "may use" column
(the units named there; "core" is every core folder) and its core folder table's "may include"
column must list exactly the units below, and the folder table must be ordered so that a folder
includes only folders above it.

No file name repeats across libraries: a stem (the name less .cpp/.hpp/.h) belongs to one library
(core, engine, runs, model, cupti, probes, app); a header and its source share it within one.

engine holds the engine's request and result types and the module's loader, nothing else: its
only sources are TYPES_ONLY_SOURCES (the loader, and the few members of its types). An analysis or
a view of those types is runs' (src/runs), and a new source in src/engine is refused.

Version guards have one home: no file but src/model/torch_compat.cpp tests the libtorch version
(TORCH_VERSION_MAJOR/MINOR or TPROBE_TORCH_AT_LEAST); the others ask it (has_sdpa(), ...).

Usage: check-layers.py [REPO_ROOT] [--doc ARCHITECTURE.md]   (exit 0: clean; 1: every offending
line printed). --doc checks another copy of the document (the tests' negative controls).
"""
import os
import re
import sys

# trace/ is in rooms (src/core/trace/<room>/, one static library each): each room is a unit.
TRACE = ["core/trace/record", "core/trace/attribute", "core/trace/stats", "core/trace/read",
         "core/trace/compare", "core/trace/export"]
CORE = ["core/base", "core/evidence", "core/io", "core/gemma4", "core/step", "core/data", "core/cost", "core/mask",
        *TRACE, "core/adapter", "core/report"]

# unit -> the units it may include (besides itself). Keep in step with docs/ARCHITECTURE.md.
ALLOWED = {
    "core/base": [],
    "core/evidence": ["core/base"],
    "core/io": ["core/base"],
    "core/gemma4": ["core/base", "core/io"],
    "core/step": ["core/base"],
    "core/data": ["core/base", "core/evidence", "core/io", "core/report"],
    "core/cost": ["core/base", "core/evidence", "core/io", "core/gemma4", "core/step", "core/data", "core/report"],
    "core/mask": ["core/base", "core/gemma4", "core/step", "core/report"],
    "core/trace/record": ["core/evidence"],
    "core/trace/attribute": ["core/base", "core/evidence", "core/trace/record"],
    "core/trace/stats": ["core/base", "core/evidence", "core/report", "core/trace/record", "core/trace/attribute"],
    "core/trace/read": ["core/base", "core/trace/record", "core/trace/attribute", "core/trace/stats"],
    "core/trace/compare": ["core/base", "core/trace/record", "core/trace/attribute", "core/trace/stats",
                           "core/trace/read"],
    "core/trace/export": ["core/base", "core/trace/record", "core/trace/attribute"],
    "core/adapter": ["core/base", "core/io", "core/gemma4", "core/report"],
    "core/report": ["core/base"],
    "cupti": ["core/base", "core/trace/record", "core/trace/attribute", "core/trace/stats"],
    "engine": CORE,
    "runs": CORE + ["engine"],
    "model": CORE + ["engine", "cupti"],
    "probes": CORE + ["runs", "engine"],
    "app": ["core/base", "probes"],
}

# The only sources of the engine's face (engine): every other .cpp there is refused.
TYPES_ONLY_SOURCES = {"src/engine/module_table.cpp"}

VERSION_GUARD = re.compile(r"TORCH_VERSION_M(AJOR|INOR)|TPROBE_TORCH_AT_LEAST")
GUARD_HOME = "src/model/torch_compat.cpp"

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
    if parts[0] == "core" and parts[1:2] == ["trace"]:
        return "core/trace/" + parts[2] if len(parts) > 3 else "core/trace"
    if parts[0] == "core":
        return "core/" + parts[1] if len(parts) > 2 else None
    return parts[0]


def unit_of_include(inc, from_unit):
    """The unit an include names, or None for the generated config header and third parties."""
    if inc == "tprobe/config.hpp":
        return None
    if inc.startswith("tprobe/"):
        parts = inc.split("/")[1:]
        if parts[:2] == ["core", "trace"] and len(parts) > 3:
            return "core/trace/" + parts[2]
        if parts[0] == "core" and len(parts) > 2:
            return "core/" + parts[1]
        return parts[0]
    if inc.startswith("probes/"):
        return "probes"
    if inc.startswith("src/"):
        return "private:" + inc
    # A path relative to src/core (core's private headers: "base/strict_json.hpp",
    # "trace/read/detail/json_tokenizer.hpp").
    first = inc.split("/")[0]
    if from_unit.startswith("core/") and first == "trace" and inc.count("/") > 1:
        return "core/trace/" + inc.split("/")[1]
    if from_unit.startswith("core/") and "core/" + first in CORE:
        return "core/" + first
    return None


LIBRARY_ROWS = {  # the library table's first column -> unit
    "`include/tprobe/engine/`, `src/engine/`": "engine",
    "`include/tprobe/runs/`, `src/runs/`": "runs",
    "`include/tprobe/model/`, `src/model/`": "model",
    "`include/tprobe/cupti/`, `src/cupti/`": "cupti",
    "`probes/`": "probes",
    "`src/app/`": "app",
}


def table_rows(text, header):
    """The rows under the markdown table whose header line starts with `header`, as cell lists."""
    at = text.find(header)
    if at < 0:
        return None
    rows = []
    for line in text[at:].split("\n")[2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def units_named(cell, folder_names):
    """The units a "may" cell names: core folders by name ("base", "io"), trace's rooms as
    "trace/<room>", libraries by name."""
    out = set()
    cell = cell.split("(")[0]
    for room in re.findall(r"(?:core/)?trace/([a-z_0-9]+)", cell):
        out.add("core/trace/" + room)
    cell = re.sub(r"(?:core/)?trace/[a-z_0-9]+", "", cell)
    for folder in re.findall(r"core/([a-z_0-9]+)", cell):
        out.add("core/" + folder)
    cell = re.sub(r"core/[a-z_0-9]+", "", cell)
    for word in re.findall(r"[a-z_0-9]+", cell):
        if word == "core":
            out.update(CORE)
        elif word in folder_names:
            out.add("core/" + word)
        elif word in ALLOWED:
            out.add(word)
    return out


def check_doc(path):
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    problems = []
    folder_names = [c.split("/")[1] for c in CORE]
    rows = table_rows(text, "| folder | holds | may include |")
    if rows is None:
        return ["docs/ARCHITECTURE.md: no core folder table (| folder | holds | may include |)"]
    listed = []
    for cells in rows:
        folder = "core/" + cells[0].strip("`/ ")
        if folder not in ALLOWED:
            problems.append(f"docs/ARCHITECTURE.md: folder table row {cells[0]} is not a core unit")
            continue
        doc = units_named(cells[-1], folder_names)
        if doc != set(ALLOWED[folder]):
            problems.append(f"docs/ARCHITECTURE.md: {cells[0]} may include {sorted(doc)}, "
                            f"check-layers.py says {sorted(ALLOWED[folder])}")
        above = set(listed)
        for dep in ALLOWED[folder]:
            if dep not in above:
                problems.append(f"docs/ARCHITECTURE.md: {cells[0]} includes {dep}, which the "
                                "folder table lists below it")
        listed.append(folder)
    for u in CORE:
        if u not in listed:
            problems.append(f"docs/ARCHITECTURE.md: core folder {u} has no row in the folder table")
    rows = table_rows(text, "| folder | target | what lives there | may use | must not use |")
    if rows is None:
        return problems + ["docs/ARCHITECTURE.md: no library table"]
    seen = set()
    for cells in rows:
        unit = LIBRARY_ROWS.get(cells[0])
        if unit is None:
            continue
        seen.add(unit)
        doc = units_named(cells[3], [])
        if doc != set(ALLOWED[unit]):
            problems.append(f"docs/ARCHITECTURE.md: {cells[0]} may use {sorted(doc)}, "
                            f"check-layers.py says {sorted(ALLOWED[unit])}")
    for unit in sorted(set(LIBRARY_ROWS.values()) - seen):
        problems.append(f"docs/ARCHITECTURE.md: library {unit} has no row in the library table")
    return problems


def main():
    args = sys.argv[1:]
    doc = None
    if "--doc" in args:
        i = args.index("--doc")
        if i + 1 >= len(args):
            print("check-layers.py: --doc needs a file")
            return 2
        doc = args[i + 1]
        del args[i:i + 2]
    root = os.path.abspath(args[0] if args else os.path.join(os.path.dirname(__file__), ".."))
    doc = doc or os.path.join(root, "docs", "ARCHITECTURE.md")
    problems = []
    seen_units = set()
    stems = {}  # file stem -> {library: first file}
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
                if unit == "engine" and rel.startswith("src/") and rel not in TYPES_ONLY_SOURCES:
                    problems.append(f"{rel}: engine holds the engine's types and loader only; "
                                    "analyses and views of them belong in src/runs")
                library = "core" if unit.startswith("core/") else unit
                stems.setdefault(os.path.splitext(f)[0], {}).setdefault(library, rel)
                with open(path, encoding="utf-8") as fh:
                    text = fh.read()
                guard = VERSION_GUARD.search(text)
                if guard and rel != GUARD_HOME:
                    line = text.count("\n", 0, guard.start()) + 1
                    problems.append(f"{rel}:{line}: a libtorch version guard outside {GUARD_HOME}")
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
    for stem, where in sorted(stems.items()):
        if len(where) > 1:
            problems.append(f"file name '{stem}' repeats across libraries: " +
                            ", ".join(where[lib] for lib in sorted(where)))
    problems += check_doc(doc)
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
