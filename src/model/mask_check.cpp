// Builds the engine's attention masks and verifies their band from the tensors, vectorised.
#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>

#include "tprobe/core/base/error.hpp"
#include "tprobe/model/attention.hpp"
#include "tprobe/model/attention_mask.hpp"
#include "tprobe/model/torch_compat.hpp"
#include "tprobe/model/engine.hpp"

namespace tprobe::model {

// The engine works in engine's request and result types.
using namespace engine;
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
  // The engine's own builders: what its eager and sdpa paths pass to attention.
  if (lengths.empty()) return causal_bool_mask(seq_len, window, device);
  return padded_bool_mask(seq_len, window, lengths, device);
}

namespace {

// Per query row of one block: how many keys it allows and the first and last one (-1: none).
struct RowStats {
  std::vector<int64_t> count, first, last;
  explicit RowStats(int64_t rows) : count(rows, 0), first(rows, -1), last(rows, -1) {}
};

// Byte scans over one row of a bool mask (one byte per key, nonzero = allowed), eight bytes at a
// time: these read each byte of the row about once, at memory speed.
int64_t first_nonzero(const uint8_t* p, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    if (w != 0) break;
  }
  for (; i < n; ++i) {
    if (p[i] != 0) return i;
  }
  return -1;
}

int64_t last_nonzero(const uint8_t* p, int64_t n) {
  int64_t i = n;
  for (; i >= 8; i -= 8) {
    uint64_t w;
    std::memcpy(&w, p + i - 8, 8);
    if (w != 0) break;
  }
  for (; i > 0; --i) {
    if (p[i - 1] != 0) return i - 1;
  }
  return -1;
}

bool has_zero_byte(const uint8_t* p, int64_t n) {
  constexpr uint64_t kOnes = 0x0101010101010101ULL;
  constexpr uint64_t kHighs = 0x8080808080808080ULL;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    if (((w - kOnes) & ~w & kHighs) != 0) return true;  // exact: some byte of w is zero
  }
  for (; i < n; ++i) {
    if (p[i] == 0) return true;
  }
  return false;
}

// CPU, contiguous [R, S] bytes: first and last allowed key by scanning in from both ends; the count
// is last - first + 1 when nothing between them is masked, else counted outright (bad rows only).
RowStats row_stats_bytes(const torch::Tensor& block) {
  const int64_t rows = block.size(0);
  const int64_t s = block.size(1);
  const auto* base = static_cast<const uint8_t*>(block.data_ptr());
  RowStats st(rows);
  at::parallel_for(0, rows, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* row = base + r * s;
      const int64_t f = first_nonzero(row, s);
      if (f < 0) continue;
      const int64_t l = last_nonzero(row, s);
      st.first[r] = f;
      st.last[r] = l;
      if (!has_zero_byte(row + f, l - f + 1)) {
        st.count[r] = l - f + 1;
      } else {
        st.count[r] = std::count_if(row, row + s, [](uint8_t b) { return b != 0; });
      }
    }
  });
  return st;
}

// Any device: three reductions over the block (count, first and last allowed key), then the R
// values of each are copied to the host.
RowStats row_stats_tensor(const torch::Tensor& block) {
  const int64_t rows = block.size(0);
  const int64_t s = block.size(1);
  torch::Tensor u = block.view(torch::kByte);  // bool and uint8 share a byte layout
  torch::Tensor count = u.ne(0).sum(-1, /*keepdim=*/false, torch::kLong);
  torch::Tensor none = count.eq(0);
  torch::Tensor first = u.argmax(-1).masked_fill(none, -1);
  torch::Tensor last = ((s - 1) - u.flip({-1}).argmax(-1)).masked_fill(none, -1);
  RowStats st(rows);
  auto copy_out = [rows](const torch::Tensor& t, std::vector<int64_t>& out) {
    torch::Tensor h = t.to(torch::kCPU, torch::kLong).contiguous();
    std::memcpy(out.data(), h.data_ptr<int64_t>(), static_cast<size_t>(rows) * sizeof(int64_t));
  };
  copy_out(count, st.count);
  copy_out(first, st.first);
  copy_out(last, st.last);
  return st;
}

}  // namespace

MaskTensorCheck check_mask_tensor(const torch::Tensor& mask, int64_t window,
                                  const std::vector<int64_t>& lengths, int64_t row_block,
                                  MaskScan scan) {
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
  if (scan == MaskScan::kAuto) scan = mask.device().is_cpu() ? MaskScan::kBytes : MaskScan::kTensor;
  if (scan == MaskScan::kBytes && !mask.device().is_cpu()) {
    fail("mask check: the byte scan reads host memory; the mask is on {}", mask.device().str());
  }
  MaskTensorCheck c;
  c.shape = mask.sizes().vec();
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
    if (scan == MaskScan::kBytes) m2 = m2.contiguous();
    for (int64_t r0 = 0; r0 < s; r0 += row_block) {
      const int64_t r1 = std::min(s, r0 + row_block);
      torch::Tensor m = m2.slice(0, r0, r1);  // [R, S]
      const RowStats st = scan == MaskScan::kBytes ? row_stats_bytes(m) : row_stats_tensor(m);
      c.rows_checked += r1 - r0;
      for (int64_t r = 0; r < r1 - r0; ++r) {
        // Row i is exactly the band [lo, hi] iff it allows hi - lo + 1 keys, the first at lo and
        // the last at hi (then every key between them is allowed).
        const int64_t i = r0 + r;
        const int64_t lo = window > 0 ? std::max<int64_t>(0, i - window + 1) : 0;
        const int64_t hi = std::min(i, len - 1);
        const int64_t want = std::max<int64_t>(0, hi - lo + 1);
        const int64_t n = st.count[static_cast<size_t>(r)];
        const bool good = want == 0 ? n == 0
                                    : n == want && st.first[static_cast<size_t>(r)] == lo &&
                                          st.last[static_cast<size_t>(r)] == hi;
        if (n == 0) ++c.fully_masked_rows;
        // Real query rows: the widest band, and the first row that reaches it.
        if (i < len && n > c.max_allowed_per_row) {
          c.max_allowed_per_row = n;
          c.saturates_at_row = i;
        }
        if (good) continue;
        ++c.violating_rows;
        if (classified >= kClassified) continue;
        ++classified;
        std::string detail;
        for (auto& kind : classify_row(m.select(0, r), i, window, len,
                                       c.detail.empty() ? &detail : nullptr)) {
          kinds.insert(kind);
        }
        if (c.detail.empty()) {
          c.detail = fmt::format("batch row {} {}", b, detail);
          c.first_bad_batch_row = b;
          c.first_bad_row = i;
        }
      }
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
                      ? "padded_bool_mask (causal_bool_mask, keys past each length masked)"
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
