#!/usr/bin/env python3
"""Write an N-step Chrome trace from a recorded one (issue 48, item 5; stdlib only).

Copy k (0-based) of every event is shifted k * span in time (span: the recorded trace's first
'ts' to its "Record Window End", plus 1 ms) and k * stride in every id the reader joins on
(args.correlation, args."External id", the flows' "id", args."Sequence number", args."Python id",
args."Python parent id", args."Record function id", args."Ev Idx"; 0 and negative ids stay), and a
"ProfilerStep#S" range becomes "ProfilerStep#(S + k)". Times are shifted as decimal text, so a
copy's ns are exactly the recorded ones plus the shift (a float would round them). Metadata
events ("ph": "M") and the "Record Window End" instant are written once (the instant at the
last copy's end). The result reads as N steps whose figures are N times the recorded one's.

    python3 benchmarks/trace_repeat.py IN.json[.gz] N OUT.json[.gz] [--level L]

OUT ending in .gz is written gzip (level L, default 1).
"""
import argparse
import decimal
import gzip
import json
import math
import re
import sys

ID_ARGS = ("correlation", "External id", "Sequence number", "Python id", "Python parent id",
           "Record function id", "Ev Idx")
STEP = re.compile(r"^ProfilerStep#(\d+)$")


def open_in(path):
    with open(path, "rb") as f:
        magic = f.read(2)
    return gzip.open(path, "rt", encoding="utf-8") if magic == b"\x1f\x8b" else open(
        path, encoding="utf-8")


def enc(v):
    """JSON text of a parsed value (Decimal numbers written as read)."""
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, dict):
        return "{" + ", ".join(json.dumps(k) + ": " + enc(x) for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(enc(x) for x in v) + "]"
    return json.dumps(v)


class Template:
    """One event as text pieces and fields that change per copy: ('ts', Decimal), ('id', int),
    ('step', int)."""

    def __init__(self, ev):
        self.pieces = []
        self._buf = []
        self._event(ev)
        self._flush()

    def _flush(self):
        if self._buf:
            self.pieces.append("".join(self._buf))
            self._buf = []

    def _field(self, kind, value):
        self._flush()
        self.pieces.append((kind, value))

    def _event(self, ev):
        self._buf.append("{")
        first = True
        for k, v in ev.items():
            self._buf.append(("" if first else ", ") + json.dumps(k) + ": ")
            first = False
            if k == "ts" and isinstance(v, decimal.Decimal):
                self._field("ts", v)
            elif k == "id" and ev.get("ph") in ("s", "f", "t") and isinstance(v, int) and v > 0:
                self._field("id", v)
            elif k == "name" and isinstance(v, str) and STEP.match(v):
                self._buf.append('"ProfilerStep#')
                self._field("step", int(STEP.match(v).group(1)))
                self._buf.append('"')
            elif k == "args" and isinstance(v, dict):
                self._buf.append("{")
                for j, (ak, av) in enumerate(v.items()):
                    self._buf.append(("" if j == 0 else ", ") + json.dumps(ak) + ": ")
                    if ak in ID_ARGS and isinstance(av, int) and not isinstance(av, bool) and (
                            av > 0 or (av == 0 and ak not in ("correlation", "External id"))):
                        self._field("id", av)
                    else:
                        self._buf.append(enc(av))
                self._buf.append("}")
            else:
                self._buf.append(enc(v))
        self._buf.append("}")

    def render(self, shift_us, stride, k):
        out = []
        for p in self.pieces:
            if isinstance(p, str):
                out.append(p)
            elif p[0] == "ts":
                out.append(str(p[1] + shift_us * k))
            elif p[0] == "id":
                out.append(str(p[1] + stride * k))
            else:
                out.append(str(p[1] + k))
        return "".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("input")
    ap.add_argument("n", type=int)
    ap.add_argument("output")
    ap.add_argument("--level", type=int, default=1, help="gzip level for a .gz output")
    a = ap.parse_args()
    if a.n < 1:
        sys.exit("trace_repeat.py: N must be at least 1")
    with open_in(a.input) as f:
        doc = json.load(f, parse_float=decimal.Decimal)
    events = doc.pop("traceEvents")
    ts = [e["ts"] for e in events if isinstance(e.get("ts"), (int, decimal.Decimal))]
    ends = [e["ts"] + e.get("dur", 0) for e in events
            if isinstance(e.get("ts"), (int, decimal.Decimal))
            and isinstance(e.get("dur", 0), (int, decimal.Decimal))]
    shift_us = int(math.ceil(max(ends) - min(ts))) + 1000
    max_id = 1
    for e in events:
        if e.get("ph") in ("s", "f", "t") and isinstance(e.get("id"), int):
            max_id = max(max_id, e["id"])
        for ak in ID_ARGS:
            v = (e.get("args") or {}).get(ak)
            if isinstance(v, int) and not isinstance(v, bool):
                max_id = max(max_id, v)
    stride = 10 ** len(str(max_id))
    once, window_end, body = [], None, []
    for e in events:
        if e.get("ph") == "M":
            once.append(enc(e))
        elif e.get("ph") in ("i", "I") and e.get("name") == "Record Window End":
            window_end = Template(e)
        else:
            body.append(Template(e))
    opener = (lambda p: gzip.open(p, "wt", encoding="utf-8", compresslevel=a.level)) \
        if a.output.endswith(".gz") else (lambda p: open(p, "w", encoding="utf-8"))
    with opener(a.output) as out:
        out.write("{\n")
        for k, v in doc.items():
            out.write("  " + json.dumps(k) + ": " + enc(v) + ",\n")
        out.write('  "traceEvents": [\n')
        first = True
        for text in once:
            out.write(("" if first else ",\n") + text)
            first = False
        for k in range(a.n):
            out.write(("" if first else ",\n") +
                      ",\n".join(t.render(shift_us, stride, k) for t in body))
            first = False
        if window_end is not None:
            out.write(",\n" + window_end.render(shift_us, stride, a.n - 1))
        out.write("\n  ]\n}\n")
    print(f"trace_repeat.py: {a.n} copies of {len(body)} events, {shift_us} us and id stride "
          f"{stride} apart -> {a.output}", file=sys.stderr)


if __name__ == "__main__":
    main()
