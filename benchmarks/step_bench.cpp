// One LoRA training step (fwd+bwd, then --optimizer: adamw by default) of a random-initialised
// Gemma-4 (26B-A4B shapes by default) per width, through
// the engine's step runner (tprobe_model): an ordinary evidence file for comparison with
// benchmarks/hf_lora_step.py in the same run. `tprobe profile` is the full probe.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "tprobe/core/gemma4/gemma4_tensors.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/cost/flops.hpp"
#include "tprobe/core/step/knobs.hpp"
#include "tprobe/runs/step_report.hpp"
#include "tprobe/engine/step_spec.hpp"
#include "tprobe/model/engine.hpp"

using namespace tprobe;

int main(int argc, char** argv) {
  CLI::App app{"tprobe_step_bench: LoRA training step (fwd+bwd+optimizer) time and peak memory"};
  engine::StepSpec spec;
  spec.model = "gemma4-26b-a4b";
  spec.device = "cuda";
  spec.lora_targets = core::linear_module_names();
  spec.warmup = 1;
  spec.repeats = 2;
  std::string attn = "sdpa", moe = "loop", optimizer = "adamw", json_path;
  std::vector<int64_t> seqs = {2048, 8192};
  int64_t batch = 2;
  app.add_option("--model", spec.model);
  app.add_option("--attn", attn);
  app.add_option("--moe", moe);
  app.add_option("--optimizer", optimizer, "none or adamw (the step's optimizer, as profile's)");
  app.add_option("--device", spec.device);
  app.add_option("--dtype", spec.dtype);
  app.add_option("--seq", seqs);
  app.add_option("--batch", batch);
  app.add_option("--rank", spec.lora_rank);
  app.add_option("--alpha", spec.lora_alpha);
  app.add_option("--reps", spec.repeats);
  app.add_option("--ce-chunk", spec.ce_chunk);
  app.add_option("--json", json_path);
  CLI11_PARSE(app, argc, argv);
  std::vector<std::string> args(argv, argv + argc);
  try {
    core::set_knob(spec.config, core::Knob::kAttn, attn);
    core::set_knob(spec.config, core::Knob::kMoe, moe);
    core::set_knob(spec.config, core::Knob::kOptimizer, optimizer);
    for (int64_t s : seqs) spec.points.push_back({batch, s, {}});
    engine::StepReport r = model::run_steps(spec, [](const engine::PointResult& p) {
      std::cout << runs::point_line(p) << "\n";
    });
    std::cout << fmt::format("init {:.1f} s, {} params, {} LoRA modules, {} trainable\n", r.init_s,
                             r.base_parameters, r.lora_modules, r.lora_parameters);
    if (!json_path.empty()) {
      core::Evidence ev("step_bench", args);
      ev.results() = runs::to_json(r);
      ev.write(json_path);
    }
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
