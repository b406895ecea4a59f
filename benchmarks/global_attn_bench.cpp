// One global-attention layer of Gemma-4 26B-A4B (head_dim 512, 16 query heads over 2 KV heads,
// causal, bf16) per width: forward and forward+backward time and peak memory of the blockwise-GEMM
// path at several block sizes beside is_causal SDPA on repeated KV heads (the path flash-window
// ran before). docs/global-attention.md.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>

#include "tprobe/core/base/atomic_file.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/model/attention.hpp"
#include "tprobe/model/blockwise_attention.hpp"

using namespace tprobe;
using torch::Tensor;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Median of `reps` timed calls after `warm` untimed ones, synchronising around each.
double time_median(const std::function<void()>& fn, int64_t warm, int64_t reps) {
  std::vector<double> t;
  for (int64_t i = 0; i < warm + reps; ++i) {
    model::cuda_synchronize();
    auto s = std::chrono::steady_clock::now();
    fn();
    model::cuda_synchronize();
    if (i >= warm)
      t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - s).count());
  }
  return median(t);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tprobe_global_attn_bench: one head_dim-512 attention layer, blockwise vs sdpa"};
  std::vector<int64_t> seqs = {2048, 8192, 16384}, blocks = {256, 512, 1024}, lse_blocks = {512};
  int64_t batch = 2, q_heads = 16, kv_heads = 2, dim = 512, warm = 2, reps = 5;
  std::string device = "cuda", dtype = "bf16", json_path;
  bool skip_sdpa = false;
  app.add_option("--seq", seqs);
  app.add_option("--block", blocks, "Blocks of the default path (softmax recomputed)");
  app.add_option("--lse-block", lse_blocks, "Blocks of the variant that saves the log-sum-exp");
  app.add_option("--batch", batch);
  app.add_option("--q-heads", q_heads);
  app.add_option("--kv-heads", kv_heads);
  app.add_option("--dim", dim);
  app.add_option("--warm", warm);
  app.add_option("--reps", reps);
  app.add_option("--device", device)->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--dtype", dtype)->check(CLI::IsMember({"bf16", "fp32"}));
  app.add_flag("--skip-sdpa", skip_sdpa, "Leave out the is_causal SDPA rows");
  app.add_option("--json", json_path);
  CLI11_PARSE(app, argc, argv);
  try {
    const torch::Device dev =
        device == "cuda" ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
    const auto dt = dtype == "bf16" ? torch::kBFloat16 : torch::kFloat;
    nlohmann::ordered_json out;
    out["batch"] = batch;
    out["q_heads"] = q_heads;
    out["kv_heads"] = kv_heads;
    out["head_dim"] = dim;
    out["dtype"] = dtype;
    out["device"] = device;
    out["bmm_fp32_out"] =
        model::has_bmm_fp32_out(torch::empty({1}, torch::TensorOptions().device(dev)));
    out["rows"] = nlohmann::ordered_json::array();
    std::cout << fmt::format("{:>6} {:>28} {:>9} {:>12} {:>9}\n", "N", "path", "fwd ms",
                             "fwd+bwd ms", "peak GiB");
    for (int64_t seq : seqs) {
      torch::manual_seed(static_cast<uint64_t>(seq));
      auto o = torch::TensorOptions().dtype(dt).device(dev);
      // The model's layout: [B, S, H, D] projections seen as [B, H, S, D].
      Tensor q = torch::randn({batch, seq, q_heads, dim}, o).transpose(1, 2).requires_grad_(true);
      Tensor k = torch::randn({batch, seq, kv_heads, dim}, o).transpose(1, 2).requires_grad_(true);
      Tensor v = torch::randn({batch, seq, kv_heads, dim}, o).transpose(1, 2).requires_grad_(true);
      Tensor dout = torch::randn({batch, q_heads, seq, dim}, o);
      struct Path {
        std::string name;
        std::function<Tensor()> fn;
      };
      std::vector<Path> paths;
      if (!skip_sdpa && model::has_sdpa()) {
        paths.push_back({"sdpa(is_causal,repeat_kv)", [&] {
                           return model::attention(core::AttentionPath::kSdpa, q, k, v, 0, nullptr);
                         }});
      }
      auto add_blockwise = [&](int64_t b, model::BlockwiseRecompute how) {
        const bool lse = how == model::BlockwiseRecompute::kLogSumExp;
        paths.push_back(
            {fmt::format("blockwise_gemm(block={}{})", b, lse ? ",lse" : ""), [&, b, how] {
               model::BlockwiseAttentionOptions bo;
               bo.block = b;
               bo.recompute = how;
               return model::blockwise_attention(q, k, v, bo);
             }});
      };
      for (int64_t b : blocks) add_blockwise(b, model::BlockwiseRecompute::kSoftmax);
      for (int64_t b : lse_blocks) add_blockwise(b, model::BlockwiseRecompute::kLogSumExp);
      for (const Path& p : paths) {
        nlohmann::ordered_json row;
        row["seq"] = seq;
        row["path"] = p.name;
        try {
          const double fwd = time_median([&] { p.fn(); }, warm, reps);
          auto step = [&] {
            q.mutable_grad() = Tensor();
            k.mutable_grad() = Tensor();
            v.mutable_grad() = Tensor();
            p.fn().backward(dout);
          };
          step();
          model::cuda_synchronize();
          model::cuda_reset_peak_memory();
          const double fb = time_median(step, warm, reps);
          row["outcome"] = "ok";
          row["forward_s"] = fwd;
          row["forward_backward_s"] = fb;
          row["peak_allocated_bytes"] = model::cuda_peak_allocated_bytes();
          std::cout << fmt::format("{:>6} {:>28} {:9.1f} {:12.1f} {:9.2f}\n", seq, p.name,
                                   fwd * 1e3, fb * 1e3,
                                   model::cuda_peak_allocated_bytes() / 1073741824.0);
        } catch (const std::exception& e) {
          row["outcome"] = "error";
          row["message"] = std::string(e.what()).substr(0, 400);
          std::cout << fmt::format("{:>6} {:>28} error: {}\n", seq, p.name,
                                   row["message"].get<std::string>());
        }
        std::cout.flush();
        out["rows"].push_back(row);
      }
    }
    if (!json_path.empty()) core::write_file_atomic(json_path, out.dump(2) + "\n");
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
