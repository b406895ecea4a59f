// Blockwise-GEMM attention with a recomputing backward: the path for head_dim > 256 on CUDA and a
// device-independent one elsewhere (docs/global-attention.md).
#include "tprobe/model/blockwise_attention.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <string>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/interrupt.hpp"
#include "tprobe/model/attention.hpp"
#include "tprobe/model/autograd_links.hpp"

namespace tprobe::model {
namespace {

// Each query block is an op boundary where a signal stops the step, naming the block.
void stop_if_interrupted(const char* pass, int64_t i0, int64_t seq) {
  if (core::interrupt_requested()) {
    throw core::Interrupted(
        fmt::format("blockwise attention's {} (query rows {} of {})", pass, i0, seq));
  }
}

using torch::Tensor;

// Everything both passes need about one call, derived once from the shapes and options.
struct Geometry {
  int64_t batch = 0, q_heads = 0, kv_heads = 0, group = 0, seq = 0, dim = 0;
  int64_t block = 0, window = 0;
  std::vector<int64_t> lengths;  // empty: no padding
  int64_t max_length = 0;        // keys and queries at or beyond it are padding for every row
  int64_t min_length = 0;
  Tensor lengths_device;  // int64 [B, 1, 1, 1, 1] on the device, when lengths are given

  // The block row [i0, i0 + rows) reads keys [k0, k1).
  int64_t key_begin(int64_t i0) const {
    return window > 0 ? std::max<int64_t>(0, i0 - window + 1) : 0;
  }
  int64_t key_end(int64_t i1) const { return std::min(i1, max_length); }
};

torch::ScalarType accumulate_type(const Tensor& q) {
  return q.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
}

Geometry make_geometry(const Tensor& q, const Tensor& k, const Tensor& v,
                       const BlockwiseAttentionOptions& o) {
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4) {
    fail("blockwise attention: q, k, v must be 4-D [B, H, S, D], got {}-D, {}-D, {}-D", q.dim(),
         k.dim(), v.dim());
  }
  Geometry g;
  g.batch = q.size(0);
  g.q_heads = q.size(1);
  g.seq = q.size(2);
  g.dim = q.size(3);
  g.kv_heads = k.size(1);
  if (k.sizes() != v.sizes() || k.size(0) != g.batch || k.size(2) != g.seq || k.size(3) != g.dim) {
    fail("blockwise attention: k {} and v {} must be [B={}, Hkv, S={}, D={}]", c10::str(k.sizes()),
         c10::str(v.sizes()), g.batch, g.seq, g.dim);
  }
  if (g.kv_heads < 1 || g.q_heads % g.kv_heads != 0) {
    fail("blockwise attention: {} query heads are not a multiple of {} kv heads", g.q_heads,
         g.kv_heads);
  }
  const auto t = q.scalar_type();
  if (t != torch::kFloat && t != torch::kDouble && t != torch::kBFloat16 && t != torch::kHalf) {
    fail(
        "blockwise attention: dtype {} is not a floating type it supports (fp64, fp32, bf16, fp16)",
        std::string(c10::toString(t)));
  }
  if (k.scalar_type() != t || v.scalar_type() != t || k.device() != q.device() ||
      v.device() != q.device()) {
    fail("blockwise attention: q, k, v must share dtype and device");
  }
  if (o.block < 1) fail("blockwise attention: block {} must be >= 1", o.block);
  if (o.window < 0) fail("blockwise attention: window {} must be >= 0", o.window);
  g.group = g.q_heads / g.kv_heads;
  g.block = o.block;
  g.window = o.window;
  g.max_length = g.seq;
  g.min_length = g.seq;
  if (!o.lengths.empty()) {
    if (static_cast<int64_t>(o.lengths.size()) != g.batch) {
      fail("blockwise attention: {} lengths for a batch of {}", o.lengths.size(), g.batch);
    }
    for (size_t b = 0; b < o.lengths.size(); ++b) {
      if (o.lengths[b] < 0 || o.lengths[b] > g.seq) {
        fail("blockwise attention: lengths[{}] = {} outside [0, {}]", b, o.lengths[b], g.seq);
      }
    }
    g.lengths = o.lengths;
    g.max_length = *std::max_element(o.lengths.begin(), o.lengths.end());
    g.min_length = *std::min_element(o.lengths.begin(), o.lengths.end());
    g.lengths_device =
        torch::tensor(o.lengths, torch::kLong).to(q.device()).view({g.batch, 1, 1, 1, 1});
  }
  return g;
}

// Rows i0..i0+rows of every query head of a group, folded: [B·Hkv, G·rows, D] (a copy; any input
// strides).
Tensor fold_rows(const Tensor& x5, int64_t i0, int64_t rows, const Geometry& g) {
  return x5.narrow(3, i0, rows).reshape({g.batch * g.kv_heads, g.group * rows, g.dim});
}

Tensor scores(const Tensor& a, const Tensor& b) { return bmm_fp32_out(a, b); }

// Masks one block row of scores s [B·Hkv, G·rows, k1 − k0] in place with −inf: causal on the
// diagonal sub-block only, the window's left edge, and keys at or beyond each row's length.
void mask_scores(Tensor& s, int64_t i0, int64_t rows, int64_t k0, int64_t k1, const Geometry& g,
                 const Tensor& diag) {
  const double neg_inf = -std::numeric_limits<double>::infinity();
  const int64_t width = k1 - k0;
  Tensor s4 = s.view({g.batch * g.kv_heads, g.group, rows, width});
  if (g.window > 0 && i0 + rows - 1 - g.window >= k0) {
    // Some query of the block has keys in [k0, k1) left of its window: the whole (short) row
    // gets allowed(q, k) ⇔ q − W < k ≤ q.
    auto opts = torch::TensorOptions().dtype(torch::kLong).device(s.device());
    Tensor qpos = torch::arange(i0, i0 + rows, opts).unsqueeze(1);
    Tensor kpos = torch::arange(k0, k1, opts).unsqueeze(0);
    s4.masked_fill_(kpos.gt(qpos).logical_or(kpos.le(qpos - g.window)), neg_inf);
  } else if (k1 > i0) {
    // Keys before i0 are all allowed; only the diagonal sub-block has masked entries.
    s4.narrow(3, i0 - k0, k1 - i0)
        .masked_fill_(diag.narrow(0, 0, rows).narrow(1, 0, k1 - i0), neg_inf);
  }
  if (!g.lengths.empty() && g.min_length < k1) {
    auto opts = torch::TensorOptions().dtype(torch::kLong).device(s.device());
    Tensor kpos = torch::arange(k0, k1, opts).view({1, 1, 1, 1, width});
    s.view({g.batch, g.kv_heads, g.group, rows, width})
        .masked_fill_(kpos.ge(g.lengths_device), neg_inf);
  }
}

// True for query rows of the block at or beyond their row's length: [B, 1, 1, rows, 1], or an
// undefined tensor when the block has none.
Tensor padded_queries(int64_t i0, int64_t rows, const Geometry& g, const torch::Device& device) {
  if (g.lengths.empty() || g.min_length >= i0 + rows) return Tensor();
  auto opts = torch::TensorOptions().dtype(torch::kLong).device(device);
  Tensor qpos = torch::arange(i0, i0 + rows, opts).view({1, 1, 1, rows, 1});
  return qpos.ge(g.lengths_device);
}

Tensor diagonal_mask(int64_t rows, const torch::Device& device) {
  return torch::ones({rows, rows}, torch::TensorOptions().dtype(torch::kBool).device(device))
      .triu(1);
}

// dS = P ∘ (dP − rowsum(P ∘ dP)) in `out_dtype`. The row sum over the whole block row equals
// rowsum(dO ∘ O), so O need not be saved.
Tensor softmax_grad(const Tensor& dp, const Tensor& p, torch::ScalarType out_dtype) {
  // The CUDA kernel can read fp32 and write fp16 in one pass; elsewhere convert after.
  if (p.is_cuda() && out_dtype == torch::kHalf && p.scalar_type() == torch::kFloat) {
    return at::_softmax_backward_data(dp, p, -1, out_dtype);
  }
  Tensor ds = at::_softmax_backward_data(dp, p, -1, p.scalar_type());
  return ds.scalar_type() == out_dtype ? ds : ds.to(out_dtype);
}

// One block row's probabilities from its masked scores s [B·Hkv, G·rows, width] (fp32/fp64),
// padded query rows zeroed. kSoftmax: a new tensor; kLogSumExp: exp(s − L) in place in s, with
// L [B·Hkv, G, rows] written first when `write_lse`.
Tensor probabilities(Tensor s, BlockwiseRecompute how, Tensor lse, bool write_lse,
                     const Tensor& padded, int64_t rows, const Geometry& g) {
  const int64_t width = s.size(2);
  Tensor p;
  if (how == BlockwiseRecompute::kSoftmax) {
    p = torch::softmax(s, -1);
  } else {
    Tensor s4 = s.view({g.batch * g.kv_heads, g.group, rows, width});
    if (write_lse) {
      Tensor m = torch::logsumexp(s4, -1);
      if (padded.defined()) {
        m.view({g.batch, g.kv_heads, g.group, rows})
            .masked_fill_(padded.view({g.batch, 1, 1, rows}), 0.0);
      }
      lse.copy_(m);
    }
    s4.sub_(lse.unsqueeze(-1)).exp_();
    p = s;
  }
  // A padded query may have no allowed key (a NaN row); masked_fill replaces it all the same.
  if (padded.defined()) {
    p.view({g.batch, g.kv_heads, g.group, rows, width}).masked_fill_(padded, 0.0);
  }
  return p;
}

struct BlockwiseAttentionFunction : public torch::autograd::Function<BlockwiseAttentionFunction> {
  static Tensor forward(torch::autograd::AutogradContext* ctx, Tensor q, Tensor k, Tensor v,
                        int64_t block, int64_t window, std::vector<int64_t> lengths,
                        int64_t recompute) {
    BlockwiseAttentionOptions o;
    o.block = block;
    o.window = window;
    o.lengths = lengths;
    o.recompute = static_cast<BlockwiseRecompute>(recompute);
    const bool use_lse = o.recompute == BlockwiseRecompute::kLogSumExp;
    const Geometry g = make_geometry(q, k, v, o);
    const int64_t bh = g.batch * g.kv_heads;
    Tensor q5 = q.reshape({g.batch, g.kv_heads, g.group, g.seq, g.dim});
    Tensor kc = k.contiguous().view({bh, g.seq, g.dim});
    Tensor vc = v.contiguous().view({bh, g.seq, g.dim});
    // [B, S, Hkv, G, D]: token-major, so the caller's transpose back is free.
    Tensor out = torch::empty({g.batch, g.seq, g.kv_heads, g.group, g.dim}, q.options());
    Tensor lse = use_lse ? torch::empty({bh, g.group, g.seq}, q.options().dtype(accumulate_type(q)))
                         : Tensor();
    Tensor diag = diagonal_mask(std::min(g.block, g.seq), q.device());
    for (int64_t i0 = 0; i0 < g.seq; i0 += g.block) {
      stop_if_interrupted("forward", i0, g.seq);
      const int64_t rows = std::min(g.block, g.seq - i0);
      const int64_t k0 = g.key_begin(i0), k1 = g.key_end(i0 + rows);
      if (i0 >= g.max_length) {
        out.narrow(1, i0, rows).zero_();  // every row's padding
        if (use_lse) lse.narrow(2, i0, rows).zero_();
        continue;
      }
      Tensor qb = fold_rows(q5, i0, rows, g);
      Tensor s = scores(qb, kc.narrow(1, k0, k1 - k0).transpose(1, 2));
      mask_scores(s, i0, rows, k0, k1, g, diag);
      Tensor p = probabilities(s, o.recompute, use_lse ? lse.narrow(2, i0, rows) : Tensor(), true,
                               padded_queries(i0, rows, g, q.device()), rows, g);
      s = Tensor();
      Tensor o_blk = torch::bmm(p.to(q.scalar_type()), vc.narrow(1, k0, k1 - k0));
      p = Tensor();
      out.narrow(1, i0, rows)
          .copy_(o_blk.view({g.batch, g.kv_heads, g.group, rows, g.dim}).permute({0, 3, 1, 2, 4}));
    }
    ctx->save_for_backward({q, k, v, lse});
    ctx->saved_data["block"] = block;
    ctx->saved_data["window"] = window;
    ctx->saved_data["lengths"] = lengths;
    ctx->saved_data["recompute"] = recompute;
    return out.view({g.batch, g.seq, g.q_heads, g.dim}).permute({0, 2, 1, 3});
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    auto saved = ctx->get_saved_variables();
    const Tensor &q = saved[0], &k = saved[1], &v = saved[2], &lse = saved[3];
    BlockwiseAttentionOptions o;
    o.block = ctx->saved_data["block"].toInt();
    o.window = ctx->saved_data["window"].toInt();
    o.lengths = ctx->saved_data["lengths"].toIntVector();
    o.recompute = static_cast<BlockwiseRecompute>(ctx->saved_data["recompute"].toInt());
    const Geometry g = make_geometry(q, k, v, o);
    const int64_t bh = g.batch * g.kv_heads;
    const auto dtype = q.scalar_type();
    const auto acc = accumulate_type(q);
    Tensor q5 = q.reshape({g.batch, g.kv_heads, g.group, g.seq, g.dim});
    Tensor do5 = grad_out[0].reshape({g.batch, g.kv_heads, g.group, g.seq, g.dim});
    Tensor kc = k.contiguous().view({bh, g.seq, g.dim});
    Tensor vc = v.contiguous().view({bh, g.seq, g.dim});
    Tensor dq = torch::empty({g.batch, g.seq, g.kv_heads, g.group, g.dim}, q.options());
    Tensor dk = torch::zeros({bh, g.seq, g.dim}, q.options().dtype(acc));
    Tensor dv = torch::zeros({bh, g.seq, g.dim}, q.options().dtype(acc));
    Tensor diag = diagonal_mask(std::min(g.block, g.seq), q.device());
    for (int64_t i0 = 0; i0 < g.seq; i0 += g.block) {
      stop_if_interrupted("backward", i0, g.seq);
      const int64_t rows = std::min(g.block, g.seq - i0);
      const int64_t k0 = g.key_begin(i0), k1 = g.key_end(i0 + rows);
      if (i0 >= g.max_length) {
        dq.narrow(1, i0, rows).zero_();
        continue;
      }
      const int64_t width = k1 - k0;
      Tensor qb = fold_rows(q5, i0, rows, g);
      Tensor dob = fold_rows(do5, i0, rows, g);
      Tensor kb = kc.narrow(1, k0, width), vb = vc.narrow(1, k0, width);
      Tensor s = scores(qb, kb.transpose(1, 2));
      mask_scores(s, i0, rows, k0, k1, g, diag);
      Tensor p = probabilities(s, o.recompute, lse.defined() ? lse.narrow(2, i0, rows) : Tensor(),
                               false, padded_queries(i0, rows, g, q.device()), rows, g);
      s = Tensor();
      Tensor ds = softmax_grad(scores(dob, vb.transpose(1, 2)), p, dtype);
      Tensor pb = p.scalar_type() == dtype ? p : p.to(dtype);
      p = Tensor();
      dq.narrow(1, i0, rows)
          .copy_(torch::bmm(ds, kb)
                     .view({g.batch, g.kv_heads, g.group, rows, g.dim})
                     .permute({0, 3, 1, 2, 4}));
      dk.narrow(1, k0, width).add_(bmm_fp32_out(ds.transpose(1, 2), qb));
      dv.narrow(1, k0, width).add_(bmm_fp32_out(pb.transpose(1, 2), dob));
    }
    Tensor dq4 = dq.view({g.batch, g.seq, g.q_heads, g.dim}).permute({0, 2, 1, 3});
    Tensor dk4 = dk.view({g.batch, g.kv_heads, g.seq, g.dim}).to(dtype);
    Tensor dv4 = dv.view({g.batch, g.kv_heads, g.seq, g.dim}).to(dtype);
    return {dq4, dk4, dv4, Tensor(), Tensor(), Tensor(), Tensor()};
  }
};

}  // namespace

torch::Tensor blockwise_attention(const torch::Tensor& q, const torch::Tensor& k,
                                  const torch::Tensor& v,
                                  const BlockwiseAttentionOptions& options) {
  make_geometry(q, k, v, options);  // validate before autograd sees the call
  note_custom_node();
  return BlockwiseAttentionFunction::apply(q, k, v, options.block, options.window, options.lengths,
                                           static_cast<int64_t>(options.recompute));
}

}  // namespace tprobe::model
