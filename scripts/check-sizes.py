#!/usr/bin/env python3
"""No source file over 800 lines and no function over 150 lines without a reason (issue 47).

Reads every *.cpp, *.hpp and *.h under src/, include/ and probes/. A file over MAX_FILE lines must
say why it stays whole in a comment line containing `Size:` within its first 25 lines; a function
(a brace block opened at namespace or class scope whose head has a parenthesis: functions,
members, lambdas bound to a name) over MAX_FUNCTION lines, counted from its head's first line to
its closing brace, in a comment containing `Size:` on one of the 3 lines above its head.

Usage: check-sizes.py [REPO_ROOT]   (exit 0: clean; 1: every offender printed)
       check-sizes.py --self-test    (the negative controls: each offender refused, each reason
                                      accepted; exit 0 when they behave)
"""
import os
import re
import sys
import tempfile

MAX_FILE = 800
MAX_FUNCTION = 150
FILE_REASON_LINES = 25
FUNCTION_REASON_LINES = 3
SCOPE_WORDS = re.compile(r"^\s*(template\s*<.*>\s*)?(namespace|class|struct|union|enum|extern)\b")
REASON = re.compile(r"^\s*(//|/\*|\*).*\bSize:")


def code_only(text):
    """text with preprocessor lines, comments, string and char literals blanked (newlines kept), so braces count."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c == "#" and (i == 0 or text[i - 1] == "\n"):  # a preprocessor line, continued or not
            j = i
            while True:
                j = text.find("\n", j)
                if j < 0 or text[j - 1] != "\\":
                    break
                j += 1
            j = n if j < 0 else j
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == 'R' and text.startswith('R"', i) and (i == 0 or not text[i - 1].isalnum()):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'" and not (c == "'" and i > 0 and text[i - 1].isalnum()):  # 1'000 digit marks
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (min(j + 1, n) - i))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(text):
    """(first line, last line) of every function body opened at namespace or class scope."""
    code = code_only(text)
    stack = []  # per open brace: is it a function body, its head's first line
    head_start = 0  # offset where the current statement's head starts
    found = []
    for i, c in enumerate(code):
        if c in ";{}":
            if c == "{":
                head = code[head_start:i]
                in_function = any(kind == "function" for kind, _ in stack)
                is_function = (not in_function and "(" in head and not SCOPE_WORDS.match(head)
                               and not re.match(r"^\s*(if|for|while|switch|catch|do)\b", head))
                first = head_start + len(head) - len(head.lstrip())
                stack.append(("function" if is_function else "other", code.count("\n", 0, first) + 1))
            elif c == "}" and stack:
                kind, line = stack.pop()
                if kind == "function":
                    found.append((line, code.count("\n", 0, i) + 1))
            head_start = i + 1
    return found


def problems_of(path, rel):
    with open(path, encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    out = []
    if len(lines) > MAX_FILE and not any(REASON.match(l) for l in lines[:FILE_REASON_LINES]):
        out.append(f"{rel}: {len(lines)} lines (over {MAX_FILE}) and no `Size:` comment in its "
                   f"first {FILE_REASON_LINES} lines saying why it stays whole")
    for first, last in functions(text):
        size = last - first + 1
        above = lines[max(0, first - 1 - FUNCTION_REASON_LINES):first - 1]
        if size > MAX_FUNCTION and not any(REASON.match(l) for l in above):
            out.append(f"{rel}:{first}: a function of {size} lines (over {MAX_FUNCTION}) and no "
                       f"`Size:` comment in the {FUNCTION_REASON_LINES} lines above it")
    return out


def check(root):
    problems = []
    for top in ("src", "include", "probes"):
        for d, _, files in sorted(os.walk(os.path.join(root, top))):
            for f in sorted(files):
                if f.endswith((".cpp", ".hpp", ".h")):
                    path = os.path.join(d, f)
                    problems += problems_of(path, os.path.relpath(path, root))
    return problems


def self_test():
    body = "  int x = 0;\n" * (MAX_FUNCTION - 2)
    long_fn = "int long_one(int a) {\n" + body + "  int x = 0;\n  return a; }\n"
    tricky = 'const char* s = "{ not a brace";  // }\nchar c = \'{\';\n'
    cases = [  # (name, file text, refused?)
        ("a function over the limit", tricky + long_fn, True),
        ("the same with a reason above it", "// Size: one table.\n" + long_fn, False),
        ("the reason 4 lines above", "// Size: one table.\n\n\n\n" + long_fn, True),
        ("a function at the limit", "int f() {\n" + body + "}\n", False),
        ("a member in a class", "struct S {\n  int m() {\n" + body + "  return 1;\n  }\n};\n", True),
        ("a long if inside a short namespace", "namespace n {\n" + "void g() {\n" + "if (true) {\n"
         + body + "}\n}\n}\n", True),
        ("a long array, not a function", "const int k[] = {\n" + "  1,\n" * 200 + "};\n", False),
        ("a file over the limit", "int y;\n" * (MAX_FILE + 1), True),
        ("the same with a reason", "// Size: a table.\n" + "int y;\n" * MAX_FILE, False),
        ("the reason too low", "int y;\n" * FILE_REASON_LINES + "// Size: late.\n" + "int y;\n" * MAX_FILE, True),
    ]
    failures = []
    with tempfile.TemporaryDirectory() as tree:
        os.makedirs(os.path.join(tree, "src"))
        for name, text, refused in cases:
            path = os.path.join(tree, "src", "case.cpp")
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
            got = check(tree)
            if bool(got) != refused or (refused and "src/case.cpp" not in got[0]):
                failures.append(f"{name}: expected {'refused' if refused else 'accepted'}, got {got}")
    for f in failures:
        print(f)
    print(f"{len(failures)} of {len(cases)} controls misbehaved" if failures
          else f"{len(cases)} of {len(cases)} controls behaved")
    return 1 if failures else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    problems = check(root)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} size problem(s): split it, or say why it stays whole (`Size:`)")
        return 1
    print("sizes clean")
    return 0


if __name__ == "__main__":
    sys.exit(main())
