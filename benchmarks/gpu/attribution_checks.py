#!/usr/bin/env python3
"""The attribution checks of `tprobe profile` evidence, computed from the evidence with plain
Python (json only): for each profile-*.json in the folder given, per unpadded point,

- parts sum vs kernel total: sum of results.points[].kernel_trace.by_phase_part[].kernel_s
  against kernel_sum_s (relative difference);
- untagged: untagged_kernel_share_ratio;
- recompute vs forward: per (layer kind, part), |recompute - forward| / forward, worst row;
- backward experts: the backward/experts rows' sum against the forward's;
- attention core (parts) vs attention (kernel names), and the largest kernels between them;
- the traced step's overhead against the untraced median;
and the fit vs parts cross-check rows (results.share_check).
Usage: attribution_checks.py DIR
"""
import glob
import json
import os
import sys


def by(rows, phase):
    out = {}
    for r in rows:
        if r["phase"] == phase:
            key = (r["layer_kind"], r["part"])
            out[key] = out.get(key, 0.0) + r["kernel_s"]
    return out


def main(d):
    for path in sorted(glob.glob(os.path.join(d, "profile-*.json"))):
        name = os.path.basename(path)[len("profile-"):-len(".json")]
        with open(path) as f:
            ev = json.load(f)
        res = ev["results"]
        dev = ev.get("environment", {}).get("device", {})
        print(f"# {name}: {dev.get('name')} (compute capability {dev.get('compute_capability')}), "
              f"resolved {res['provenance']['attn_resolved']}")
        for p in res["points"]:
            kt = p.get("kernel_trace")
            if p["outcome"] != "ok" or not kt:
                print(f"  2x{p['width']}: {p['outcome']} {p.get('message')}")
                continue
            rows = kt["by_phase_part"]
            total = kt["kernel_sum_s"]
            parts = sum(r["kernel_s"] for r in rows)
            fwd, rec, bwd = by(rows, "forward"), by(rows, "recompute"), by(rows, "backward")
            worst = max(((abs(rec.get(k, 0) - v) / v, k) for k, v in fwd.items()
                         if v > 1e-4 and k[0] != "-"), default=(0, None))
            bwd_exp = sum(v for k, v in bwd.items() if k[1] == "experts")
            fwd_exp = sum(v for k, v in fwd.items() if k[1] == "experts")
            print(f"  2x{p['width']}: kernels {kt['kernels']} in {total:.4f} s, span {kt['span_s']:.4f} s;"
                  f" parts sum off by {abs(parts - total) / total * 100:.4f} %;"
                  f" untagged {kt['untagged_kernel_share_ratio'] * 100:.3f} %"
                  f" ({kt['attribution']['untagged_records']} records);"
                  f" recompute vs forward worst {worst[0] * 100:.2f} % {worst[1]};"
                  f" backward experts {bwd_exp:.4f} s vs forward {fwd_exp:.4f} s;"
                  f" attention core {kt['attention_core_share_ratio'] * 100:.1f} % vs named"
                  f" {kt['attention_share_ratio'] * 100:.1f} %;"
                  f" traced step {p.get('trace_overhead_ratio', 0) * 100:+.2f} %")
            for x in kt["attention_deltas"][:5]:
                print(f"      {x['side']}: {x['kernel']} x{x['kernels']} {x['kernel_s'] * 1e3:.1f} ms")
            ph = {}
            for r in rows:
                ph[r["phase"]] = ph.get(r["phase"], 0) + r["kernel_s"]
            print("      phases: " + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in ph.items()))
        sc = res.get("share_check")
        fit = res.get("scaling_fit") or {}
        ft = fit.get("fixed_term") or {}
        print(f"  fixed term: {ft.get('verdict')}")
        if sc and sc.get("determined"):
            for r in sc["rows"]:
                terms = "; ".join(f"{t['share_ratio'] * 100:+.1f} {t['term']}" for t in r["terms"][:3])
                print(f"  fit vs parts 2x{int(r['width'])}: fit {r['fit_quadratic_share_ratio'] * 100:.1f} %"
                      f" parts {r['parts_quadratic_share_ratio'] * 100:.1f} %"
                      f" diff {r['difference_ratio'] * 100:+.1f} pt [{terms}]")
        else:
            print(f"  fit vs parts: {res.get('share_check_note')}")


if __name__ == "__main__":
    main(sys.argv[1])
