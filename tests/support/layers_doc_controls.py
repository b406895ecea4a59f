#!/usr/bin/env python3
"""Negative controls of scripts/check-layers.py's document check: docs/ARCHITECTURE.md altered
three ways (a narrowed cell, a folder moved below a folder that includes it, a widened
library cell), each of which must be refused with a line naming the row; the unaltered copy passes.
And of its version-guard rule: a copy of the tree with a libtorch version test added outside
torch_compat.cpp must be refused with a line naming that file; one with a probe file named like
a core file must be refused with a line naming both; one with a view added to engine (which
holds the engine's types and loader only) must be refused with a line naming it; one with a room of
trace/ including a room below it (stats/ the reader) must be refused with a line naming it.

Usage: layers_doc_controls.py REPO_ROOT   (exit 0: every control behaved; 1 otherwise)
"""
import os
import shutil
import subprocess
import sys
import tempfile


def run(root, doc_text):
    with tempfile.NamedTemporaryFile("w", suffix=".md", delete=False, encoding="utf-8") as f:
        f.write(doc_text)
        path = f.name
    try:
        p = subprocess.run([sys.executable, os.path.join(root, "scripts", "check-layers.py"), root,
                            "--doc", path], capture_output=True, text=True)
        return p.returncode, p.stdout
    finally:
        os.unlink(path)


def copy_tree(root, tree):
    """The folders check-layers.py reads, copied from root into tree."""
    for top in ("include", "src", "probes", "docs", "scripts"):
        shutil.copytree(os.path.join(root, top), os.path.join(tree, top))


def main():
    root = os.path.abspath(sys.argv[1])
    with open(os.path.join(root, "docs", "ARCHITECTURE.md"), encoding="utf-8") as fh:
        text = fh.read()
    lines = text.split("\n")
    failures = []
    rc, out = run(root, text)
    if rc != 0:
        failures.append("the unaltered document is refused:\n" + out)

    def row(prefix):
        return next(i for i, l in enumerate(lines) if l.startswith(prefix))

    stats = row("| `trace/stats/` |")
    narrowed = list(lines)
    assert narrowed[stats].endswith("| base, evidence, report, trace/record, trace/attribute |")
    narrowed[stats] = narrowed[stats].replace(", trace/attribute |", " |")
    swapped = list(lines)
    rep = swapped.pop(row("| `report/` |"))
    swapped.insert(row("| `adapter/` |"), rep)  # now below adapter/, which includes it
    widened = list(lines)
    cupti = row("| `include/tprobe/cupti/`")
    widened[cupti] = widened[cupti].replace("`core/trace/stats`, CUPTI",
                                            "`core/trace/stats`, `core/io`, CUPTI")
    for name, doc, says in [
        ("trace/stats/ narrowed", narrowed,
         "`trace/stats/` may include ['core/base', 'core/evidence', 'core/report', 'core/trace/record']"),
        ("report/ moved below adapter/", swapped, "which the folder table lists below it"),
        ("cupti widened", widened, "may use ['core/base', 'core/io', 'core/trace/attribute'"),
    ]:
        rc, out = run(root, "\n".join(doc))
        if rc != 1 or says not in out:
            failures.append(f"{name}: exit {rc}, expected 1 and a line with {says!r}:\n{out}")
    with tempfile.TemporaryDirectory() as tree:
        copy_tree(root, tree)
        victim = os.path.join(tree, "src", "model", "attention_paths.cpp")
        with open(victim, "a", encoding="utf-8") as fh:
            fh.write("\n#if TPROBE_TORCH_AT_LEAST(2, 0)\n#endif\n")
        p = subprocess.run([sys.executable, os.path.join(root, "scripts", "check-layers.py"), tree],
                           capture_output=True, text=True)
        says = "src/model/attention_paths.cpp"
        if p.returncode != 1 or says not in p.stdout or "version guard" not in p.stdout:
            failures.append(f"guard outside torch_compat.cpp: exit {p.returncode}, expected 1 and "
                            f"a line naming {says}:\n{p.stdout}")
    with tempfile.TemporaryDirectory() as tree:
        copy_tree(root, tree)
        os.rename(os.path.join(tree, "probes", "padding_probe.cpp"),
                  os.path.join(tree, "probes", "padding.cpp"))
        p = subprocess.run([sys.executable, os.path.join(root, "scripts", "check-layers.py"), tree],
                           capture_output=True, text=True)
        says = "file name 'padding' repeats across libraries: include/tprobe/core/data/padding.hpp, probes/padding.cpp"
        if p.returncode != 1 or says not in p.stdout:
            failures.append(f"a probe file named like a core file: exit {p.returncode}, expected 1 "
                            f"and a line with {says!r}:\n{p.stdout}")
    with tempfile.TemporaryDirectory() as tree:
        copy_tree(root, tree)
        shutil.copy(os.path.join(tree, "src", "runs", "step_report.cpp"),
                    os.path.join(tree, "src", "engine", "step_views.cpp"))
        p = subprocess.run([sys.executable, os.path.join(root, "scripts", "check-layers.py"), tree],
                           capture_output=True, text=True)
        says = "src/engine/step_views.cpp: engine holds the engine's types and loader only"
        if p.returncode != 1 or says not in p.stdout:
            failures.append(f"a view in engine: exit {p.returncode}, expected 1 and a line "
                            f"with {says!r}:\n{p.stdout}")
    with tempfile.TemporaryDirectory() as tree:
        copy_tree(root, tree)
        victim = os.path.join(tree, "src", "core", "trace", "stats", "trace_series.cpp")
        with open(victim, "a", encoding="utf-8") as fh:
            fh.write('\n#include "tprobe/core/trace/read/trace_reader.hpp"\n')
        p = subprocess.run([sys.executable, os.path.join(root, "scripts", "check-layers.py"), tree],
                           capture_output=True, text=True)
        says = "src/core/trace/stats/trace_series.cpp"
        if p.returncode != 1 or says not in p.stdout or "core/trace/stats may not include core/trace/read" not in p.stdout:
            failures.append(f"a trace room including the reader above it: exit {p.returncode}, "
                            f"expected 1 and a line naming {says}:\n{p.stdout}")
    for f in failures:
        print(f)
    print(f"{len(failures)} of 8 controls misbehaved" if failures else "8 of 8 controls behaved")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
