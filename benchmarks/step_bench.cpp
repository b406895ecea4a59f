// One LoRA fwd+bwd of a random-initialised Gemma-4 (26B-A4B shapes by default) per width:
// time per step and peak memory, for comparison with benchmarks/hf_lora_step.py in the same run.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>

#include "tprobe/core/base/atomic_file.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/gemma4/attention_path.hpp"
#include "tprobe/core/gemma4/gemma4_tensors.hpp"
#include "tprobe/model/gemma4.hpp"

using namespace tprobe;

int main(int argc, char** argv) {
  CLI::App app{"tprobe_step_bench: LoRA fwd+bwd step time and peak memory"};
  std::string model_name = "gemma4-26b-a4b", attn = "sdpa", moe = "loop", device = "cuda",
              json_path;
  std::vector<int64_t> seqs = {2048, 8192};
  int64_t batch = 2, rank = 64, reps = 2, ce_chunk = 4096;
  double alpha = 128;
  app.add_option("--model", model_name);
  app.add_option("--attn", attn);
  app.add_option("--moe", moe);
  app.add_option("--device", device);
  app.add_option("--seq", seqs);
  app.add_option("--batch", batch);
  app.add_option("--rank", rank);
  app.add_option("--alpha", alpha);
  app.add_option("--reps", reps);
  app.add_option("--ce-chunk", ce_chunk);
  app.add_option("--json", json_path);
  CLI11_PARSE(app, argc, argv);
  try {
    auto cfg = core::embedded_model(model_name);
    model::ModelOptions o;
    o.dtype = torch::kBFloat16;
    o.device = device == "cuda" ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
    o.attn = core::attention_path_from_name(attn, "--attn");
    o.moe = model::parse_moe(moe);
    o.gradient_checkpointing = true;
    o.ce_chunk = ce_chunk;
    auto t0 = std::chrono::steady_clock::now();
    auto m = model::Gemma4Model::random(cfg, o, 1);
    model::LoraConfig lora;
    lora.targets = core::linear_module_names();
    lora.rank = rank;
    lora.alpha = alpha;
    m.add_lora(lora, 2);
    model::cuda_synchronize();
    const double init_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    nlohmann::ordered_json out;
    out["model"] = model_name;
    out["attn_requested"] = attn;
    out["moe"] = moe;
    out["init_s"] = init_s;
    out["base_parameters"] = m.count_base_parameters();
    out["lora_modules"] = m.count_lora_modules();
    out["lora_parameters"] = m.count_lora_parameters();
    out["weights_peak_allocated_bytes"] = model::cuda_peak_allocated_bytes();
    out["widths"] = nlohmann::ordered_json::array();
    std::cout << fmt::format("init {:.1f} s, {} params, {} LoRA modules, {} trainable\n", init_s,
                             m.count_base_parameters(), m.count_lora_modules(),
                             m.count_lora_parameters());
    for (int64_t seq : seqs) {
      nlohmann::ordered_json w;
      w["batch"] = batch;
      w["seq"] = seq;
      torch::manual_seed(static_cast<uint64_t>(seq));
      torch::Tensor ids =
          torch::randint(0, cfg.vocab_size, {batch, seq},
                         torch::TensorOptions().dtype(torch::kLong).device(o.device));
      std::vector<double> times;
      try {
        model::cuda_reset_peak_memory();
        model::ForwardRecord rec;
        for (int64_t r = 0; r <= reps; ++r) {  // r = 0 is the warm-up
          model::cuda_synchronize();
          auto s = std::chrono::steady_clock::now();
          auto loss = m.loss(ids, r == 0 ? &rec : nullptr);
          loss.loss.backward();
          model::cuda_synchronize();
          const double dt =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - s).count();
          if (r > 0) times.push_back(dt);
          if (r == 0) {
            w["loss"] = loss.loss.item<double>();
            w["inert_lora_b"] = model::inert_lora_b(m).size();
          }
          for (auto& [name, t] : m.lora_parameters()) t->mutable_grad() = torch::Tensor();
        }
        w["outcome"] = "ok";
        w["attn_sliding"] = rec.attn_sliding;
        w["attn_full"] = rec.attn_full;
        w["moe_dispatch"] = rec.moe;
        w["step_s"] = times;
        w["best_step_s"] = *std::min_element(times.begin(), times.end());
        w["peak_allocated_bytes"] = model::cuda_peak_allocated_bytes();
        w["peak_reserved_bytes"] = model::cuda_peak_reserved_bytes();
        std::cout << fmt::format("{}x{} attn={} ({} / {}) moe={}: best {:.3f} s, peak {:.2f} GiB\n",
                                 batch, seq, attn, rec.attn_sliding, rec.attn_full, rec.moe,
                                 w["best_step_s"].get<double>(),
                                 w["peak_allocated_bytes"].get<int64_t>() / 1073741824.0);
      } catch (const c10::Error& e) {
        w["outcome"] = "error";
        w["message"] = std::string(e.what_without_backtrace()).substr(0, 400);
        std::cout << fmt::format("{}x{}: {}\n", batch, seq, w["message"].get<std::string>());
      }
      out["widths"].push_back(w);
    }
    if (!json_path.empty()) core::write_file_atomic(json_path, out.dump(2) + "\n");
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
