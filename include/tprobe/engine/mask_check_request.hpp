// The libtorch halves of `tprobe mask` behind a torch-free interface: the materialised check of
// the masks tprobe's engine builds, and SDPA backend eligibility per layer shape and mask case
// (docs/mask.md). Implemented in mask_check.cpp and mask_backends.cpp; views in runs/mask_check_report.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tprobe/core/base/layer_type.hpp"

namespace tprobe::engine {

// One layer type whose mask is built and verified.
struct MaskCheckLayer {
  std::string type;    // "sliding_attention" / "full_attention"
  int64_t window = 0;  // 0: causal only
};

struct MaskCheckOptions {
  int64_t width = 16384;
  std::vector<int64_t> lengths;  // one per batch row, right padding; all == width: unpadded
  bool padded_input = false;     // a padding mask is passed (lengths given on the command line)
  std::vector<MaskCheckLayer> layers;
  std::string device = "cpu";  // cpu | cuda
  int64_t row_block = 512;    // query rows verified per step (bounds the temporaries)
};

// What one bool mask tensor [B or 1, 1, S, S] holds, checked against the reference band: per
// query row the allowed keys must be exactly [max(0, i − W + 1), min(i, len − 1)].
struct MaskTensorCheck {
  std::vector<int64_t> shape;
  int64_t rows_checked = 0;
  int64_t violating_rows = 0;
  int64_t max_allowed_per_row = 0;  // over real query rows
  std::optional<int64_t> saturates_at_row;
  int64_t fully_masked_rows = 0;
  std::optional<int64_t> first_bad_batch_row;
  std::optional<int64_t> first_bad_row;
  std::vector<std::string> kinds;  // of the first few bad rows: future_key, outside_window, ...
  std::string detail;              // the first bad row in words
  bool ok() const { return violating_rows == 0; }
};

struct MaskCheckRow {
  std::string type;
  int64_t window = 0;
  std::string builder;  // which engine function built it
  MaskTensorCheck check;
  double build_s = 0;
  double check_s = 0;
};

struct MaskCheckResult {
  std::string device;
  std::string torch_version;
  std::vector<MaskCheckRow> rows;
  bool ok = true;
  double wall_s = 0;
};


// ---- backend eligibility (CUDA builds) ----

struct MaskBackendShape {
  core::LayerType type = core::LayerType::kSliding;
  int64_t window = 0;
  int64_t query_heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
};

struct MaskBackendsOptions {
  int64_t width = 16384;
  int64_t batch = 1;
  int64_t padded_length = 0;  // the last row's real length in the padded case (0: width / 2)
  std::vector<MaskBackendShape> shapes;
  std::string dtype = "bf16";  // bf16 | fp16
  int64_t warmup = 1;
  int64_t repeats = 5;
  bool backward = true;  // also time forward + backward
};

struct MaskBackendRow {
  core::LayerType layer_type = core::LayerType::kSliding;
  int64_t query_heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t window = 0;
  std::string kv;         // "repeated" (repeat_kv to query heads) or "gqa" (enable_gqa / native)
  std::string mask_case;  // none_is_causal | explicit_band | explicit_causal_padded
  std::string backend;    // flash | efficient | cudnn | math | flash_window (tprobe)
  std::string outcome;    // accepted | refused | error | not_applicable
  std::string message;    // the library's own error text when refused
  std::vector<std::string> warnings;  // the library's warnings during the attempt (its reasons)
  std::string resolved;               // what tprobe's path reported running
  std::vector<std::string> kernels;   // device kernels of one forward, when collected
  std::string kernels_note;           // why kernels are empty
  std::vector<double> fwd_s;          // every timed repeat
  std::vector<double> fwd_bwd_s;
  std::optional<double> fwd_median_s;
  std::optional<double> fwd_bwd_median_s;
  std::optional<bool> output_finite;  // NaN/inf anywhere in the output (fully masked rows)
};

struct MaskBackendsResult {
  bool supported = false;
  std::string reason;  // why not, when unsupported
  std::string device;
  std::string torch_version;
  std::string dtype;
  std::vector<MaskBackendRow> rows;
};


}  // namespace tprobe::engine
