// tprobe_make_adapter_fixtures: writes the lora-gate fixtures with tprobe's own training step on
// the Hugging Face gemma4-tiny checkpoint (CPU, fp32): adapters saved before a step (inert),
// after one AdamW step (real, in fp32 / bf16 / fp16-sharded copies and both name prefixes), after
// a step under checkpointing with input grads off (the trap: inert after training), and after a
// step whose optimizer held only the attention adapters (partial). docs/lora-gate.md.
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "tprobe/core/adapter/lora_adapter.hpp"
#include "tprobe/core/base/atomic_file.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/gemma4/checkpoint.hpp"
#include "tprobe/core/io/safetensors.hpp"
#include "tprobe/model/gemma4.hpp"
#include "tprobe/model/loader.hpp"

namespace {

using tprobe::fail;
namespace core = tprobe::core;
namespace model = tprobe::model;

void make_dir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    fail("{}: cannot create: {}", dir, std::strerror(errno));
  }
}

model::LoraConfig seven_targets() {
  model::LoraConfig lora;
  lora.targets = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  lora.rank = 4;
  lora.alpha = 8.0;
  return lora;
}

struct Step {
  bool checkpointing = false;
  bool input_requires_grad = true;
  bool attention_only_optimizer = false;  // the optimizer was given the attention adapters only
  bool take_step = true;
};

// Loads the base, attaches adapters (lora_B = 0 as PEFT does), and runs at most one AdamW step.
model::Gemma4Model trained(const core::Checkpoint& base, const Step& s) {
  model::ModelOptions o;
  o.gradient_checkpointing = s.checkpointing;
  o.input_requires_grad = s.input_requires_grad;
  model::Gemma4Model m = model::load_model(base, o);
  m.add_lora(seven_targets(), 7);
  if (!s.take_step) return m;
  std::vector<torch::Tensor> params;
  for (auto& [name, t] : m.lora_parameters()) {
    if (s.attention_only_optimizer && name.find("self_attn.") == std::string::npos) continue;
    params.push_back(*t);
  }
  torch::optim::AdamW opt(params, torch::optim::AdamWOptions(1e-3));
  torch::manual_seed(11);
  torch::Tensor ids = torch::randint(1, base.config().vocab_size, {2, 24}, torch::kLong);
  model::LossResult loss = m.loss(ids);
  // Under the trap the loss does not require grad: a trainer that skips the backward (or an
  // autograd that returns no gradients) leaves every adapter where it started.
  if (loss.loss.requires_grad()) loss.loss.backward();
  opt.step();
  std::cout << "  loss " << loss.loss.item<double>() << ", requires_grad "
            << loss.loss.requires_grad() << "\n";
  return m;
}

void convert(model::Gemma4Model& m, torch::Dtype dtype) {
  torch::NoGradGuard g;
  for (auto& [name, t] : m.lora_parameters()) *t = t->to(dtype);
}

// Splits DIR/adapter_model.safetensors into two shards plus an index, as a sharded save would.
void shard(const std::string& dir) {
  const std::string single = dir + "/" + core::kAdapterWeightsName;
  std::vector<std::vector<core::TensorToWrite>> parts(2);
  core::Json weight_map = core::Json::object();
  {
    core::SafetensorsFile file = core::SafetensorsFile::open(single);
    const auto& tensors = file.tensors();
    std::vector<std::vector<std::byte>> keep;
    keep.reserve(tensors.size());
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      keep.push_back(file.read(tensors[i].name));
      const std::size_t part = i < tensors.size() / 2 ? 0 : 1;
      parts[part].push_back({tensors[i], keep.back().data()});
    }
    const char* names[] = {"adapter_model-00001-of-00002.safetensors",
                           "adapter_model-00002-of-00002.safetensors"};
    for (std::size_t p = 0; p < 2; ++p) {
      core::write_safetensors(dir + "/" + names[p], parts[p], {{"format", "pt"}});
      for (const auto& t : parts[p]) weight_map[t.meta.name] = names[p];
    }
  }
  core::Json index = {{"metadata", core::Json::object()}, {"weight_map", weight_map}};
  core::write_file_atomic(dir + "/" + core::kAdapterIndexName, index.dump(2) + "\n");
  if (std::remove(single.c_str()) != 0) fail("{}: cannot remove", single);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: tprobe_make_adapter_fixtures BASE_CHECKPOINT_DIR OUT_DIR\n";
    return 2;
  }
  try {
    const core::Checkpoint base = core::Checkpoint::open(argv[1]);
    const std::string out = argv[2];
    make_dir(out);
    auto save = [&](model::Gemma4Model& m, const std::string& name, const std::string& prefix) {
      make_dir(out + "/" + name);
      model::save_adapter(m, out + "/" + name, prefix);
      std::cout << "wrote " << out << "/" << name << "\n";
    };
    {
      std::cout << "before-step\n";
      Step s;
      s.take_step = false;
      auto m = trained(base, s);
      save(m, "before-step", "model.");
    }
    {
      std::cout << "after-step\n";
      auto m = trained(base, Step{});
      save(m, "after-step", "model.");
      convert(m, torch::kBFloat16);
      save(m, "after-step-bf16-multimodal-names", "model.language_model.");
      convert(m, torch::kFloat16);
      save(m, "after-step-fp16-sharded", "model.");
      shard(out + "/after-step-fp16-sharded");
    }
    {
      std::cout << "checkpointing-without-input-grads\n";
      Step s;
      s.checkpointing = true;
      s.input_requires_grad = false;
      auto m = trained(base, s);
      save(m, "checkpointing-without-input-grads", "model.");
    }
    {
      std::cout << "attention-only-optimizer\n";
      Step s;
      s.attention_only_optimizer = true;
      auto m = trained(base, s);
      save(m, "attention-only-optimizer", "model.");
    }
  } catch (const tprobe::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
