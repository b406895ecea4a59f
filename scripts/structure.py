#!/usr/bin/env python3
"""The house's structure in numbers, read from a checkout's sources: its rooms (a folder of src/
with its headers under include/tprobe/, probes/), each room's files and lines, its largest file,
and the includes between rooms — what a drawing of the tree shows, as a table that any commit
can be measured by (docs/ARCHITECTURE.md compares two).

A room is src/core/<folder> (src/core/trace/<room> where trace/ has rooms), src/<library> or
probes/, with include/tprobe/<same path> counted in it. Lines are every line of *.cpp, *.hpp,
*.h. An edge is a room's quoted #include of another room's header, counted once per pair.

Usage: structure.py [REPO_ROOT]   (prints a Markdown table and a totals line)
       structure.py --self-test     (a small tree of known rooms, lines and includes, measured)
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCE = (".cpp", ".hpp", ".h")


def room_of(rel):
    """The room of a path below src/, include/tprobe/ or probes/ (None: not in the house)."""
    for top in ("src/", "include/tprobe/"):
        if rel.startswith(top):
            parts = rel[len(top):].split("/")
            break
    else:
        return "probes" if rel.startswith("probes/") else None
    if len(parts) < 2:
        return None
    if parts[0] == "core" and len(parts) >= 3:
        if parts[1] == "trace" and len(parts) >= 4 and parts[2] not in ("detail",):
            return "core/trace/" + parts[2]
        return "core/" + parts[1]
    return parts[0]


LIBRARIES = ("runs", "model", "engine", "torch_api", "cupti", "app", "probes")


def include_room(path):
    """The room an include names: a public "tprobe/<room path>/x.hpp", or a private header by its
    path below src/core/ ("trace/read/detail/x.hpp", "base/x.hpp") or below src/ ("probes/x.hpp")."""
    if "/" not in path:
        return None
    if path.startswith("tprobe/"):
        return room_of("src/" + path[len("tprobe/"):])
    if path.split("/")[0] in LIBRARIES:
        return room_of("src/" + path)
    return room_of("src/core/" + path)


def measure(root):
    """{room: {"files", "lines", "largest": (path, lines)}} and the set of (room, included room)."""
    rooms = {}
    edges = set()
    for top in ("src", "include/tprobe", "probes"):
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                if not f.endswith(SOURCE):
                    continue
                rel = os.path.relpath(os.path.join(d, f), root).replace(os.sep, "/")
                room = room_of(rel)
                if room is None:
                    continue
                with open(os.path.join(d, f), encoding="utf-8", errors="replace") as fh:
                    text = fh.read()
                n = text.count("\n")
                r = rooms.setdefault(room, {"files": 0, "lines": 0, "largest": ("", 0)})
                r["files"] += 1
                r["lines"] += n
                if n > r["largest"][1]:
                    r["largest"] = (rel, n)
                for inc in INCLUDE.findall(text):
                    other = include_room(inc)
                    if other and other != room:
                        edges.add((room, other))
    return rooms, edges


def self_test():
    """A tree whose rooms, lines and includes are known: every figure must come out as written
    here, and a file outside the house (tests/) must not count."""
    import tempfile
    files = {
        "src/core/a/x.cpp": '#include "tprobe/core/b/y.hpp"\n#include <vector>\nint x;\n',
        "include/tprobe/core/b/y.hpp": "#pragma once\nint y();\n",
        "src/core/trace/stats/z.cpp": '#include "trace/stats/detail/w.hpp"\n',
        "src/core/trace/stats/detail/w.hpp": "#pragma once\n",
        "probes/p.cpp": '#include "tprobe/core/trace/stats/z.hpp"\n#include "tprobe/core/a/x.hpp"\n',
        "tests/t.cpp": '#include "tprobe/core/a/x.hpp"\nint t;\n',
    }
    with tempfile.TemporaryDirectory() as root:
        for rel, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
                f.write(text)
        rooms, edges = measure(root)
    want_rooms = {"core/a": (1, 3), "core/b": (1, 2), "core/trace/stats": (2, 2), "probes": (1, 2)}
    got_rooms = {k: (v["files"], v["lines"]) for k, v in rooms.items()}
    want_edges = {("core/a", "core/b"), ("probes", "core/trace/stats"), ("probes", "core/a")}
    problems = []
    if got_rooms != want_rooms:
        problems.append(f"rooms {got_rooms}, expected {want_rooms}")
    if edges != want_edges:
        problems.append(f"edges {sorted(edges)}, expected {sorted(want_edges)}")
    for p in problems:
        print("structure.py self-test: " + p)
    print("structure.py self-test: " + ("failed" if problems else "ok"))
    return 1 if problems else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    rooms, edges = measure(sys.argv[1] if len(sys.argv) > 1 else ".")
    print("| room | files | lines | largest file (lines) | includes rooms |")
    print("|---|---:|---:|---|---:|")
    for room in sorted(rooms, key=lambda k: -rooms[k]["lines"]):
        r = rooms[room]
        out = sum(1 for a, _ in edges if a == room)
        print(f"| {room} | {r['files']} | {r['lines']:,} | {r['largest'][0]} "
              f"({r['largest'][1]:,}) | {out} |")
    over = sum(1 for r in rooms.values() if r["largest"][1] > 800)
    print(f"\n{len(rooms)} rooms, {sum(r['files'] for r in rooms.values())} files, "
          f"{sum(r['lines'] for r in rooms.values()):,} lines, {len(edges)} room-to-room include "
          f"edges; rooms whose largest file passes 800 lines: {over}")


if __name__ == "__main__":
    sys.exit(main())
