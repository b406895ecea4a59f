// The measured LoRA step (its types: engine/step_spec.hpp; run_steps: model/engine.hpp): model
// build, per-point warm-up, timed repeats with forward / loss / backward / optimizer split, peak
// memory, OOM as a result, and one optional traced step.
#include "tprobe/engine/step_spec.hpp"

#include <fmt/format.h>
#include <torch/torch.h>

#include <chrono>
#include <limits>
#include <mutex>
#include <regex>
#include <unordered_map>

#include "tprobe/config.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/host_memory.hpp"
#include "tprobe/core/base/table.hpp"
#include "tprobe/core/cost/step_plan.hpp"
#include "tprobe/core/gemma4/checkpoint.hpp"
#include "tprobe/core/step/knobs.hpp"
#include "tprobe/model/attention.hpp"
#include "tprobe/model/autograd_links.hpp"
#include "tprobe/model/gemma4.hpp"
#include "tprobe/model/loader.hpp"
#include "tprobe/model/torch_compat.hpp"
#include "tprobe/model/engine.hpp"

#if TPROBE_HAS_TORCH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#endif

namespace tprobe::model {

// The engine works in engine's request and result types.
using namespace engine;

using torch::Tensor;

std::optional<int64_t> parse_oom_bytes(const std::string& message) {
  static const std::regex re(R"(Tried to allocate ([0-9]+(?:\.[0-9]+)?) ?(B|KiB|MiB|GiB|TiB))");
  // The CPU allocator's: "you tried to allocate 17592186044416 bytes".
  static const std::regex cpu(R"(you tried to allocate ([0-9]{1,18}) bytes)");
  std::smatch m;
  if (std::regex_search(message, m, cpu)) return std::stoll(m[1].str());
  if (!std::regex_search(message, m, re)) return std::nullopt;
  double v = std::stod(m[1].str());
  const std::string unit = m[2].str();
  const double scale = unit == "B"     ? 1.0
                       : unit == "KiB" ? 1024.0
                       : unit == "MiB" ? 1048576.0
                       : unit == "GiB" ? 1073741824.0
                                       : 1099511627776.0;
  return static_cast<int64_t>(v * scale);
}

std::optional<std::string> allocator_refusal(const std::string& message) {
  const bool cpu = message.find("DefaultCPUAllocator") != std::string::npos ||
                   message.find("not enough memory") != std::string::npos;
  const bool gpu = message.find("CUDA out of memory") != std::string::npos ||
                   message.find("OutOfMemory") != std::string::npos;
  if (!cpu && !gpu) return std::nullopt;
  const char* which = cpu ? "CPU" : "CUDA";
  if (std::optional<int64_t> bytes = parse_oom_bytes(message)) {
    return fmt::format("out of memory: the {} allocator refused {} ({} bytes asked)", which,
                       core::format_bytes(static_cast<double>(*bytes)), *bytes);
  }
  return fmt::format("out of memory: the {} allocator refused an allocation", which);
}

double measure_gemm_tflops(int64_t n, int repeats) {
  if (!torch::cuda::is_available()) fail("the GEMM peak needs a CUDA device");
  auto opts = torch::TensorOptions().dtype(torch::kBFloat16).device(torch::kCUDA, 0);
  torch::NoGradGuard no_grad;
  Tensor a = torch::randn({n, n}, opts), b = torch::randn({n, n}, opts);
  Tensor c = torch::matmul(a, b);  // warm-up: cuBLAS picks its kernel here
  cuda_synchronize();
#if TPROBE_HAS_TORCH_CUDA
  at::cuda::CUDAEvent start(cudaEventDefault), stop(cudaEventDefault);
  start.record();
  for (int i = 0; i < repeats; ++i) torch::matmul_out(c, a, b);
  stop.record();
  cuda_synchronize();
  const double s = start.elapsed_time(stop) / 1e3;
  return 2.0 * static_cast<double>(n) * n * n * repeats / s / 1e12;
#else
  (void)repeats;
  fail("the GEMM peak needs a CUDA build of libtorch");
#endif
}

namespace {

// FNV-1a over the config facts that decide the step's shapes.
std::string config_digest(const core::ModelConfig& c) {
  std::string text = fmt::format(
      "{} {} {} {} {} {} {} {} {} {} {} {} {} {} {}", c.hidden_size, c.num_layers,
      c.intermediate_size, c.num_attention_heads, c.num_kv_heads, c.head_dim, c.global_head_dim,
      c.num_global_kv_heads, c.attention_k_eq_v, c.sliding_window, c.vocab_size, c.num_experts,
      c.top_k_experts, c.moe_intermediate_size, c.final_logit_softcapping.value_or(0.0));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const auto g = c.layer(i);
    text += fmt::format(" {}:{}:{}:{}", static_cast<int>(g.type), g.head_dim, g.num_kv_heads,
                        g.has_v_proj);
  }
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : text) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return fmt::format("fnv1a64:{:016x}", h);
}

torch::Dtype parse_dtype(const std::string& name) {
  if (name == "bf16") return torch::kBFloat16;
  if (name == "fp32") return torch::kFloat;
  if (name == "fp64") return torch::kDouble;
  fail_usage("dtype '{}': expected bf16, fp32 or fp64", name);
}

void validate(const StepSpec& s) {
  if (s.device != "cpu" && s.device != "cuda")
    fail_usage("device '{}': expected cpu or cuda", s.device);
  parse_dtype(s.dtype);
  // Every knob's value against what this engine is (the knob registry's requirements).
  if (!s.config.attn || !s.config.moe) fail("the step's defaults were not resolved");
  if (auto why = core::config_refusal(s.config, engine_facts(s.device, s.dtype)))
    fail_usage("{}", *why);
  if (s.device == "cuda" && !torch::cuda::is_available())
    fail("device cuda: no CUDA device is usable");
  if (s.warmup < 0) fail_usage("warm-up {}: must be >= 0", s.warmup);
  if (s.repeats < 1) fail_usage("repeats {}: must be >= 1", s.repeats);
  if (s.config.ce != core::CeForm::kNaive && s.ce_chunk <= 0)
    fail_usage("CE chunk {}: must be positive", s.ce_chunk);
  if (s.points.empty()) fail_usage("no points to measure");
  for (const auto& p : s.points) {
    if (p.batch < 1) fail_usage("batch {}: must be >= 1", p.batch);
    if (p.width < 2) fail_usage("width {}: must be >= 2 (a label needs a next token)", p.width);
    if (!p.lengths.empty()) {
      if (static_cast<int64_t>(p.lengths.size()) != p.batch)
        fail_usage("{} lengths for batch {}: give one per row", p.lengths.size(), p.batch);
      for (int64_t l : p.lengths) {
        if (l < 2 || l > p.width) fail_usage("length {} is outside 2..{} (the width)", l, p.width);
      }
    }
  }
}

// Interval marks of one step: CUDA events on the current stream on a GPU, host clock on CPU.
class StepClock {
 public:
  explicit StepClock(bool cuda) : cuda_(cuda) {
#if TPROBE_HAS_TORCH_CUDA
    if (cuda_) {
      for (auto& e : events_) e = std::make_unique<at::cuda::CUDAEvent>(cudaEventDefault);
    }
#endif
  }
  void mark(int i) {
#if TPROBE_HAS_TORCH_CUDA
    if (cuda_) {
      events_[i]->record();
      return;
    }
#endif
    host_[i] = std::chrono::steady_clock::now();
  }
  // Seconds between marks a and b; call after the step has synchronised.
  double seconds(int a, int b) const {
#if TPROBE_HAS_TORCH_CUDA
    if (cuda_) return events_[a]->elapsed_time(*events_[b]) / 1e3;
#endif
    return std::chrono::duration<double>(host_[b] - host_[a]).count();
  }

 private:
  bool cuda_;
  std::chrono::steady_clock::time_point host_[5];
#if TPROBE_HAS_TORCH_CUDA
  std::unique_ptr<at::cuda::CUDAEvent> events_[5];
#endif
};

struct StepTimes {
  double step = 0, forward = 0, loss = 0, backward = 0, optimizer = 0;
  double loss_value = 0;
  int64_t targets = 0;
};

// One training step from no gradients: forward, loss, backward and, with an optimizer, its step
// (the gradients are left for the caller to read and then set to none: clear_grads).
StepTimes one_step(Gemma4Model& m, const Tensor& ids, const std::vector<int64_t>& lengths,
                   ForwardRecord* rec, bool cuda, core::StepObserver* observer,
                   LoraOptimizer* optimizer) {
  StepClock clock(cuda);
  // Forward ops' sequence numbers and backward nodes, for the tracer's attribution (only when
  // it wants them: a traced step).
  AutogradLinks links(observer);
  cuda_synchronize();
  clock.mark(0);
  Tensor h;
  {
    core::ObserverScope scope(observer, core::StepTag{core::StepPhase::kForward,
                                                      core::StepPart::kOther, -1,
                                                      std::nullopt});
    h = m.hidden_states(ids, rec, lengths);
  }
  clock.mark(1);
  LossResult loss = m.head_loss(h, ids, lengths);
  clock.mark(2);
  {
    // On a CUDA step the backward runs on the autograd engine's device thread, where this scope
    // is not seen: there a launch outside every node is untagged. On the CPU it runs here.
    core::ObserverScope scope(observer, core::StepTag{core::StepPhase::kBackward,
                                                      core::StepPart::kOther, -1,
                                                      std::nullopt});
    loss.loss.backward();
  }
  clock.mark(3);
  if (optimizer) {
    core::ObserverScope scope(observer, core::StepTag{core::StepPhase::kOptimizer,
                                                      core::StepPart::kOther, -1,
                                                      std::nullopt});
    optimizer->step();
  }
  clock.mark(4);
  cuda_synchronize();
  StepTimes t;
  t.forward = clock.seconds(0, 1);
  t.loss = clock.seconds(1, 2);
  t.backward = clock.seconds(2, 3);
  t.optimizer = optimizer ? clock.seconds(3, 4) : 0.0;
  t.step = clock.seconds(0, optimizer ? 4 : 3);
  t.loss_value = loss.loss.item<double>();
  t.targets = loss.num_targets;
  return t;
}

// The memory step's observer: the same stack of contexts the CUPTI source keeps per thread (engine
// scopes and autograd nodes, core/trace/step_trace.hpp), read by the allocator's event hook on the
// allocating thread. Its events, tags and forward links are a core::RawMemory.
thread_local std::vector<core::LaunchContext> t_memory_stack;

class MemoryRecorder : public core::StepObserver {
 public:
  // A step at 2×16,384 on the 26B shapes makes about 10^5 events; the cap keeps a runaway bounded
  // (past it the events are counted as dropped and the replay refuses).
  static constexpr size_t kMaxEvents = size_t{1} << 24;

  explicit MemoryRecorder(bool cuda) : origin_(std::chrono::steady_clock::now()) {
    raw_.device = cuda ? "cuda:0" : "cpu";
    raw_.totals_known = cuda;
  }
  void enter(const core::StepTag& tag) override {
    core::LaunchContext c;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = ids_.find(key(tag));
      if (it == ids_.end()) {
        raw_.tags.push_back(tag);
        it = ids_.emplace(key(tag), static_cast<int64_t>(raw_.tags.size())).first;
      }
      c.tag = it->second;
    }
    t_memory_stack.push_back(c);
  }
  void leave() override {
    if (!t_memory_stack.empty()) t_memory_stack.pop_back();
  }
  bool wants_links() const override { return true; }
  void forward_op(uint64_t thread, int64_t seq) override {
    const int64_t tag =
        !t_memory_stack.empty() && !t_memory_stack.back().node ? t_memory_stack.back().tag : 0;
    std::lock_guard<std::mutex> lock(mu_);
    raw_.forward_ops.push_back({thread, seq, tag});
  }
  void node_enter(uint64_t forward_thread, int64_t seq) override {
    core::LaunchContext c;
    c.node = true;
    c.node_thread = forward_thread;
    c.node_seq = seq;
    t_memory_stack.push_back(c);
  }
  void node_leave() override {
    if (!t_memory_stack.empty()) t_memory_stack.pop_back();
  }
  static void sink(void* user, const void* ptr, int64_t bytes, int64_t total_allocated,
                   int64_t total_reserved, bool cuda) {
    auto* self = static_cast<MemoryRecorder*>(user);
    if (bytes == 0 || cuda != self->raw_.totals_known) return;  // one device per window
    core::MemoryEvent e;
    e.t_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                 std::chrono::steady_clock::now() - self->origin_)
                 .count();
    e.ptr = reinterpret_cast<uint64_t>(ptr);
    e.bytes = bytes;
    e.total_allocated = total_allocated;
    e.total_reserved = total_reserved;
    if (!t_memory_stack.empty()) e.context = t_memory_stack.back();
    std::lock_guard<std::mutex> lock(self->mu_);
    if (self->raw_.events.size() >= kMaxEvents) {
      ++self->raw_.dropped_events;
      return;
    }
    self->raw_.events.push_back(e);
  }
  core::RawMemory& raw() { return raw_; }

 private:
  static uint64_t key(const core::StepTag& t) {
    return (static_cast<uint64_t>(t.phase) << 56) | (static_cast<uint64_t>(t.part) << 48) |
           (static_cast<uint64_t>(t.layer_kind ? 1 + static_cast<int>(*t.layer_kind) : 0) << 40) |
           static_cast<uint32_t>(t.layer);
  }
  std::chrono::steady_clock::time_point origin_;
  std::mutex mu_;
  std::unordered_map<uint64_t, int64_t> ids_;
  core::RawMemory raw_;
};

int64_t storage_bytes(const std::vector<std::pair<std::string, Tensor*>>& params) {
  int64_t n = 0;
  for (const auto& [name, t] : params) {
    if (t->defined()) n += static_cast<int64_t>(t->nbytes());
  }
  return n;
}

// model.zero_grad(set_to_none=True), as Trainer runs it after each optimizer step: every step, in
// both modes, starts with no gradients.
void clear_grads(Gemma4Model& m) {
  for (auto& [name, t] : m.lora_parameters()) t->mutable_grad() = Tensor();
}

// CUDA's caching allocator ("CUDA out of memory", c10::OutOfMemoryError) and the CPU allocator
// ("DefaultCPUAllocator: not enough memory: you tried to allocate N bytes").
bool is_oom(const std::string& what) {
  return what.find("out of memory") != std::string::npos ||
         what.find("OutOfMemory") != std::string::npos ||
         what.find("not enough memory") != std::string::npos;
}

}  // namespace

// Size: the measured step's loop over the points, its optimizer and limits held across them;
// the lead is splitting it (issue 47).
StepReport run_steps(const StepSpec& request,
                     const std::function<void(const PointResult&)>& on_point) {
  // The defaults left open resolved against this engine (run_profile has done so already, and
  // said why where the choice is not the usual one).
  StepSpec spec = request;
  spec.config = core::resolve_defaults(spec.config, engine_facts(spec.device, spec.dtype));
  validate(spec);
  const core::StepConfig& knobs = spec.config;
  const bool cuda = spec.device == "cuda";
  ModelOptions mo;
  mo.dtype = parse_dtype(spec.dtype);
  mo.device = cuda ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  mo.attn = *knobs.attn;
  mo.moe = *knobs.moe;
  mo.gradient_checkpointing = knobs.checkpointing != core::Checkpointing::kOff;
  mo.input_requires_grad = spec.input_requires_grad;
  mo.ce = knobs.ce;
  mo.ce_chunk = spec.ce_chunk;
  mo.fused_rms_norm = knobs.norm == core::NormKind::kFused;
  mo.attention_mask_passed = knobs.attention_mask == core::AttentionMask::kOnes;
  mo.routing = knobs.routing;

  StepReport report;
  auto t0 = std::chrono::steady_clock::now();
  // What a point may use at most (core/cost/step_plan.hpp): the model whose weights, adapters
  // and adapter gradients exceed it is refused before any of it is allocated; a point whose
  // certain tensors exceed it is refused before it runs, an `oom` with the sizes; one below it
  // runs, and a real OOM stays a measured one.
  core::MemoryLimit memory_limit;
  if (cuda) {
    memory_limit.bytes = cuda_total_memory_bytes();
    memory_limit.what = "the device's memory";
  } else {
    memory_limit = core::host_memory_limit();
  }
  std::optional<core::Checkpoint> checkpoint;
  if (!spec.checkpoint_dir.empty()) checkpoint.emplace(core::Checkpoint::open(spec.checkpoint_dir));
  {
    core::ModelPlanRequest q;
    q.dtype_bytes = static_cast<int64_t>(c10::elementSize(mo.dtype));
    q.lora_targets = spec.lora_targets;
    q.lora_rank = spec.lora_rank;
    q.lora_dtype_bytes = knobs.lora_dtype == core::LoraDtype::kFp32 ? 4 : q.dtype_bytes;
    const core::ModelPlan planned = core::plan_model(
        checkpoint ? checkpoint->config() : core::embedded_model(spec.model), q);
    if (std::string why = core::model_refusal(planned, spec.lora_rank, memory_limit); !why.empty()) {
      fail("{}", why);
    }
  }
  std::optional<Gemma4Model> built;
  {
    // The weights' way onto the device, with the host's anonymous memory sampled throughout and
    // the allocator's peak over it.
    cuda_synchronize();
    cuda_reset_peak_memory();
    core::RssAnonPeak host_peak;
    const auto load_start = std::chrono::steady_clock::now();
    if (!checkpoint) {
      built.emplace(Gemma4Model::random(core::embedded_model(spec.model), mo, spec.seed));
      report.source = "random init";
      report.load.method = "random init on the device (normal(0, 0.02), norms and scales at 1)";
    } else {
      built.emplace(load_model(*checkpoint, mo, LoadPlan{}, &report.load));
      report.source = spec.checkpoint_dir;
    }
    cuda_synchronize();
    report.load.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
    report.load.host_rss_anon_peak_bytes = host_peak.peak();
    if (cuda) report.load.device_peak_allocated_bytes = cuda_peak_allocated_bytes();
  }
  Gemma4Model& m = *built;
  if (!spec.lora_targets.empty()) {
    LoraConfig lora;
    lora.targets = spec.lora_targets;
    lora.rank = spec.lora_rank;
    lora.alpha = spec.lora_alpha;
    lora.fp32 = knobs.lora_dtype == core::LoraDtype::kFp32;
    m.add_lora(lora, spec.seed + 1);
  }
  // The optimizer (--optimizer adamw): one for the whole run, as one training run has one, its
  // moments allocated at its first step and kept across the points. None without adapters.
  std::unique_ptr<LoraOptimizer> optimizer;
  if (knobs.optimizer == core::OptimizerKind::kAdamw && !m.lora_parameters().empty())
    optimizer = std::make_unique<LoraOptimizer>(m);
  cuda_synchronize();
  report.init_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  report.config = m.config();
  report.model = m.config().name;
  report.config_digest = config_digest(m.config());
  report.device_resolved = cuda ? "cuda:0" : "cpu";
  report.dtype = spec.dtype;
  report.clock = cuda ? "cuda_events" : "steady_clock";
  report.base_parameters = m.count_base_parameters();
  report.lora_modules = m.count_lora_modules();
  report.lora_parameters = m.count_lora_parameters();
  report.weights_allocated_bytes = cuda ? cuda_allocated_bytes() : -1;  // the CPU: null

  bool tracer_primed = false;
  bool raw_kept = false;
  const int64_t weights_bytes = storage_bytes(m.parameters());
  const int64_t lora_bytes = storage_bytes(m.lora_parameters());
  std::string cut_at;  // set by measure() when a signal cut its step short
  // The weights, the adapters and the adapters' gradients (each backward makes them), and with
  // the optimizer its two moments per adapter parameter in the adapters' dtype (torch's AdamW).
  const int64_t resident_bytes = weights_bytes + (optimizer ? 4 : 2) * lora_bytes;
  const auto dtype_bytes = static_cast<int64_t>(c10::elementSize(mo.dtype));
  // One point: warm-up, timed repeats, and (not for the extra points) the traced and memory steps.
  auto measure = [&](const StepPoint& point, int64_t warmup, int64_t repeats,
                     bool extra) -> PointResult {
    PointResult r;
    r.point = point;
    r.extra = extra;
    core::StepPlanRequest plan_request;
    plan_request.batch = point.batch;
    plan_request.width = point.width;
    plan_request.lengths = point.lengths;
    plan_request.attn = *knobs.attn;
    plan_request.cuda = cuda;
    plan_request.naive_ce = knobs.ce == core::CeForm::kNaive;
    plan_request.ce_chunk = spec.ce_chunk;
    plan_request.dtype_bytes = dtype_bytes;
    plan_request.mask_per_row = knobs.attention_mask == core::AttentionMask::kOnes;
    const core::StepPlan plan = core::plan_step(m.config(), plan_request);
    auto wall_start = std::chrono::steady_clock::now();
    auto since = [](std::chrono::steady_clock::time_point t) {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    };
    r.planned_floor_bytes = static_cast<double>(resident_bytes) + plan.activation_floor_bytes;
    if (std::string why = core::plan_refusal(plan, resident_bytes, memory_limit);
        !why.empty()) {
      r.outcome = PointOutcome::kOom;
      r.refused_before_running = true;
      r.message = std::move(why);
      if (plan.largest.bytes < static_cast<double>(std::numeric_limits<int64_t>::max())) {
        r.oom_tried_bytes = static_cast<int64_t>(plan.largest.bytes);
      }
      r.memory_measured = cuda;
      return r;
    }
      try {
        torch::manual_seed(static_cast<uint64_t>(point.width * 1000 + point.batch));
        Tensor ids;
        if (!point.tokens_error.empty()) fail("{}", point.tokens_error);
        if (!point.ids.empty()) {
          // The user's tokens (profile --dataset), padding included, as the runs built them.
          if (static_cast<int64_t>(point.ids.size()) != point.batch * point.width)
            fail("{} token ids for a {}x{} point", point.ids.size(), point.batch, point.width);
          ids = torch::tensor(point.ids, torch::TensorOptions().dtype(torch::kLong))
                    .view({point.batch, point.width});
          if (ids.min().item<int64_t>() < 0 || ids.max().item<int64_t>() >= m.config().vocab_size)
            fail("a token id outside the vocabulary (0..{})", m.config().vocab_size - 1);
        } else {
          ids = torch::randint(0, m.config().vocab_size, {point.batch, point.width},
                               torch::TensorOptions().dtype(torch::kLong));
          for (size_t b = 0; b < point.lengths.size(); ++b) {
            ids[static_cast<int64_t>(b)]
                .narrow(0, point.lengths[b], point.width - point.lengths[b])
                .fill_(m.config().pad_token_id);
          }
        }
        ids = ids.to(mo.device);
        cuda_reset_peak_memory();
        ForwardRecord rec;
        wall_start = std::chrono::steady_clock::now();
        for (int64_t i = 0; i < warmup + repeats; ++i) {
          StepTimes t = one_step(m, ids, point.lengths, i == 0 ? &rec : nullptr, cuda, nullptr,
                                 optimizer.get());
          if (i == 0) r.inert_adapters = static_cast<int64_t>(inert_lora_b(m).size());
          clear_grads(m);
          if (i < warmup) continue;
          if (r.step_s.empty()) {
            r.loss_value = t.loss_value;
            r.loss_targets = t.targets;
          }
          r.step_s.push_back(t.step);
          r.forward_s.push_back(t.forward);
          r.loss_s.push_back(t.loss);
          r.backward_s.push_back(t.backward);
          if (optimizer) r.optimizer_s.push_back(t.optimizer);
        }
        cuda_synchronize();
        r.wall_s = since(wall_start);
        r.memory_measured = cuda;
        r.peak_allocated_bytes = cuda_peak_allocated_bytes();
        r.peak_reserved_bytes = cuda_peak_reserved_bytes();
        r.attn_sliding = rec.attn_sliding;
        r.attn_full = rec.attn_full;
        r.moe = rec.moe;
        // The experts' load of the point's first step (read back once, after the timed steps).
        r.expert_load.routed_per_layer = rec.routed_per_layer;
        for (size_t layer = 0; layer < rec.expert_tokens.size(); ++layer) {
          const Tensor& t = rec.expert_tokens[layer];
          if (!t.defined()) continue;
          const Tensor host = t.to(torch::kCPU).contiguous();
          core::ExpertLoadLayer e;
          e.layer = static_cast<int64_t>(layer);
          e.tokens.assign(host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + host.numel());
          const core::LoadSummary sum = core::summarize_load(e.tokens);
          e.max_over_mean = sum.max_over_mean;
          e.cv = sum.cv;
          e.zero_experts = sum.zero_experts;
          r.expert_load.layers.push_back(std::move(e));
        }
        if (!extra && spec.tracer && !(spec.should_stop && spec.should_stop())) {
          // A separate step, so that no timed repeat runs under tracing.
          try {
            m.options().observer = spec.tracer;
            if (!tracer_primed) {
              // The first step a process runs under CUPTI pays its one-time setup (on the H200
              // ~25 ms: +28 % on an 88 ms step). That step is run once and dropped.
              tracer_primed = true;
              spec.tracer->begin();
              StepTimes t =
                  one_step(m, ids, point.lengths, nullptr, cuda, spec.tracer, optimizer.get());
              spec.tracer->end();
              spec.tracer->discard();
              clear_grads(m);
              r.trace_priming_step_s = t.step;
            }
            spec.tracer->begin();
            StepTimes t =
                one_step(m, ids, point.lengths, nullptr, cuda, spec.tracer, optimizer.get());
            spec.tracer->end();
            m.options().observer = nullptr;
            clear_grads(m);
            r.traced = true;
            r.traced_step_s = t.step;
          } catch (const std::exception& e) {
            m.options().observer = nullptr;
            spec.tracer->end();
            clear_grads(m);
            r.trace_message = e.what();
          }
        }
        if (!extra && spec.record_memory && !(spec.should_stop && spec.should_stop())) {
          // A separate step again: the allocator's event hook and the engine's scopes on every
          // allocation, and nothing else (no CUPTI), so that the figures are the plain step's.
          // With the optimizer it is a step after the optimizer's first (the timed ones ran it):
          // its moments are resident, and its own step is in the window; the gradients are set
          // to none after the window closes, which frees and never raises the peak.
          try {
            clear_grads(m);
            cuda_synchronize();
            cuda_reset_peak_memory();
            const int64_t state_bytes = optimizer ? optimizer->state_bytes() : 0;
            MemoryRecorder recorder(cuda);
            recorder.raw().start_allocated = cuda_allocated_bytes();
            recorder.raw().start_reserved = cuda_reserved_bytes();
            // The CPU allocator reports no totals: the resident set is what the engine holds, the
            // optimizer's moments included.
            if (!cuda) recorder.raw().start_allocated = weights_bytes + lora_bytes + state_bytes;
            m.options().observer = &recorder;
            StepTimes t;
            {
              AllocatorEvents events(&MemoryRecorder::sink, &recorder);
              t = one_step(m, ids, point.lengths, nullptr, cuda, &recorder, optimizer.get());
            }
            m.options().observer = nullptr;
            core::RawMemory& raw = recorder.raw();
            raw.facts.weights_bytes = weights_bytes;
            raw.facts.lora_parameter_bytes = lora_bytes;
            raw.facts.lora_parameters = report.lora_parameters;
            raw.facts.checkpointing = knobs.checkpointing != core::Checkpointing::kOff;
            raw.facts.optimizer_ran = optimizer != nullptr;
            raw.facts.optimizer_state_bytes = state_bytes;
            for (auto& [name, p] : m.lora_parameters()) {
              if (p->grad().defined())
                raw.facts.lora_grad_ptrs.insert(reinterpret_cast<uint64_t>(p->grad().data_ptr()));
            }
            r.memory_step_s = t.step;
            r.memory_step_peak_allocated_bytes = cuda_peak_allocated_bytes();
            clear_grads(m);
            r.memory = core::analyze_step_memory(raw);
            if (spec.keep_raw_memory && !raw_kept) {
              raw_kept = true;
              r.raw_memory = std::move(raw);
            }
          } catch (const std::exception& e) {
            m.options().observer = nullptr;
            clear_grads(m);
            std::string what = e.what();
            if (const auto* ce = dynamic_cast<const c10::Error*>(&e)) what = ce->what_without_backtrace();
            r.memory_message = what.substr(0, 600);
            r.memory.reset();
            cuda_synchronize();
            cuda_empty_cache();
          }
        }
      } catch (const std::exception& e) {
        clear_grads(m);
        std::string what = e.what();
        if (const auto* ce = dynamic_cast<const c10::Error*>(&e)) what = ce->what_without_backtrace();
        if (spec.should_stop && spec.should_stop()) {
          // A signal cut the step at an op boundary: not a failure of the point, and nothing of
          // it measured. The sweep records where and stops (the caller drops this point).
          const auto in = what.find("interrupted by ");
          cut_at = in == std::string::npos ? what.substr(0, 200) : what.substr(in, 200);
          cut_at = cut_at.substr(0, cut_at.find('\n'));
          cuda_synchronize();
          cuda_empty_cache();
          return r;
        }
        r.outcome = is_oom(what) ? PointOutcome::kOom : PointOutcome::kError;
        r.wall_s = since(wall_start);
        r.message = what.substr(0, 600);
        if (r.outcome == PointOutcome::kOom) {
          r.oom_tried_bytes = parse_oom_bytes(what);
          if (std::optional<std::string> words = allocator_refusal(what)) r.message = *words;
        }
        r.step_s.clear();
        r.forward_s.clear();
        r.loss_s.clear();
        r.backward_s.clear();
        r.memory_measured = cuda;
        r.peak_allocated_bytes = cuda_peak_allocated_bytes();
        r.peak_reserved_bytes = cuda_peak_reserved_bytes();
        cuda_synchronize();
        cuda_empty_cache();
      }
    return r;
  };
  for (const StepPoint& point : spec.points) {
    if (spec.should_stop && spec.should_stop()) {
      report.interrupted = true;
      break;
    }
    if (spec.on_start) spec.on_start(point);
    PointResult r = measure(point, spec.warmup, spec.repeats, false);
    if (!cut_at.empty()) {
      report.interrupted = true;
      report.interrupted_at = fmt::format("{}x{}: {}", point.batch, point.width, cut_at);
      break;
    }
    if (on_point) on_point(r);
    report.points.push_back(std::move(r));
  }
  // The groups the caller asks for once the sweep is in (a memory budget's predicted edges, a
  // search for the largest batch that fits), each under its own cap of the caching allocator,
  // group.steps consecutive timed steps per point (an OOM at any of them is the point's outcome:
  // the cache is emptied and the next point runs on the same model); asked again with what they
  // measured until it asks for nothing.
  for (int round = 0; spec.extra_points && !report.interrupted && round < kMaxExtraRounds; ++round) {
    std::vector<ExtraPoints> groups = spec.extra_points(report);
    if (groups.empty()) break;
    for (ExtraPoints& group : groups) {
      std::vector<PointResult> results;
      cuda_synchronize();
      cuda_empty_cache();
      cuda_set_memory_cap(group.memory_cap_bytes);
      for (const StepPoint& point : group.points) {
        if (spec.should_stop && spec.should_stop()) {
          report.interrupted = true;
          break;
        }
        if (spec.on_start) spec.on_start(point);
        PointResult r = measure(point, 0, std::max<int64_t>(1, group.steps), true);
        if (!cut_at.empty()) {
          report.interrupted = true;
          report.interrupted_at = fmt::format("{}x{}: {}", point.batch, point.width, cut_at);
          break;
        }
        if (on_point) on_point(r);
        results.push_back(std::move(r));
        cuda_synchronize();
        cuda_empty_cache();
      }
      cuda_set_memory_cap(0);
      report.extra.push_back(std::move(results));
      if (report.interrupted) break;
    }
  }
  return report;
}

}  // namespace tprobe::model
