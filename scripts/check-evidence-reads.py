#!/usr/bin/env python3
"""Typed evidence, read back by its own code: no consumer reads another probe's evidence by key.

Every `at("results")`, `["results"]`, `find("results")`, `contains("results")` or
`value("results"` in include/tprobe/, src/ and probes/ must sit inside a reader that reads a whole
`results` object into its probe's struct: a function whose name ends in `from_json` or is
`read_<something>_evidence`. The envelope's own file (src/core/base/evidence.cpp, which writes
`results` and checks that it is an object) is the one exception; KNOWN_OPEN would name readers not
yet typed, and is empty.

Usage: check-evidence-reads.py [REPO_ROOT]   (exit 0: clean; 1: every offending line printed)
       check-evidence-reads.py --self-test   (the negative controls: exit 0 when they behave)
"""
import os
import re
import sys

READ = re.compile(r'(\.at|\.find|\.contains|\.value)\(\s*"results"|\[\s*"results"\s*\]')
# A definition's first line: at column 0, a name followed by "(" (return type and qualifiers
# before it), not a comment, a preprocessor line or a closing brace.
DEFINITION = re.compile(r'^[A-Za-z_][\w:<>,*&\s]*?\b([A-Za-z_]\w*)\s*\(')
READER = re.compile(r'(from_json|^read_\w*evidence)$')
ENVELOPE = "src/core/base/evidence.cpp"
# Open work, named so it cannot grow unseen: (file, function) pairs still reading by key.
# None left: profile's points, the last, are read by engine's profile_points_from_json.
KNOWN_OPEN = set()


def enclosing_function(lines, index):
    for i in range(index, -1, -1):
        line = lines[i]
        if not line or line[0] in " \t/#}":
            continue
        m = DEFINITION.match(line)
        if m:
            return m.group(1)
    return None


def problems_in(rel, text):
    out = []
    if rel == ENVELOPE:
        return out
    lines = text.split("\n")
    for i, line in enumerate(lines):
        code = line.split("//", 1)[0]
        if not READ.search(code):
            continue
        fn = enclosing_function(lines, i)
        if (rel, fn) in KNOWN_OPEN:
            continue
        if fn is None or not READER.search(fn):
            out.append(f"{rel}:{i + 1}: reads results by key outside a from_json reader "
                       f"(in {fn or 'no function'}): {line.strip()}")
    return out


def check(root):
    problems = []
    for top in ("include/tprobe", "src", "probes"):
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if f.endswith((".cpp", ".hpp", ".h")):
                    path = os.path.join(d, f)
                    with open(path, encoding="utf-8") as fh:
                        problems += problems_in(os.path.relpath(path, root), fh.read())
    return problems


def self_test():
    consumer = ('double cost_of(const Json& doc) {\n'
                '  return doc.at("results")["coefficients"]["a"].get<double>();\n}\n')
    consumer2 = 'int64_t n(const Json& doc) {\n  const Json& r = doc["results"];\n  return 0;\n}\n'
    reader = ('ScalingFitReport scaling_fit_report_from_json(const Json& doc,\n'
              '                                              const std::string& where) {\n'
              '  const Json& r = doc.at("results");\n  return {};\n}\n')
    envelope_reader = ('Json read_scaling_fit_evidence(const Json& doc) {\n'
                       '  return doc["results"];\n}\n')
    comment = 'void f() {\n  // doc["results"] is read by its own reader\n}\n'
    failures = []
    for name, text, refused in [("a consumer by at()", consumer, True),
                                ("a consumer by []", consumer2, True),
                                ("a from_json reader", reader, False),
                                ("a read_*_evidence reader", envelope_reader, False),
                                ("a comment", comment, False)]:
        got = problems_in("src/core/x.cpp", text)
        if bool(got) != refused:
            failures.append(f"{name}: expected {'refused' if refused else 'accepted'}, got {got}")
    for f in failures:
        print(f)
    print(f"{len(failures)} of 5 controls misbehaved" if failures else "5 of 5 controls behaved")
    return 1 if failures else 0


def main():
    args = sys.argv[1:]
    if args == ["--self-test"]:
        return self_test()
    root = os.path.abspath(args[0] if args else os.path.join(os.path.dirname(__file__), ".."))
    problems = check(root)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} read(s) of results by key outside a reader")
        return 1
    print("every read of results is a probe's own reader")
    return 0


if __name__ == "__main__":
    sys.exit(main())
