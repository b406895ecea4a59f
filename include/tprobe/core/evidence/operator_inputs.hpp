// The operator's own inputs in a measured point's evidence, each field declared once
// (core/evidence/fields.hpp): the dataset rows the step ran on (`tokens`), the tokens each expert
// of each MoE layer received (`expert_load`), and how the weights were loaded (`load`).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "tprobe/core/evidence/fields.hpp"

namespace tprobe::core {

// results.points[].tokens: the micro-batch built from the dataset (profile --dataset). Another
// engineer rebuilds it from `records`: each row's records' input_ids end to end, cut at the
// point's width, right-padded with the pad id; `sha256` is over those ids as int64
// little-endian, row-major, padding included.
struct PointTokens {
  std::string dataset;
  std::string sampler;
  int64_t sampler_seed = 0;
  std::vector<std::vector<int64_t>> records;
  std::vector<int64_t> row_tokens;
  int64_t pad_id = 0;
  std::string sha256;
};
constexpr auto evidence_fields(const PointTokens*) {
  using evidence::field;
  return std::make_tuple(
      field("dataset", &PointTokens::dataset, "", "the dataset file the rows came from"),
      field("sampler", &PointTokens::sampler, "", "the sampler that chose them, as spelled"),
      field("sampler_seed", &PointTokens::sampler_seed, "", "its seed (shuffled, bucket)"),
      field("records", &PointTokens::records, "",
            "per row, the dataset's record indices (0-based, file order, blank lines skipped) "
            "whose input_ids fill it end to end"),
      field("row_tokens", &PointTokens::row_tokens, "tokens",
            "per row, the real tokens (the rest of the width is pad_id)"),
      field("pad_id", &PointTokens::pad_id, "", "the token id of the padding"),
      field("sha256", &PointTokens::sha256, "",
            "SHA-256 of the micro-batch's ids, int64 little-endian, row-major, padding included"));
}

// results.points[].expert_load[]: one MoE layer's routing in the point's first step (its
// forward, never a recompute).
struct ExpertLoadLayer {
  int64_t layer = 0;
  std::vector<int64_t> tokens;  // per expert
  double max_over_mean = 0;
  double cv = 0;
  std::vector<int64_t> zero_experts;
  std::optional<double> experts_kernel_s;
};
constexpr auto evidence_fields(const ExpertLoadLayer*) {
  using evidence::field;
  return std::make_tuple(
      field("layer", &ExpertLoadLayer::layer, "", "the decoder layer"),
      field("tokens", &ExpertLoadLayer::tokens, "tokens",
            "per expert, the (token, choice) pairs routed to it; they sum to the point's "
            "routed_per_layer"),
      field("max_over_mean", &ExpertLoadLayer::max_over_mean, "",
            "the busiest expert's tokens over the mean"),
      field("cv", &ExpertLoadLayer::cv, "",
            "coefficient of variation: population standard deviation over the mean"),
      field("zero_experts", &ExpertLoadLayer::zero_experts, "", "the experts that got none"),
      field("experts_kernel_s", &ExpertLoadLayer::experts_kernel_s, "s",
            "the layer's experts part on the device in the traced step (forward, recompute and "
            "backward), null without a trace"));
}

// A point's routing, merged into results.points[] (two keys beside the point's others).
struct ExpertLoad {
  int64_t routed_per_layer = 0;
  std::vector<ExpertLoadLayer> layers;
};
constexpr auto evidence_fields(const ExpertLoad*) {
  using evidence::field;
  return std::make_tuple(
      field("routed_per_layer", &ExpertLoad::routed_per_layer, "",
            "(token, choice) pairs each MoE layer routed: tokens × top-k"),
      field("expert_load", &ExpertLoad::layers, "", "one entry per MoE layer, in layer order"));
}

// results.load: the weights' way onto the device (a checkpoint's read, or the random init).
struct LoadFigures {
  std::string method;
  double seconds = 0;
  int64_t bytes = 0;
  int64_t readers = 0;
  std::optional<int64_t> host_rss_anon_peak_bytes;
  std::optional<int64_t> device_peak_allocated_bytes;
};
constexpr auto evidence_fields(const LoadFigures*) {
  using evidence::field;
  return std::make_tuple(
      field("method", &LoadFigures::method, "",
            "random init, or how the checkpoint was read (the staging and the copies)"),
      field("seconds", &LoadFigures::seconds, "s", "wall time of the weights' way onto the device: the model's construction and the checkpoint's read (or the random init)"),
      field("bytes", &LoadFigures::bytes, "B", "the tensor bytes read from the checkpoint (0 for random init)"),
      field("readers", &LoadFigures::readers, "", "the threads that read the files"),
      field("host_rss_anon_peak_bytes", &LoadFigures::host_rss_anon_peak_bytes, "B",
            "the process's anonymous resident memory (RssAnon: mapped file pages excluded), "
            "sampled every 5 ms during the load, its peak; null where /proc is unreadable"),
      field("device_peak_allocated_bytes", &LoadFigures::device_peak_allocated_bytes, "B",
            "the caching allocator's peak during the load, null on the CPU"));
}

}  // namespace tprobe::core
