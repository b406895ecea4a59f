"""RMSNorm on the GPU: transformers' formula op by op vs torch's own rms_norm, forward and
forward+backward at the 26B-A4B hidden size and 2x16,384 tokens, with the error of each against
an fp64 reference. Run on the GPU host: python3 benchmarks/gpu/rms_norm_bench.py"""
import statistics

import torch
import torch.nn.functional as F

torch.manual_seed(0)
T, H, EPS = 2 * 16384, 2816, 1e-6
x = torch.randn(T, H, device="cuda", dtype=torch.bfloat16, requires_grad=True)
w = (torch.rand(H, device="cuda") + 0.5).to(torch.bfloat16)
g = torch.randn(T, H, device="cuda", dtype=torch.bfloat16)


def formula(t, weight):  # Gemma4RMSNorm in transformers 5.17
    tf = t.float()
    out = tf * torch.pow(tf.pow(2).mean(-1, keepdim=True) + EPS, -0.5)
    return (out * weight.float()).to(t.dtype)


def library(t, weight):
    return F.rms_norm(t, (H,), weight, EPS)


def timed(fn, backward, repeats=20, warmup=3):
    samples = []
    for i in range(warmup + repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        y = fn(x, w)
        if backward:
            y.backward(g)
        b.record()
        torch.cuda.synchronize()
        x.grad = None
        if i >= warmup:
            samples.append(a.elapsed_time(b))
    return statistics.median(samples)


xd = x.detach().double().requires_grad_(True)
ref = formula(xd, w.double())
ref.backward(g.double())
print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, "
      f"aten._fused_rms_norm: {hasattr(torch.ops.aten, '_fused_rms_norm')}")
print(f"{'impl':8} {'fwd ms':>8} {'fwd+bwd ms':>11} {'out rel.L2':>11} {'dx rel.L2':>10}")
for name, fn in (("formula", formula), ("library", library)):
    y = fn(x, w)
    y.backward(g)
    out_err = ((y.double() - ref).norm() / ref.norm()).item()
    dx_err = ((x.grad.double() - xd.grad).norm() / xd.grad.norm()).item()
    x.grad = None
    print(f"{name:8} {timed(fn, False):8.3f} {timed(fn, True):11.3f} {out_err:11.3e} {dx_err:10.3e}")
