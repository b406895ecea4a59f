// Builds the engine's attention masks and verifies their band from the tensors, vectorised.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "tprobe/core/base/error.hpp"
#include "tprobe/model/attention.hpp"
#include "tprobe/model/attention_mask.hpp"
#include "tprobe/model/torch_compat.hpp"

namespace tprobe::model {
namespace {

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// What is wrong with one bad row, from its allowed keys (O(S), only for the first few bad rows).
std::vector<std::string> classify_row(const torch::Tensor& row, int64_t i, int64_t window,
                                      int64_t len, std::string* detail) {
  const int64_t lo = window > 0 ? std::max<int64_t>(0, i - window + 1) : 0;
  const int64_t hi = std::min(i, len - 1);
  torch::Tensor keys = row.nonzero().flatten().to(torch::kCPU);
  std::vector<std::string> kinds;
  const int64_t n = keys.numel();
  if (n > 0) {
    if (keys.gt(i).any().item<bool>()) kinds.emplace_back("future_key");
    if (keys.ge(len).logical_and(keys.le(i)).any().item<bool>()) kinds.emplace_back("padded_key");
    if (keys.lt(lo).any().item<bool>()) kinds.emplace_back("outside_window");
  }
  const int64_t want = std::max<int64_t>(0, hi - lo + 1);
  int64_t inside = 0;
  if (want > 0) inside = row.slice(0, lo, hi + 1).sum().item<int64_t>();
  if (inside < want) kinds.emplace_back("missing_key");
  if (detail) {
    *detail = fmt::format(
        "query row {} allows {} keys{}, expected [{}, {}] ({} keys): {}", i, n,
        n > 0 ? fmt::format(" in [{}, {}]", keys[0].item<int64_t>(), keys[n - 1].item<int64_t>())
              : "",
        lo, hi, want, fmt::format("{}", fmt::join(kinds, ", ")));
  }
  return kinds;
}

}  // namespace

torch::Tensor attention_bool_mask(int64_t seq_len, int64_t window,
                                  const std::vector<int64_t>& lengths,
                                  const torch::Device& device) {
  torch::Tensor causal = causal_bool_mask(seq_len, window, device);
  if (lengths.empty()) return causal;
  const auto batch = static_cast<int64_t>(lengths.size());
  torch::Tensor len = torch::tensor(lengths, torch::kLong).to(device).view({batch, 1, 1, 1});
  torch::Tensor key =
      torch::arange(seq_len, torch::TensorOptions().dtype(torch::kLong).device(device))
          .view({1, 1, 1, seq_len});
  return causal.logical_and(key.lt(len));
}

MaskTensorCheck check_mask_tensor(const torch::Tensor& mask, int64_t window,
                                  const std::vector<int64_t>& lengths, int64_t row_block) {
  if (mask.dim() != 4 || mask.size(1) != 1 || mask.size(2) != mask.size(3)) {
    fail("mask check: expected a [B, 1, S, S] mask, got {} dims", mask.dim());
  }
  if (mask.scalar_type() != torch::kBool) fail("mask check: expected a bool mask");
  const int64_t s = mask.size(2);
  const auto batch = static_cast<int64_t>(lengths.size());
  if (mask.size(0) != 1 && mask.size(0) != batch) {
    fail("mask check: mask batch {} for {} lengths", mask.size(0), batch);
  }
  if (row_block < 1) row_block = 512;
  MaskTensorCheck c;
  c.shape = mask.sizes().vec();
  const auto dev = mask.device();
  const auto lopts = torch::TensorOptions().dtype(torch::kLong).device(dev);
  constexpr int kClassified = 8;
  int classified = 0;
  std::set<std::string> kinds;
  // A [1,1,S,S] mask serves every row of the same length: check each distinct pair once.
  std::set<std::pair<int64_t, int64_t>> seen;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t mb = mask.size(0) == 1 ? 0 : b;
    const int64_t len = lengths[static_cast<size_t>(b)];
    if (!seen.insert({mb, len}).second) continue;
    torch::Tensor m2 = mask.select(0, mb).select(0, 0);  // [S, S]
    for (int64_t r0 = 0; r0 < s; r0 += row_block) {
      const int64_t r1 = std::min(s, r0 + row_block);
      torch::Tensor m = m2.slice(0, r0, r1);  // [R, S]
      torch::Tensor i = torch::arange(r0, r1, lopts);
      torch::Tensor lo = window > 0 ? (i - window + 1).clamp_min(0) : torch::zeros_like(i);
      torch::Tensor hi = i.clamp_max(len - 1);
      torch::Tensor want = (hi - lo + 1).clamp_min(0);
      // Three passes over the block's bytes, no wide temporaries: the number of allowed keys,
      // the first allowed key and the last one. A row is exactly the band [lo, hi] iff it allows
      // hi - lo + 1 keys, the first at lo and the last at hi (then every key between is allowed).
      torch::Tensor u = m.view(torch::kByte);  // bool and uint8 share a byte layout
      torch::Tensor count = u.sum(-1, /*keepdim=*/false, torch::kLong);
      torch::Tensor first = u.argmax(-1);
      torch::Tensor last = (s - 1) - u.flip({-1}).argmax(-1);
      torch::Tensor good = want.eq(0).logical_and(count.eq(0)).logical_or(
          want.gt(0).logical_and(count.eq(want)).logical_and(first.eq(lo)).logical_and(
              last.eq(hi)));
      torch::Tensor bad = good.logical_not().nonzero().flatten().to(torch::kCPU);
      c.rows_checked += r1 - r0;
      c.violating_rows += bad.numel();
      for (int64_t k = 0; k < bad.numel() && classified < kClassified; ++k, ++classified) {
        const int64_t local = bad[k].item<int64_t>();
        std::string detail;
        for (auto& kind : classify_row(m.select(0, local), r0 + local, window, len,
                                       c.detail.empty() ? &detail : nullptr)) {
          kinds.insert(kind);
        }
        if (c.detail.empty()) {
          c.detail = fmt::format("batch row {} {}", b, detail);
          c.first_bad_batch_row = b;
          c.first_bad_row = r0 + local;
        }
      }
      // Real query rows: the widest band and the first row that reaches it.
      const int64_t real_end = std::min(r1, len) - r0;
      if (real_end > 0) {
        torch::Tensor real = count.slice(0, 0, real_end);
        const int64_t mx = real.max().item<int64_t>();
        if (mx > c.max_allowed_per_row) {
          c.max_allowed_per_row = mx;
          c.saturates_at_row = r0 + real.eq(mx).nonzero()[0][0].item<int64_t>();
        }
      }
      c.fully_masked_rows += count.eq(0).sum().item<int64_t>();
    }
  }
  c.kinds.assign(kinds.begin(), kinds.end());
  return c;
}

MaskCheckResult run_mask_check(const MaskCheckOptions& o) {
  if (o.width < 1) fail("mask check: width {} must be at least 1", o.width);
  if (o.lengths.empty()) fail("mask check: no rows");
  for (int64_t l : o.lengths) {
    if (l < 1 || l > o.width) fail("mask check: length {} outside 1..{}", l, o.width);
  }
  torch::Device device(torch::kCPU);
  if (o.device == "cuda") {
    if (!torch::cuda::is_available()) {
      fail("mask check on cuda: no CUDA device is usable in this build (libtorch {})",
           torch_version());
    }
    device = torch::Device(torch::kCUDA, 0);
  } else if (o.device != "cpu") {
    fail("mask check: device '{}' is not cpu or cuda", o.device);
  }
  const auto t0 = std::chrono::steady_clock::now();
  MaskCheckResult r;
  r.device = o.device;
  r.torch_version = torch_version();
  torch::NoGradGuard no_grad;
  for (const MaskCheckLayer& layer : o.layers) {
    MaskCheckRow row;
    row.type = layer.type;
    row.window = layer.window;
    row.builder = o.padded_input
                      ? "attention_bool_mask (causal_bool_mask, keys past each length masked)"
                      : "causal_bool_mask";
    auto tb = std::chrono::steady_clock::now();
    torch::Tensor mask = attention_bool_mask(
        o.width, layer.window, o.padded_input ? o.lengths : std::vector<int64_t>{}, device);
    if (device.is_cuda()) cuda_synchronize();
    row.build_s = since(tb);
    auto tc = std::chrono::steady_clock::now();
    row.check = check_mask_tensor(mask, layer.window, o.lengths, o.row_block);
    row.check_s = since(tc);
    r.ok = r.ok && row.check.ok();
    r.rows.push_back(std::move(row));
  }
  r.wall_s = since(t0);
  return r;
}

}  // namespace tprobe::model
