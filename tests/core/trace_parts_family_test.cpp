// Parts and layer kinds of transformers decoders other than Gemma-4 (issue 48; docs/kernels.md,
// "Parts" and "Layer kinds"): hand-made traces that name their modules as transformers 5's
// Llama, Qwen3-MoE, Qwen2-MoE (shared expert), Mixtral (transformers 4's gate Linear and expert
// list), gpt-oss (the MoE block that is an "…MLP", attention sinks in the eager attention
// function) and DeepSeek-V3 (shared_experts) do, each row's cell worked out by hand; the negative
// controls: a renamed router's time is "unplaced" under its name, never in a neighbouring part,
// and without the base-model rule Llama's final norm would be the loss head. Layer kinds from each
// family's config.json shape, and hostile configs refused in one line.
#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/evidence.hpp"
#include "tprobe/core/gemma4/config_json.hpp"
#include "tprobe/core/gemma4/layer_kinds_json.hpp"
#include "tprobe/core/gemma4/model_config.hpp"
#include "tprobe/core/trace/attribute/trace_parts.hpp"
#include "tprobe/core/trace/read/trace_reader.hpp"

namespace tprobe::core {
namespace {

constexpr int kMain = 1, kAutograd = 2;

// phase, layer ("-" outside the layers), part
using Cell = std::tuple<std::string, std::string, std::string>;

struct Trace {
  Json events = Json::array();
  int64_t corr = 0;
  std::map<Cell, int64_t> want;  // by hand: kernel ns per cell
  std::map<std::string, int64_t> want_unplaced;  // module class -> kernel ns

  void module(const std::string& name, double ts, double end, int tid = kMain) {
    events.push_back({{"ph", "X"}, {"cat", "python_function"}, {"name", "nn.Module: " + name},
                      {"pid", 1}, {"tid", tid}, {"ts", ts}, {"dur", end - ts}});
  }
  void py(const std::string& name, double ts, double end) {
    events.push_back({{"ph", "X"}, {"cat", "python_function"}, {"name", name}, {"pid", 1},
                      {"tid", kMain}, {"ts", ts}, {"dur", end - ts}});
  }
  void op(const std::string& name, double ts, double end, int tid = kMain) {
    events.push_back({{"ph", "X"}, {"cat", "cpu_op"}, {"name", name}, {"pid", 1}, {"tid", tid},
                      {"ts", ts}, {"dur", end - ts}});
  }
  void flow(bool start, int64_t id, int tid, double ts) {
    Json f = {{"ph", start ? "s" : "f"}, {"id", id}, {"pid", 1}, {"tid", tid}, {"ts", ts},
              {"cat", "fwdbwd"}, {"name", "fwdbwd"}};
    if (!start) f["bp"] = "e";
    events.push_back(f);
  }
  // A launch on `tid` at `ts` and its kernel of c µs (c: its correlation), expected in `cell`.
  void launch(double ts, const Cell& cell, int tid = kMain) {
    const int64_t c = ++corr;
    events.push_back({{"ph", "X"}, {"cat", "cuda_runtime"}, {"name", "cudaLaunchKernel"},
                      {"pid", 1}, {"tid", tid}, {"ts", ts}, {"dur", 0.5},
                      {"args", {{"correlation", c}}}});
    events.push_back({{"ph", "X"}, {"cat", "kernel"}, {"name", fmt::format("k{}", c)}, {"pid", 0},
                      {"tid", 7}, {"ts", 10000 + 100 * c}, {"dur", c},
                      {"args", {{"correlation", c}, {"device", 0}, {"stream", 7}}}});
    if (std::get<0>(cell) == "untagged") {
      want_unplaced[std::get<2>(cell)] += c * 1000;
      want[{"untagged", "-", "untagged"}] += c * 1000;
    } else {
      want[cell] += c * 1000;
    }
  }
  // A forward op at `ts` (inside whatever runs there) whose backward op runs on autograd's
  // thread at `bts`, launching one kernel expected in `cell`.
  void backward(double ts, double bts, const Cell& cell) {
    const int64_t id = 100 + corr;
    op("aten::mm", ts, ts + 0.5);
    flow(true, id, kMain, ts);
    op("MmBackward0", bts, bts + 5, kAutograd);
    flow(false, id, kAutograd, bts);
    launch(bts + 1, cell, kAutograd);
  }
  std::string text() const { return Json{{"traceEvents", events}}.dump(); }
};

Cell fw(const std::string& layer, const std::string& part) { return {"forward", layer, part}; }
Cell bw(const std::string& layer, const std::string& part) { return {"backward", layer, part}; }
Cell unplaced(const std::string& module) { return {"untagged", "-", module}; }

std::map<Cell, int64_t> cells(const TraceParts& p) {
  std::map<Cell, int64_t> out;
  int64_t in_layers = 0;
  for (const LayerRow& l : p.breakdown.layers) {
    for (const auto& [phase, parts] : l.kernel_ns) {
      for (const auto& [part, ns] : parts) {
        if (ns != 0) out[{phase, std::to_string(l.layer), part}] += ns;
        in_layers += ns;
      }
    }
  }
  // Outside the layers: the breakdown rows less what the layers hold (kinds are "-" here).
  std::map<Cell, int64_t> layer_sums;
  for (const auto& [c, ns] : out) layer_sums[{std::get<0>(c), "-", std::get<2>(c)}] += ns;
  for (const PartRow& r : p.breakdown.rows) {
    const int64_t ns = r.kernel_ns - layer_sums[{r.phase, "-", r.part}];
    layer_sums[{r.phase, "-", r.part}] = 0;
    if (ns != 0) out[{r.phase, "-", r.part}] += ns;
  }
  return out;
}

std::map<std::string, int64_t> unplaced_by_module(const TraceParts& p) {
  std::map<std::string, int64_t> out;
  for (const UnplacedModuleRow& u : p.unplaced) out[u.module] += u.kernel_ns;
  return out;
}

TraceParts read(const Trace& t, TracePartsOptions o = {}) {
  return read_trace_buffer(t.text(), "family", {}, o).summary.parts;
}

// The frame every family shares: a ForCausalLM around a base "…Model" (not "…TextModel": the
// base-model rule), the embedding, rotary, the final norm, lm_head and HF's loss function.
void frame(Trace& t, const std::string& fam, double end) {
  t.module(fam + "ForCausalLM_0", 0, end + 300);
  t.module(fam + "Model_0", 10, end + 100);
  t.module("Embedding_0", 20, 30);
  t.launch(25, fw("-", "embedding"));
  t.module(fam + "RotaryEmbedding_0", 35, 40);
  t.launch(37, fw("-", "attention_proj"));
  t.module(fam + "RMSNorm_99", end + 10, end + 20);
  t.launch(end + 15, fw("-", "other"));  // the final norm, inside the base model
  t.module("Linear_99", end + 150, end + 160);
  t.launch(end + 155, {"loss", "-", "loss_head"});  // lm_head
  t.py("transformers/loss/loss_utils.py(30): ForCausalLMLoss", end + 200, end + 250);
  t.launch(end + 220, {"loss", "-", "loss_head"});
}

// A layer's attention half: input norm, the attention (projection, SDPA), post-attention norm.
void attention(Trace& t, const std::string& fam, int i, double at, bool eager_sinks = false) {
  const std::string L = std::to_string(i);
  t.module(fmt::format("{}RMSNorm_{}", fam, 2 * i), at, at + 5);
  t.launch(at + 2, fw(L, "attention_proj"));
  t.module(fmt::format("{}Attention_{}", fam, i), at + 10, at + 60);
  t.module(fmt::format("Linear_{}", 10 * i), at + 12, at + 20);
  t.launch(at + 15, fw(L, "attention_proj"));
  // gpt-oss: the sinks are concatenated to the logits inside eager_attention_forward
  t.py(eager_sinks ? "transformers/models/gpt_oss/modeling_gpt_oss.py(90): eager_attention_forward"
                   : "transformers/integrations/sdpa_attention.py(20): sdpa_attention_forward",
       at + 30, at + 50);
  t.launch(at + 40, fw(L, "attention_core"));
  t.module(fmt::format("{}RMSNorm_{}", fam, 2 * i + 1), at + 62, at + 66);
  t.launch(at + 64, fw(L, "attention_proj"));
}

TEST(TracePartsFamilies, LlamaDenseLayersAndTheBaseModel) {
  Trace t;
  frame(t, "Llama", 700);
  for (int i = 0; i < 2; ++i) {
    const double at = 100 + 300 * i;
    t.module(fmt::format("LlamaDecoderLayer_{}", i), at, at + 250);
    attention(t, "Llama", i, at + 5);
    t.module(fmt::format("LlamaMLP_{}", i), at + 100, at + 200);
    t.module(fmt::format("Linear_{}", 10 * i + 5), at + 110, at + 120);
    t.launch(at + 115, fw(std::to_string(i), "dense_mlp"));
    t.launch(at + 230, fw(std::to_string(i), "other"));  // the residual add
  }
  t.backward(100 + 116, 3000, bw("0", "dense_mlp"));
  const TraceParts p = read(t);
  EXPECT_EQ(cells(p), t.want);
  EXPECT_EQ(p.counts.untagged, 0);
  EXPECT_TRUE(p.unplaced.empty());
  ASSERT_EQ(p.decoder_layers.size(), 2u);
  // Negative control: the final norm sits in "LlamaModel"; as a plain module outside the
  // ForCausalLM's base model it would be the loss head.
  Trace n = t;
  std::string s = n.text();
  const std::string from = "nn.Module: LlamaModel_0", to = "nn.Module: LlamaStack_0";
  s.replace(s.find(from), from.size(), to);
  const TraceParts q = read_trace_buffer(s, "family", {}, {}).summary.parts;
  EXPECT_EQ(cells(q)[Cell("forward", "-", "other")], 0);
  EXPECT_GT(cells(q)[Cell("loss", "-", "loss_head")], t.want[Cell("loss", "-", "loss_head")]);
}

// Qwen3-MoE (transformers 5): layer 0 dense (mlp_only_layers), layer 1 a SparseMoeBlock holding
// its TopKRouter and fused Experts; the block's own code is the experts'.
Trace qwen3_moe(const std::string& router_class) {
  Trace t;
  const bool renamed = router_class != "Qwen3MoeTopKRouter";
  frame(t, "Qwen3Moe", 700);
  t.module("Qwen3MoeDecoderLayer_0", 100, 390);
  attention(t, "Qwen3Moe", 0, 105);
  t.module("Qwen3MoeMLP_0", 200, 300);
  t.launch(250, fw("0", "dense_mlp"));
  t.module("Qwen3MoeDecoderLayer_1", 400, 690);
  attention(t, "Qwen3Moe", 1, 405);
  t.module("Qwen3MoeSparseMoeBlock_0", 500, 650);
  t.module(router_class + "_0", 505, 530);
  t.launch(510, renamed ? unplaced(router_class) : fw("1", "router"));
  t.module("Qwen3MoeExperts_0", 540, 600);
  t.launch(550, fw("1", "experts"));
  t.launch(620, fw("1", "experts"));  // the block's own reshape / combine
  t.backward(512, 3000, renamed ? unplaced(router_class) : bw("1", "router"));
  t.backward(552, 3100, bw("1", "experts"));
  return t;
}

TEST(TracePartsFamilies, Qwen3MoeSparseBlockRouterAndExperts) {
  const Trace t = qwen3_moe("Qwen3MoeTopKRouter");
  TracePartsOptions o;
  o.layer_types = {LayerType::kFull, LayerType::kFull};
  o.layer_ffn = {"dense", "moe"};
  const TraceParts p = read(t, o);
  EXPECT_EQ(cells(p), t.want);
  EXPECT_EQ(p.counts.untagged, 0);
  EXPECT_EQ(to_json(p)["parts"]["layer_ffn"], Json({"dense", "moe"}));
  EXPECT_FALSE(to_json(p).contains("unplaced_modules"));  // none: the key is not written
}

TEST(TracePartsFamilies, ARenamedRouterIsUnplacedNotMisfiled) {
  const Trace good = qwen3_moe("Qwen3MoeTopKRouter");
  const Trace t = qwen3_moe("Qwen3MoeTopKGate");  // no rule names this class
  const TraceParts p = read(t);
  EXPECT_EQ(cells(p), t.want);
  EXPECT_EQ(unplaced_by_module(p), t.want_unplaced);
  ASSERT_EQ(p.unplaced.size(), 2u);  // forward and backward
  EXPECT_EQ(p.counts.untagged_unplaced, 2);
  EXPECT_EQ(p.counts.untagged, 2);
  // Nothing of it went to a neighbouring part: the experts and the layer's other cells are the
  // same as with the router's own name.
  const TraceParts g = read(good);
  for (const Cell& c : {fw("1", "experts"), bw("1", "experts"), fw("1", "other")}) {
    EXPECT_EQ(cells(p)[c], cells(g)[c]) << std::get<0>(c) << std::get<2>(c);
  }
  // The evidence names it and reads back.
  const Json j = to_json(p);
  ASSERT_TRUE(j.contains("unplaced_modules"));
  EXPECT_EQ(j["unplaced_modules"][0]["module"], "Qwen3MoeTopKGate");
  EXPECT_EQ(j["attribution"]["untagged_unplaced_rows"], 2);
  const TraceParts back = trace_parts_from_json(j, "evidence");
  EXPECT_EQ(to_json(back), j);
  bool table = false;
  for (const Table& tb : trace_parts_tables(p)) table |= tb.render().find("Qwen3MoeTopKGate") != std::string::npos;
  EXPECT_TRUE(table);
}

// A module directly in a layer that no rule names is unplaced too (not the layer's `other`).
TEST(TracePartsFamilies, AnUnknownLayerChildIsUnplaced) {
  Trace t;
  frame(t, "Llama", 400);
  t.module("LlamaDecoderLayer_0", 100, 390);
  attention(t, "Llama", 0, 105);
  t.module("LlamaFeedForwardX_0", 200, 300);
  t.launch(250, unplaced("LlamaFeedForwardX"));
  t.launch(350, fw("0", "other"));
  const TraceParts p = read(t);
  EXPECT_EQ(cells(p), t.want);
  EXPECT_EQ(unplaced_by_module(p), t.want_unplaced);
}

// Qwen2-MoE / Llama-4 (transformers 5): the shared expert MLP and its gate Linear beside a
// router and fused experts are `shared_experts`.
TEST(TracePartsFamilies, SharedExpertAndItsGateAreTheirOwnPart) {
  Trace t;
  frame(t, "Qwen2Moe", 400);
  t.module("Qwen2MoeDecoderLayer_0", 100, 390);
  attention(t, "Qwen2Moe", 0, 105);
  t.module("Qwen2MoeSparseMoeBlock_0", 180, 380);
  t.module("Qwen2MoeTopKRouter_0", 185, 200);
  t.launch(190, fw("0", "router"));
  t.module("Qwen2MoeExperts_0", 205, 250);
  t.launch(210, fw("0", "experts"));
  t.module("Qwen2MoeMLP_0", 260, 300);  // shared_expert
  t.module("Linear_50", 265, 270);
  t.launch(267, fw("0", "shared_experts"));
  t.module("Linear_51", 310, 320);  // shared_expert_gate
  t.launch(315, fw("0", "shared_experts"));
  t.launch(330, fw("0", "experts"));  // sigmoid * shared + routed: the block's own code
  t.backward(268, 3000, bw("0", "shared_experts"));
  const TraceParts p = read(t);
  EXPECT_EQ(cells(p), t.want);
  EXPECT_EQ(p.counts.untagged, 0);
}

// DeepSeek-V3 (transformers 5): DeepseekV3MoE with its TopkRouter, NaiveMoe experts and the
// shared_experts MLP; layer 0 dense (first_k_dense_replace).
TEST(TracePartsFamilies, DeepseekMoeWithSharedExperts) {
  Trace t;
  frame(t, "DeepseekV3", 700);
  t.module("DeepseekV3DecoderLayer_0", 100, 390);
  attention(t, "DeepseekV3", 0, 105);
  t.module("DeepseekV3MLP_0", 200, 300);
  t.launch(250, fw("0", "dense_mlp"));
  t.module("DeepseekV3DecoderLayer_1", 400, 690);
  attention(t, "DeepseekV3", 1, 405);
  t.module("DeepseekV3MoE_0", 480, 680);
  t.module("DeepseekV3TopkRouter_0", 485, 500);
  t.launch(490, fw("1", "router"));
  t.module("DeepseekV3NaiveMoe_0", 510, 560);
  t.launch(520, fw("1", "experts"));
  t.module("DeepseekV3MLP_1", 570, 620);
  t.launch(580, fw("1", "shared_experts"));
  const TraceParts p = read(t);
  EXPECT_EQ(cells(p), t.want);
  EXPECT_EQ(p.counts.untagged, 0);
}

// Mixtral as transformers 4 wrote it: a `gate` Linear (called first) and a list of expert MLPs.
TEST(TracePartsFamilies, MixtralGateLinearAndExpertList) {
  Trace t;
  frame(t, "Mixtral", 400);
  t.module("MixtralDecoderLayer_0", 100, 390);
  attention(t, "Mixtral", 0, 105);
  t.module("MixtralSparseMoeBlock_0", 180, 380);
  t.module("Linear_40", 185, 195);
  t.launch(190, fw("0", "router"));
  t.module("MixtralBlockSparseTop2MLP_3", 200, 250);
  t.launch(210, fw("0", "experts"));
  t.module("MixtralBlockSparseTop2MLP_1", 260, 300);
  t.launch(270, fw("0", "experts"));
  t.backward(191, 3000, bw("0", "router"));
  const TraceParts p = read(t);
  EXPECT_EQ(cells(p), t.want);
  EXPECT_EQ(p.counts.untagged, 0);
}

// gpt-oss: the MoE block is "GptOssMLP" (an MLP holding a router and experts), the attention
// sinks run inside eager_attention_forward; the post-attention norm is the attention's, a norm
// after the block the experts'.
TEST(TracePartsFamilies, GptOssMlpBlockAndAttentionSinks) {
  Trace t;
  frame(t, "GptOss", 400);
  t.module("GptOssDecoderLayer_0", 100, 390);
  attention(t, "GptOss", 0, 105, /*eager_sinks=*/true);
  t.module("GptOssMLP_0", 180, 360);
  t.module("GptOssTopKRouter_0", 185, 200);
  t.launch(190, fw("0", "router"));
  t.module("GptOssExperts_0", 205, 300);
  t.launch(210, fw("0", "experts"));
  t.launch(320, fw("0", "experts"));  // the block's own combine
  t.module("GptOssRMSNorm_50", 365, 370);
  t.launch(367, fw("0", "experts"));
  t.backward(211, 3000, bw("0", "experts"));
  const TraceParts p = read(t);
  EXPECT_EQ(cells(p), t.want);
  EXPECT_EQ(p.counts.untagged, 0);
  // Negative control: the same block named like a dense MLP without its router and experts
  // would be dense_mlp — the tree, not the name, makes GptOssMLP an MoE block.
  EXPECT_EQ(cells(p)[fw("0", "dense_mlp")], 0);
}

// ---- layer kinds from config.json --------------------------------------------------------

ConfigLayerKinds kinds(const std::string& text) {
  return parse_layer_kinds_json(Json::parse(text), "config.json");
}
std::string attn(const ConfigLayerKinds& k) {
  std::string s;
  for (const auto& a : k.attention) s += a ? (*a == LayerType::kFull ? 'F' : 'S') : '-';
  return s;
}
std::string ffn(const ConfigLayerKinds& k) {
  std::string s;
  for (const auto& f : k.ffn) s += f == "moe" ? 'M' : f == "dense" ? 'D' : '-';
  return s;
}
bool noted(const ConfigLayerKinds& k, const std::string& what) {
  for (const auto& n : k.notes) {
    if (n.find(what) != std::string::npos) return true;
  }
  return false;
}

TEST(LayerKindsJson, EachFamilysConfigShape) {
  // Llama: no window field, no experts: both kinds "-", and the notes say why.
  auto l = kinds(R"({"model_type":"llama","num_hidden_layers":3})");
  EXPECT_EQ(attn(l), "---");
  EXPECT_EQ(ffn(l), "---");
  EXPECT_TRUE(noted(l, "neither layer_types nor sliding_window"));
  EXPECT_TRUE(noted(l, "no expert count"));
  // Qwen3-MoE: use_sliding_window false; mlp_only_layers and decoder_sparse_step.
  auto q = kinds(R"({"model_type":"qwen3_moe","num_hidden_layers":5,"sliding_window":4096,
    "use_sliding_window":false,"num_experts":8,"mlp_only_layers":[0],"decoder_sparse_step":2})");
  EXPECT_EQ(attn(q), "FFFFF");
  EXPECT_EQ(ffn(q), "DMDMD");
  // Qwen with the window on: layers from max_window_layers sliding; absent: "-".
  auto qs = kinds(R"({"model_type":"qwen2","num_hidden_layers":4,"sliding_window":64,
    "use_sliding_window":true,"max_window_layers":2})");
  EXPECT_EQ(attn(qs), "FFSS");
  auto qn = kinds(R"({"model_type":"qwen2","num_hidden_layers":2,"sliding_window":64,
    "use_sliding_window":true})");
  EXPECT_EQ(attn(qn), "--");
  EXPECT_TRUE(noted(qn, "max_window_layers is absent"));
  // Mixtral: sliding_window null, every layer MoE.
  auto m = kinds(R"({"model_type":"mixtral","num_hidden_layers":2,"sliding_window":null,
    "num_local_experts":8})");
  EXPECT_EQ(attn(m), "FF");
  EXPECT_EQ(ffn(m), "MM");
  // Mistral-style window without a pattern: every layer sliding.
  EXPECT_EQ(attn(kinds(R"({"model_type":"mistral","num_hidden_layers":2,"sliding_window":8})")),
            "SS");
  // gpt-oss: layer_types, alternate.
  auto g = kinds(R"({"model_type":"gpt_oss","num_hidden_layers":4,"num_local_experts":4,
    "layer_types":["sliding_attention","full_attention","sliding_attention","full_attention"]})");
  EXPECT_EQ(attn(g), "SFSF");
  EXPECT_EQ(ffn(g), "MMMM");
  // Gemma-3 before layer_types: sliding_window_pattern; multimodal: its text_config.
  auto g3 = kinds(R"({"model_type":"gemma3","text_config":{"model_type":"gemma3_text",
    "num_hidden_layers":6,"sliding_window":512,"sliding_window_pattern":2}})");
  EXPECT_EQ(attn(g3), "SFSFSF");
  // DeepSeek-V3: first_k_dense_replace and moe_layer_freq.
  auto d = kinds(R"({"model_type":"deepseek_v3","num_hidden_layers":5,"n_routed_experts":16,
    "first_k_dense_replace":1,"moe_layer_freq":2})");
  EXPECT_EQ(ffn(d), "DDMDM");
  // A layer type tprobe has no word for: "-" for that layer, named in a note.
  auto c = kinds(R"({"model_type":"llama4_text","num_hidden_layers":2,
    "layer_types":["chunked_attention","full_attention"]})");
  EXPECT_EQ(attn(c), "-F");
  EXPECT_TRUE(noted(c, "chunked_attention"));
}

TEST(LayerKindsJson, Gemma4ConfigsGiveTheGemma4ReadersKinds) {
  const Json doc = to_config_json(embedded_model("gemma4-tiny"));
  const ConfigLayerKinds k = parse_layer_kinds_json(doc, "gemma4.json");
  const ModelConfig c = parse_config_json(doc, "gemma4.json").config;
  EXPECT_TRUE(k.gemma4);
  ASSERT_EQ(static_cast<int64_t>(k.attention.size()), c.num_layers);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    EXPECT_EQ(k.attention[static_cast<std::size_t>(i)], c.layer(i).type);
  }
  EXPECT_TRUE(k.ffn.empty());
  EXPECT_TRUE(k.notes.empty());
}

TEST(LayerKindsJson, HostileConfigsAreRefusedInOneLine) {
  const char* bad[] = {
      R"([1,2])",
      R"({"model_type":7,"num_hidden_layers":2})",
      R"({"model_type":"llama","text_config":[1]})",
      R"({"model_type":"llama"})",
      R"({"model_type":"llama","num_hidden_layers":1000000000})",
      R"({"model_type":"llama","num_hidden_layers":0})",
      R"({"model_type":"llama","num_hidden_layers":2.0})",
      R"({"model_type":"llama","num_hidden_layers":18446744073709551615})",
      R"({"model_type":"gpt_oss","num_hidden_layers":2,"layer_types":["full_attention"]})",
      R"({"model_type":"gpt_oss","num_hidden_layers":1,"layer_types":[3]})",
      R"({"model_type":"gpt_oss","num_hidden_layers":1,"layer_types":"full_attention"})",
      R"({"model_type":"mistral","num_hidden_layers":2,"sliding_window":"4096"})",
      R"({"model_type":"mistral","num_hidden_layers":2,"sliding_window":0})",
      R"({"model_type":"qwen2","num_hidden_layers":2,"sliding_window":8,"use_sliding_window":1})",
      R"({"model_type":"qwen2","num_hidden_layers":2,"sliding_window":8,"use_sliding_window":true,"max_window_layers":-1})",
      R"({"model_type":"gemma3_text","num_hidden_layers":2,"sliding_window":8,"sliding_window_pattern":0})",
      R"({"model_type":"qwen3_moe","num_hidden_layers":2,"num_experts":-8})",
      R"({"model_type":"qwen3_moe","num_hidden_layers":2,"num_experts":100000})",
      R"({"model_type":"qwen3_moe","num_hidden_layers":2,"num_experts":8,"mlp_only_layers":[2]})",
      R"({"model_type":"qwen3_moe","num_hidden_layers":2,"num_experts":8,"mlp_only_layers":[-1]})",
      R"({"model_type":"qwen3_moe","num_hidden_layers":2,"num_experts":8,"mlp_only_layers":0})",
      R"({"model_type":"qwen3_moe","num_hidden_layers":2,"num_experts":8,"mlp_only_layers":[18446744073709551615]})",
      R"({"model_type":"qwen3_moe","num_hidden_layers":2,"num_experts":8,"decoder_sparse_step":0})",
      R"({"model_type":"deepseek_v3","num_hidden_layers":2,"n_routed_experts":8,"first_k_dense_replace":-1})",
      R"({"model_type":"deepseek_v3","num_hidden_layers":2,"n_routed_experts":8,"moe_layer_freq":0})",
  };
  for (const char* text : bad) {
    try {
      kinds(text);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
      EXPECT_NE(m.find("config.json"), std::string::npos) << m;
    }
  }
  // Negative control: the same fields at their limits are accepted.
  EXPECT_NO_THROW(kinds(R"({"model_type":"qwen3_moe","num_hidden_layers":1024,"num_experts":16384,
    "mlp_only_layers":[0,1023],"decoder_sparse_step":1024,"sliding_window":null})"));
  EXPECT_NO_THROW(kinds(R"({"model_type":"deepseek_v3","num_hidden_layers":2,"n_routed_experts":8,
    "first_k_dense_replace":1024,"moe_layer_freq":1024})"));
}

}  // namespace
}  // namespace tprobe::core
