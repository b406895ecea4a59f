// lora-gate: the adapter reader (naming forms, dtypes, shards, broken inputs) and the gate's
// verdicts and module-count check, on adapters written here with known contents.
#include "tprobe/core/adapter/lora_gate.hpp"
#include "tprobe/core/gemma4/lora_targets.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>

#include "test_paths.hpp"
#include "tprobe/core/adapter/lora_gate_report.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/rng.hpp"
#include "tprobe/core/gemma4/checkpoint.hpp"
#include "tprobe/core/gemma4/gemma4_tensors.hpp"

namespace tprobe::core {
namespace {

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}
std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Stores `value` in every element. F16 and BF16 hold the values used here exactly.
struct Stored {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;
};
Stored filled(const std::string& name, DType dtype, std::vector<int64_t> shape, float value) {
  Stored s{name, dtype, shape, {}};
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  s.bytes.resize(static_cast<std::size_t>(n * dtype_size(dtype)));
  uint16_t half = 0;
  if (dtype == DType::kBF16) {
    uint32_t bits;
    std::memcpy(&bits, &value, 4);
    half = static_cast<uint16_t>(bits >> 16);
  } else if (dtype == DType::kF16) {
    half = value == 1.0f ? 0x3c00 : value == 0.5f ? 0x3800 : value == 0.0f ? 0 : 0x7e00;
  }
  for (int64_t i = 0; i < n; ++i) {
    if (dtype == DType::kF32) {
      std::memcpy(s.bytes.data() + i * 4, &value, 4);
    } else {
      std::memcpy(s.bytes.data() + i * 2, &half, 2);
    }
  }
  return s;
}

void write_weights(const std::string& path, const std::vector<Stored>& tensors) {
  std::vector<TensorToWrite> out;
  for (const auto& t : tensors) out.push_back({{t.name, t.dtype, t.shape}, t.bytes.data()});
  write_safetensors(path, out, {{"format", "pt"}});
}

std::string config_text(const std::string& targets_json, int64_t r = 2,
                        const std::string& extra = "") {
  return "{\"peft_type\": \"LORA\", \"r\": " + std::to_string(r) +
         ", \"lora_alpha\": 4, \"target_modules\": " + targets_json + extra + "}";
}

const char* kSeven =
    "[\"q_proj\", \"k_proj\", \"v_proj\", \"o_proj\", \"gate_proj\", \"up_proj\", \"down_proj\"]";

struct Form {
  std::string root = "base_model.model.";
  std::string prefix = "model.language_model.";
  std::string suffix = "weight";  // or "default.weight"
  DType dtype = DType::kF32;
  int64_t rank = 2;
};

// Every module PEFT would adapt on `base` for the seven targets, A = 0.5 and B = 1 (or what
// `b_value` says for a module), shaped from the base's linear layers.
std::vector<Stored> adapter_tensors(
    const GateBase& base, const Form& f, const std::function<float(const LoraModule&)>& b_value,
    const std::vector<std::string>& targets = parse_target_list(default_lora_targets())) {
  LoraPlan plan = plan_lora(base.config, base.tensors, base.prefix, targets, f.rank);
  std::vector<Stored> out;
  for (const auto& m : plan.modules) {
    const std::string module = f.prefix + m.name.substr(base.prefix.size());
    out.push_back(
        filled(f.root + module + ".lora_A." + f.suffix, f.dtype, {f.rank, m.in_features}, 0.5f));
    out.push_back(filled(f.root + module + ".lora_B." + f.suffix, f.dtype, {m.out_features, f.rank},
                         b_value(m)));
  }
  return out;
}

std::string make_adapter(const std::string& config, const std::vector<Stored>& tensors) {
  std::string dir = testing_support::temp_dir();
  spit(dir + "/adapter_config.json", config);
  write_weights(dir + "/adapter_model.safetensors", tensors);
  return dir;
}

LoraGateReport gate(const std::string& dir, const std::optional<GateBase>& base) {
  return gate_lora_adapter(read_lora_adapter(dir), base);
}

const GateBase& tiny() {
  static const GateBase base = gate_base_from_model("gemma4-tiny");
  return base;
}

auto all_ones = [](const LoraModule&) { return 1.0f; };

bool has_code(const LoraGateReport& r, const std::string& code) {
  for (const auto& d : r.diagnostics) {
    if (d.code == code) return true;
  }
  return false;
}

TEST(LoraGate, RealAdapterPassesWithTheExpectedCount) {
  auto r =
      gate(make_adapter(config_text(kSeven), adapter_tensors(tiny(), Form{}, all_ones)), tiny());
  EXPECT_EQ(r.verdict, GateVerdict::kReal) << r.verdict_message;
  EXPECT_TRUE(r.passed());
  // gemma4-tiny: 6 layers x 7 targets, minus v_proj on the 2 key=value global layers.
  EXPECT_EQ(r.count.expected, 40);
  EXPECT_EQ(r.count.found, 40);
  EXPECT_TRUE(r.count.ok());
  ASSERT_EQ(r.count.absent_notes.size(), 1u);
  EXPECT_NE(r.count.absent_notes[0].find("v_proj"), std::string::npos);
  EXPECT_NE(r.count.absent_notes[0].find("(2, 5)"), std::string::npos) << r.count.absent_notes[0];
  // B = 1 everywhere: |B| = sqrt(out * r); q_proj on a sliding layer is [4*16, 2].
  for (const auto& m : r.modules) {
    if (m.module == "model.language_model.layers.0.self_attn.q_proj") {
      EXPECT_DOUBLE_EQ(*m.b_norm, std::sqrt(64.0 * 2));
      EXPECT_DOUBLE_EQ(*m.a_norm, 0.5 * std::sqrt(2.0 * 64));
      EXPECT_EQ(m.layer_type, LayerType::kSliding);
    }
  }
  Json j = to_json(r);
  EXPECT_EQ(j["verdict"], "real");
  EXPECT_EQ(j["modules"].size(), 40u);
  EXPECT_EQ(j["count"]["expected_modules"], 40);
  int64_t per_target_found = 0;
  for (const auto& t : j["per_target"]) per_target_found += t["found"].get<int64_t>();
  EXPECT_EQ(per_target_found, 40);  // rows sum to the total
  EXPECT_FALSE(lora_gate_tables(r).empty());
}

TEST(LoraGate, AllZeroBIsInert) {
  auto zero = [](const LoraModule&) { return 0.0f; };
  auto r = gate(make_adapter(config_text(kSeven), adapter_tensors(tiny(), Form{}, zero)), tiny());
  EXPECT_EQ(r.verdict, GateVerdict::kInert);
  EXPECT_FALSE(r.passed());
  EXPECT_TRUE(has_code(r, "inert_adapter"));
  EXPECT_TRUE(r.count.ok());  // the count is right; the adapter is just untrained
}

// The outcome the probe returns is the report's: kOk only when passed().
TEST(LoraGate, OutcomeFollowsTheVerdict) {
  auto real =
      gate(make_adapter(config_text(kSeven), adapter_tensors(tiny(), Form{}, all_ones)), tiny());
  EXPECT_EQ(real.outcome, Outcome::kOk);
  auto zero = [](const LoraModule&) { return 0.0f; };
  auto inert = gate(make_adapter(config_text(kSeven), adapter_tensors(tiny(), Form{}, zero)), tiny());
  EXPECT_EQ(inert.outcome, Outcome::kNo);
}

// An adapter whose config names an embedded model is counted against it; any other name is not.
TEST(LoraGate, BaseFromTheAdapterConfigOnlyForAnEmbeddedName) {
  const auto tensors = adapter_tensors(tiny(), Form{}, all_ones);
  const std::string named = make_adapter(
      config_text(kSeven, 2, ", \"base_model_name_or_path\": \"gemma4-tiny\""), tensors);
  const std::optional<GateBase> base = gate_base_from_adapter(read_lora_adapter(named));
  ASSERT_TRUE(base.has_value());
  EXPECT_EQ(base->source, "adapter_config.json base_model_name_or_path 'gemma4-tiny'");
  EXPECT_EQ(gate(named, base).count.expected, 40);
  const std::string other = make_adapter(
      config_text(kSeven, 2, ", \"base_model_name_or_path\": \"google/gemma-4-26b\""), tensors);
  EXPECT_FALSE(gate_base_from_adapter(read_lora_adapter(other)).has_value());
  EXPECT_FALSE(gate_base_from_adapter(read_lora_adapter(make_adapter(config_text(kSeven), tensors)))
                   .has_value());
}

TEST(LoraGate, SomeZeroBIsAModuleSelectionProblemNamingThem) {
  auto v_zero = [](const LoraModule& m) { return m.target == "v_proj" ? 0.0f : 1.0f; };
  auto r = gate(make_adapter(config_text(kSeven), adapter_tensors(tiny(), Form{}, v_zero)), tiny());
  EXPECT_EQ(r.verdict, GateVerdict::kPartial);
  EXPECT_FALSE(r.passed());
  EXPECT_NE(r.verdict_message.find("v_proj on layers 0, 1, 3, 4"), std::string::npos)
      << r.verdict_message;
  for (const auto& t : r.per_target) {
    EXPECT_EQ(t.inert, t.target == "v_proj" ? 4 : 0) << t.target;
  }
}

TEST(LoraGate, ZeroAIsNotLearnedEither) {
  Form f;
  auto tensors = adapter_tensors(tiny(), f, all_ones);
  tensors[0] = filled(tensors[0].name, f.dtype, tensors[0].shape, 0.0f);  // one lora_A
  auto r = gate(make_adapter(config_text(kSeven), tensors), tiny());
  EXPECT_EQ(r.verdict, GateVerdict::kPartial);
  EXPECT_NE(r.verdict_message.find("1 dead_a"), std::string::npos) << r.verdict_message;
}

TEST(LoraGate, BothNamingFormsAndAdapterNamesGiveTheSameVerdict) {
  for (const char* root : {"base_model.model.", ""}) {
    for (const char* prefix : {"model.language_model.", "model.", "language_model.model."}) {
      for (const char* suffix : {"weight", "default.weight"}) {
        Form f;
        f.root = root;
        f.prefix = prefix;
        f.suffix = suffix;
        auto r =
            gate(make_adapter(config_text(kSeven), adapter_tensors(tiny(), f, all_ones)), tiny());
        EXPECT_EQ(r.verdict, GateVerdict::kReal) << root << prefix << suffix;
        EXPECT_TRUE(r.count.ok()) << root << prefix << suffix;
        ASSERT_EQ(r.naming_forms.size(), 1u);
        EXPECT_EQ(r.naming_forms[0], std::string(root) + prefix + "layers.N.<module>.lora_X." +
                                         (std::string(suffix) == "weight" ? "" : "default.") +
                                         "weight");
      }
    }
  }
}

TEST(LoraGate, ReadsBf16AndFp16) {
  for (DType dt : {DType::kBF16, DType::kF16}) {
    Form f;
    f.dtype = dt;
    auto r = gate(make_adapter(config_text(kSeven), adapter_tensors(tiny(), f, all_ones)), tiny());
    EXPECT_EQ(r.verdict, GateVerdict::kReal);
    ASSERT_EQ(r.dtypes.size(), 1u);
    EXPECT_EQ(r.dtypes[0], to_string(dt));
    for (const auto& m : r.modules) {
      if (m.target == "q_proj" && m.layer == 0) {
        EXPECT_DOUBLE_EQ(*m.a_norm, 0.5 * std::sqrt(2.0 * 64));
      }
    }
  }
}

TEST(LoraGate, TensorStatsDecodeEachDtype) {
  // F16 specials: 0x0001 = 2^-24 (subnormal), 0x7c00 = +Inf, 0xc000 = -2.
  const uint16_t h[] = {0x0001, 0x7c00, 0xc000, 0x0000};
  TensorInfo info;
  info.name = "x.lora_B.weight";
  info.dtype = DType::kF16;
  info.shape = {4};
  TensorStats s = tensor_stats(info, {reinterpret_cast<const std::byte*>(h), sizeof h}, "f");
  EXPECT_EQ(s.non_finite, 1);
  EXPECT_EQ(s.nonzero, 2);
  EXPECT_DOUBLE_EQ(s.norm, std::sqrt(4.0 + std::ldexp(1.0, -48)));
  const uint16_t b[] = {0x4040, 0x4080};  // bf16 3, 4
  info.dtype = DType::kBF16;
  info.shape = {2};
  EXPECT_DOUBLE_EQ(tensor_stats(info, {reinterpret_cast<const std::byte*>(b), 4}, "f").norm, 5.0);
  info.dtype = DType::kI32;
  info.shape = {1};
  EXPECT_THROW(tensor_stats(info, {reinterpret_cast<const std::byte*>(b), 4}, "f"), Error);
  info.dtype = DType::kBF16;
  info.shape = {3};  // 6 bytes claimed, 4 given
  EXPECT_THROW(tensor_stats(info, {reinterpret_cast<const std::byte*>(b), 4}, "f"), Error);
}

TEST(LoraGate, CountOffNamesMissingAndUnexpectedModules) {
  auto tensors = adapter_tensors(tiny(), Form{}, all_ones);
  tensors.erase(std::remove_if(tensors.begin(), tensors.end(),
                               [](const Stored& t) {
                                 return t.name.find("layers.0.self_attn.q_proj.") !=
                                        std::string::npos;
                               }),
                tensors.end());
  // a v_proj on a key=value global layer, which the base has no v_proj for
  tensors.push_back(
      filled("base_model.model.model.language_model.layers.2.self_attn.v_proj.lora_A.weight",
             DType::kF32, {2, 64}, 0.5f));
  tensors.push_back(
      filled("base_model.model.model.language_model.layers.2.self_attn.v_proj.lora_B.weight",
             DType::kF32, {32, 2}, 1.0f));
  auto r = gate(make_adapter(config_text(kSeven), tensors), tiny());
  EXPECT_EQ(r.verdict, GateVerdict::kReal);  // the tensors are trained ...
  EXPECT_FALSE(r.passed());                  // ... but the count is off
  EXPECT_TRUE(has_code(r, "count_mismatch"));
  ASSERT_EQ(r.count.missing.size(), 1u);
  EXPECT_EQ(r.count.missing[0], "model.language_model.layers.0.self_attn.q_proj");
  ASSERT_EQ(r.count.unexpected.size(), 1u);
  EXPECT_EQ(r.count.unexpected[0], "model.language_model.layers.2.self_attn.v_proj");
}

TEST(LoraGate, ShapeThatDoesNotFitTheBaseIsBroken) {
  auto tensors = adapter_tensors(tiny(), Form{}, all_ones);
  tensors[1] = filled(tensors[1].name, DType::kF32, {tensors[1].shape[0] + 1, 2}, 1.0f);
  auto r = gate(make_adapter(config_text(kSeven), tensors), tiny());
  EXPECT_EQ(r.verdict, GateVerdict::kBroken);
  EXPECT_NE(r.verdict_message.find("bad_shape"), std::string::npos) << r.verdict_message;
}

TEST(LoraGate, NonFiniteAndIncompleteAreBroken) {
  auto tensors = adapter_tensors(tiny(), Form{}, all_ones);
  tensors[1] = filled(tensors[1].name, DType::kF32, tensors[1].shape,
                      std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(gate(make_adapter(config_text(kSeven), tensors), tiny()).verdict, GateVerdict::kBroken);
  tensors = adapter_tensors(tiny(), Form{}, all_ones);
  tensors.erase(tensors.begin() + 1);  // a lora_A without its lora_B
  auto r = gate(make_adapter(config_text(kSeven), tensors), tiny());
  EXPECT_EQ(r.verdict, GateVerdict::kBroken);
  EXPECT_NE(r.verdict_message.find("incomplete"), std::string::npos);
}

TEST(LoraGate, The26BSevenTargetSetIs205ModulesWithTheGlobalLayersNamed) {
  const GateBase base = gate_base_from_model("gemma4-26b-a4b");
  Form f;
  f.rank = 1;
  f.dtype = DType::kBF16;
  auto r = gate(make_adapter(config_text(kSeven, 1), adapter_tensors(base, f, all_ones)), base);
  EXPECT_EQ(r.count.expected, 205);
  EXPECT_EQ(r.count.found, 205);
  EXPECT_TRUE(r.passed()) << r.verdict_message;
  ASSERT_EQ(r.count.absent_notes.size(), 1u);
  EXPECT_NE(r.count.absent_notes[0].find("5 full_attention layers (5, 11, 17, 23, 29)"),
            std::string::npos)
      << r.count.absent_notes[0];
  std::map<std::string, int64_t> found;
  for (const auto& t : r.per_target) found[t.target] = t.found;
  EXPECT_EQ(found["v_proj"], 25);
  EXPECT_EQ(found["q_proj"], 30);
}

TEST(LoraGate, RegexTargetsAndLayersToTransform) {
  auto qv = [](const LoraModule&) { return 1.0f; };
  auto tensors = adapter_tensors(tiny(), Form{}, qv, {"q_proj", "v_proj"});
  auto r = gate(make_adapter(config_text("\".*\\\\.(q_proj|v_proj)\""), tensors), tiny());
  EXPECT_EQ(r.count.expected, 10);  // 6 q + 4 v
  EXPECT_TRUE(r.passed()) << r.verdict_message;
  // The same adapter under layers_to_transform [0]: only layer 0 is expected.
  auto r0 = gate(
      make_adapter(config_text("[\"q_proj\", \"v_proj\"]", 2, ", \"layers_to_transform\": [0]"),
                   tensors),
      tiny());
  EXPECT_EQ(r0.count.expected, 2);
  EXPECT_FALSE(r0.passed());
  EXPECT_EQ(r0.count.unexpected.size(), 8u);
}

TEST(LoraGate, WithoutABaseTheCountIsReportedUnchecked) {
  auto r = gate(make_adapter(config_text(kSeven), adapter_tensors(tiny(), Form{}, all_ones)),
                std::nullopt);
  EXPECT_FALSE(r.count.checked);
  EXPECT_TRUE(r.passed());
  EXPECT_TRUE(has_code(r, "count_unchecked"));
  EXPECT_EQ(to_json(r)["count"]["expected_modules"], nullptr);
}

TEST(LoraGate, ModulesOutsideTheTextDecoderAreListedNotCounted) {
  auto tensors = adapter_tensors(tiny(), Form{}, all_ones);
  tensors.push_back(
      filled("base_model.model.model.vision_tower.encoder.layers.0.self_attn.q_proj.lora_A.weight",
             DType::kF32, {2, 8}, 0.5f));
  tensors.push_back(
      filled("base_model.model.model.vision_tower.encoder.layers.0.self_attn.q_proj.lora_B.weight",
             DType::kF32, {8, 2}, 1.0f));
  auto r = gate(make_adapter(config_text(kSeven), tensors), tiny());
  EXPECT_TRUE(r.passed());
  ASSERT_EQ(r.outside_text.size(), 1u);
  EXPECT_TRUE(has_code(r, "outside_text_decoder"));
}

TEST(LoraGate, ShardedAdapter) {
  auto tensors = adapter_tensors(tiny(), Form{}, all_ones);
  std::string dir = testing_support::temp_dir();
  spit(dir + "/adapter_config.json", config_text(kSeven));
  std::vector<Stored> first(tensors.begin(), tensors.begin() + 30),
      second(tensors.begin() + 30, tensors.end());
  write_weights(dir + "/s1.safetensors", first);
  write_weights(dir + "/s2.safetensors", second);
  Json wm = Json::object();
  for (const auto& t : first) wm[t.name] = "s1.safetensors";
  for (const auto& t : second) wm[t.name] = "s2.safetensors";
  const std::string index = Json{{"weight_map", wm}}.dump();
  spit(dir + "/adapter_model.safetensors.index.json", index);
  auto r = gate(dir, tiny());
  EXPECT_TRUE(r.sharded);
  EXPECT_EQ(r.files.size(), 2u);
  EXPECT_TRUE(r.passed()) << r.verdict_message;

  Json bad = Json{{"weight_map", wm}};
  bad["weight_map"][first[0].name] = "s2.safetensors";
  spit(dir + "/adapter_model.safetensors.index.json", bad.dump());
  EXPECT_THROW(read_lora_adapter(dir), Error);
  bad = Json{{"weight_map", wm}};
  bad["weight_map"]["not.there.lora_A.weight"] = "s1.safetensors";
  spit(dir + "/adapter_model.safetensors.index.json", bad.dump());
  EXPECT_THROW(read_lora_adapter(dir), Error);
  bad = Json{{"weight_map", wm}};
  bad["weight_map"][first[0].name] = "../s1.safetensors";
  spit(dir + "/adapter_model.safetensors.index.json", bad.dump());
  EXPECT_THROW(read_lora_adapter(dir), Error);
  bad = Json{{"weight_map", wm}};
  bad["weight_map"][first[0].name] = "s3.safetensors";
  spit(dir + "/adapter_model.safetensors.index.json", bad.dump());
  EXPECT_THROW(read_lora_adapter(dir), Error);
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// rank_pattern gives the modules its keys match their rank (PEFT: the first key that matches the
// module's name after an optional "<prefix>."), and the tensors are checked against it (issue 33:
// {"q_proj": 16} over rank-4 tensors passed).
TEST(LoraGate, RankPatternIsCheckedAgainstTheTensors) {
  Form two, four;
  four.rank = 4;
  std::vector<Stored> tensors = adapter_tensors(
      tiny(), two, all_ones, {"k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"});
  for (Stored& q : adapter_tensors(tiny(), four, all_ones, {"q_proj"})) tensors.push_back(q);
  auto error_of = [&](const std::string& extra) -> std::string {
    try {
      const LoraGateReport r = gate(make_adapter(config_text(kSeven, 2, extra), tensors), tiny());
      return r.verdict == GateVerdict::kReal ? "" : "verdict " + std::string(to_string(r.verdict));
    } catch (const Error& e) {
      return e.what();
    }
  };
  EXPECT_EQ(error_of(R"(, "rank_pattern": {"q_proj": 4})"), "");
  EXPECT_EQ(error_of(R"(, "rank_pattern": {"layers\\.\\d+\\.self_attn\\.q_proj": 4})"), "");
  // Without it, the q_proj tensors have rank 4 where r = 2; a key for another module gives that
  // module a rank its tensors do not have; a key for layer 0's q_proj only leaves the others at
  // r = 2.
  EXPECT_NE(error_of("").find("self_attn.q_proj.lora_A.weight' has rank 4 ([4, "),
            std::string::npos);
  EXPECT_NE(error_of(R"(, "rank_pattern": {"k_proj": 4})")
                .find("k_proj.lora_A.weight' has rank 2 ([2, 64]), but "),
            std::string::npos);
  EXPECT_NE(error_of(R"(, "rank_pattern": {"k_proj": 2, "q_proj": 3})")
                .find("says r = 3 for it (rank_pattern 'q_proj')"),
            std::string::npos);
  const std::string layer0 = error_of(R"(, "rank_pattern": {"layers.0.self_attn.q_proj": 4})");
  EXPECT_NE(layer0.find("layers.1.self_attn.q_proj.lora_A.weight' has rank 4"), std::string::npos)
      << layer0;
  EXPECT_NE(error_of(R"(, "rank_pattern": {"q_proj": 0})").find("rank_pattern 'q_proj' is 0"),
            std::string::npos);
  EXPECT_NE(error_of(R"(, "alpha_pattern": {"q_proj": 0}, "rank_pattern": {"q_proj": 4})")
                .find("alpha_pattern 'q_proj' is 0: it scales every update to nothing"),
            std::string::npos);
}

TEST(LoraGate, BrokenInputsGiveErrorsNamingTheField) {
  const std::string good =
      make_adapter(config_text(kSeven), adapter_tensors(tiny(), Form{}, all_ones));
  auto with_config = [&](const std::string& text) {
    spit(good + "/adapter_config.json", text);
    return error_of([&] { read_lora_adapter(good); });
  };
  EXPECT_NE(with_config("{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(with_config("[]").find("must be a JSON object"), std::string::npos);
  EXPECT_NE(
      with_config("{\"peft_type\": \"IA3\", \"r\": 2, \"target_modules\": []}").find("peft_type"),
      std::string::npos);
  EXPECT_NE(with_config("{\"peft_type\": \"LORA\", \"target_modules\": [\"q_proj\"]}").find("'r'"),
            std::string::npos);
  EXPECT_NE(with_config("{\"peft_type\": \"LORA\", \"r\": -1, \"target_modules\": [\"q_proj\"]}")
                .find("'r'"),
            std::string::npos);
  EXPECT_NE(with_config("{\"peft_type\": \"LORA\", \"r\": 2}").find("target_modules"),
            std::string::npos);
  EXPECT_NE(with_config("{\"peft_type\": \"LORA\", \"r\": 2, \"target_modules\": 3}")
                .find("target_modules"),
            std::string::npos);
  EXPECT_NE(with_config("{\"peft_type\": \"LORA\", \"r\": 2, \"target_modules\": [1]}")
                .find("target_modules"),
            std::string::npos);
  EXPECT_NE(with_config("{\"peft_type\": \"LORA\", \"r\": 2, \"r\": 3, \"target_modules\": []}")
                .find("twice"),
            std::string::npos);
  EXPECT_NE(
      error_of([&] { gate(make_adapter(config_text("\"(unclosed\""), {}), tiny()); }).find("regex"),
      std::string::npos);

  std::string dir = testing_support::temp_dir();
  EXPECT_NE(error_of([&] { read_lora_adapter(dir); }).find("adapter_config.json"),
            std::string::npos);
  spit(dir + "/adapter_config.json", config_text(kSeven));
  EXPECT_NE(error_of([&] { read_lora_adapter(dir); }).find("neither"), std::string::npos);
  spit(dir + "/adapter_model.bin", "pickle");
  EXPECT_NE(error_of([&] { read_lora_adapter(dir); }).find("safe_serialization"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_lora_adapter(dir + "/nope"); }).find("not an adapter directory"),
            std::string::npos);
  // A lora tensor of an integer dtype is named.
  std::vector<int32_t> ints(4, 1);
  write_safetensors(dir + "/adapter_model.safetensors",
                    {{{"m.layers.0.q_proj.lora_B.weight", DType::kI32, {2, 2}}, ints.data()}});
  EXPECT_NE(error_of([&] { read_lora_adapter(dir); }).find("m.layers.0.q_proj.lora_B.weight"),
            std::string::npos);
  // One module stored under two names.
  auto a = filled("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight", DType::kF32,
                  {2, 64}, 1);
  auto a2 = filled("model.layers.0.self_attn.q_proj.lora_A.weight", DType::kF32, {2, 64}, 1);
  write_weights(dir + "/adapter_model.safetensors", {a, a2});
  EXPECT_NE(error_of([&] { read_lora_adapter(dir); }).find("two lora_A"), std::string::npos);
  // No lora tensor at all.
  write_weights(dir + "/adapter_model.safetensors", {filled("x.weight", DType::kF32, {1}, 1)});
  auto r = gate(dir, tiny());
  EXPECT_EQ(r.verdict, GateVerdict::kEmpty);
  EXPECT_TRUE(has_code(r, "other_tensors"));
}

TEST(LoraGate, RandomCorruptionIsAcceptedOrAnError) {
  const std::string dir =
      make_adapter(config_text(kSeven), adapter_tensors(tiny(), Form{}, all_ones));
  const std::string weights = slurp(dir + "/adapter_model.safetensors");
  const std::string config = slurp(dir + "/adapter_config.json");
  Rng rng(1313);
  int refused = 0;
  const int cases = 300;
  for (int i = 0; i < cases; ++i) {
    const bool in_config = i % 3 == 0;
    std::string s = in_config ? config : weights;
    const std::size_t focus = in_config ? s.size() : std::min<std::size_t>(s.size(), 400);
    const std::size_t p = static_cast<std::size_t>(rng.uniform(focus));
    switch (rng.uniform(3)) {
      case 0:
        s[p] = static_cast<char>(s[p] ^ (1u << rng.uniform(8)));
        break;
      case 1:
        s.erase(p, 1 + rng.uniform(6));
        break;
      default:
        s.resize(p);
        break;
    }
    spit(dir + (in_config ? "/adapter_config.json" : "/adapter_model.safetensors"), s);
    try {
      auto r = gate(dir, tiny());
      (void)to_json(r).dump();
    } catch (const Error&) {
      ++refused;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "case " << i << ": non-tprobe exception: " << e.what();
    }
    spit(dir + "/adapter_config.json", config);
    spit(dir + "/adapter_model.safetensors", weights);
  }
  EXPECT_GT(refused, cases / 4);
}


// ---- issue 46 ----

// lora-gate --checkpoint runs the config-vs-checkpoint check inspect and parity run
// (core::cross_check), and refuses a checkpoint that disagrees with its config as parity does.
TEST(LoraGate, ACheckpointThatDisagreesWithItsConfigIsRefused) {
  const std::string hf = std::string(TPROBE_FIXTURES_DIR) + "/gemma4-tiny-hf";
  // The fixture agrees with its config: the base is taken (negative control).
  const GateBase good = gate_base_from_checkpoint(Checkpoint::open(hf));
  EXPECT_EQ(good.source, "--checkpoint " + hf);
  EXPECT_FALSE(good.tensors.empty());
  // The same weights under a config whose intermediate_size is 32 wider.
  const std::string dir = testing_support::temp_dir();
  Json c = Json::parse(slurp(hf + "/config.json"));
  c["intermediate_size"] = c["intermediate_size"].get<int>() + 32;
  spit(dir + "/config.json", c.dump());
  spit(dir + "/model.safetensors", slurp(hf + "/model.safetensors"));
  const Checkpoint ck = Checkpoint::open(dir);
  const std::vector<Disagreement> d = cross_check(ck.config(), ck.tensors(), ck.text_prefix());
  ASSERT_GT(d.size(), 1u);
  const std::string e = error_of([&] { gate_base_from_checkpoint(ck); });
  EXPECT_EQ(e, dir + ": checkpoint disagrees with its config.json: " + d.front().tensor + ": " +
                   d.front().message +
                   fmt::format(" (and {} more; tprobe inspect --checkpoint lists them)",
                               d.size() - 1));
  EXPECT_NE(e.find("shape [96, 64] but the config expects [128, 64]"), std::string::npos) << e;
  // Another class: a head_dim that disagrees with the q_norm length.
  c = Json::parse(slurp(hf + "/config.json"));
  c["head_dim"] = 8;
  spit(dir + "/config.json", c.dump());
  EXPECT_NE(error_of([&] { gate_base_from_checkpoint(Checkpoint::open(dir)); })
                .find("checkpoint disagrees with its config.json"),
            std::string::npos);
}

LoraGateReport gate_with(const std::string& extra, const std::vector<Stored>& tensors,
                         const std::optional<GateBase>& base = tiny()) {
  return gate(make_adapter("{\"peft_type\": \"LORA\", \"r\": 2, \"target_modules\": " +
                               std::string(kSeven) + extra + "}",
                           tensors),
              base);
}

std::size_t count_state(const LoraGateReport& r, ModuleState s) {
  return static_cast<std::size_t>(std::count_if(r.modules.begin(), r.modules.end(),
                                                 [&](const GateModule& m) { return m.state == s; }));
}

// An alpha that scales the update below 2^-126 (float32's smallest normal) leaves the adapter
// inert in effect, whatever its tensors hold: the scaling itself (1e-320, 1e-300), or the bound
// scaling * |B| * |A| on every element of the update (tiny B under a small alpha).
TEST(LoraGate, AnAlphaThatScalesTheUpdateBelowFloat32IsInert) {
  const auto tensors = adapter_tensors(tiny(), Form{}, all_ones);
  for (const char* alpha : {"1e-320", "1e-300", "4.9e-324", "2e-38"}) {
    const LoraGateReport r = gate_with(std::string(", \"lora_alpha\": ") + alpha, tensors);
    EXPECT_EQ(r.verdict, GateVerdict::kInert) << alpha << ": " << r.verdict_message;
    EXPECT_EQ(count_state(r, ModuleState::kNegligible), r.modules.size()) << alpha;
    EXPECT_TRUE(has_code(r, "inert_adapter")) << alpha;
    EXPECT_EQ(r.outcome, Outcome::kNo) << alpha;
    EXPECT_NE(r.verdict_message.find("below 2^-126"), std::string::npos) << r.verdict_message;
  }
  // Negative controls: normal alphas (16; 8 by PEFT's default when absent; 2^-125 over r = 2 is
  // exactly 2^-126) are real.
  for (const char* extra : {", \"lora_alpha\": 16", "", ", \"lora_alpha\": 2.350988701644575e-38"}) {
    const LoraGateReport r = gate_with(extra, tensors);
    EXPECT_EQ(r.verdict, GateVerdict::kReal) << extra << ": " << r.verdict_message;
    EXPECT_TRUE(r.passed()) << extra;
  }
  const LoraGateReport r16 = gate_with(", \"lora_alpha\": 16", tensors);
  EXPECT_DOUBLE_EQ(r16.modules[0].scaling, 8.0);
  EXPECT_DOUBLE_EQ(gate_with("", tensors).modules[0].scaling, 4.0);  // 8 / 2
  // The bound: B = 1e-20 everywhere with alpha 1e-30 (scaling 5e-31, above 2^-126): every element
  // of the update is at most 5e-31 * |B| * |A| < 1e-48. The same B under alpha 16 is real.
  const auto tiny_b = adapter_tensors(tiny(), Form{}, [](const LoraModule&) { return 1e-20f; });
  const LoraGateReport bound = gate_with(", \"lora_alpha\": 1e-30", tiny_b);
  EXPECT_EQ(bound.verdict, GateVerdict::kInert) << bound.verdict_message;
  EXPECT_NE(bound.verdict_message.find("at most scaling * |B| * |A|"), std::string::npos)
      << bound.verdict_message;
  for (const auto& m : bound.modules) {
    ASSERT_TRUE(m.update_bound.has_value());
    EXPECT_DOUBLE_EQ(*m.update_bound, m.scaling * *m.b_norm * *m.a_norm);
    EXPECT_LT(*m.update_bound, 0x1p-126);
  }
  EXPECT_EQ(gate_with(", \"lora_alpha\": 16", tiny_b).verdict, GateVerdict::kReal);
}

// alpha_pattern, rank_pattern and use_rslora give each module its own scaling (PEFT: the first
// matching key), and the floor applies per module: some negligible modules make a partial adapter.
TEST(LoraGate, NegligibleScalingIsPerModuleUnderThePatterns) {
  const auto tensors = adapter_tensors(tiny(), Form{}, all_ones);
  const LoraGateReport q = gate_with(R"(, "lora_alpha": 4, "alpha_pattern": {"q_proj": 1e-300})",
                                     tensors);
  EXPECT_EQ(q.verdict, GateVerdict::kPartial) << q.verdict_message;
  EXPECT_NE(q.verdict_message.find("6 negligible (q_proj on layers 0, 1, 2, 3, 4, 5)"),
            std::string::npos)
      << q.verdict_message;
  for (const auto& m : q.modules) {
    EXPECT_EQ(m.state, m.target == "q_proj" ? ModuleState::kNegligible : ModuleState::kLearned);
    if (m.target == "q_proj") {
      EXPECT_NE(m.message.find("alpha_pattern 'q_proj'"), std::string::npos) << m.message;
    }
  }
  EXPECT_TRUE(gate_with(R"(, "lora_alpha": 4, "alpha_pattern": {"q_proj": 16})", tensors).passed());
  // r = 2, alpha 2^-125: the scaling is 2^-126 (on the floor). q_proj's tensors have rank 4 by
  // rank_pattern: 2^-127, negligible; with use_rslora 2^-125 / sqrt(4) = 2^-126 again, and the
  // others 2^-125 / sqrt(2): real.
  Form four;
  four.rank = 4;
  std::vector<Stored> mixed = adapter_tensors(
      tiny(), Form{}, all_ones, {"k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"});
  for (Stored& t : adapter_tensors(tiny(), four, all_ones, {"q_proj"})) mixed.push_back(t);
  const std::string base = R"(, "lora_alpha": 2.350988701644575e-38, "rank_pattern": {"q_proj": 4})";
  const LoraGateReport plain = gate_with(base, mixed);
  EXPECT_EQ(plain.verdict, GateVerdict::kPartial) << plain.verdict_message;
  EXPECT_EQ(count_state(plain, ModuleState::kNegligible), 6u);
  const LoraGateReport rs = gate_with(base + R"(, "use_rslora": true)", mixed);
  EXPECT_EQ(rs.verdict, GateVerdict::kReal) << rs.verdict_message;
}

Stored saved(const std::string& name, std::vector<int64_t> shape, float value) {
  return filled(name, DType::kF32, std::move(shape), value);
}

// modules_to_save: every listed module must have its whole-module copy in the adapter (PEFT's saved
// name "<module>.weight", or "<module>.modules_to_save.<adapter>.weight" from a state dict),
// finite; an all-zero copy is named.
TEST(LoraGate, ModulesToSaveMustBeSavedAndFinite) {
  const auto lora = adapter_tensors(tiny(), Form{}, all_ones);
  const int64_t vocab = tiny().config.vocab_size, hidden = tiny().config.hidden_size;
  auto with = [&](const std::vector<Stored>& extra, const std::string& config) {
    std::vector<Stored> t = lora;
    t.insert(t.end(), extra.begin(), extra.end());
    return gate_with(config, t);
  };
  const std::string both = R"(, "modules_to_save": ["lm_head", "embed_tokens"])";
  for (const char* form : {"base_model.model.", "base_model.model.modules_to_save.default."}) {
    const std::string f = form;
    const std::string lm = f == "base_model.model." ? "base_model.model.lm_head.weight"
                                                   : "base_model.model.lm_head.modules_to_save."
                                                     "default.weight";
    const LoraGateReport r =
        with({saved(lm, {vocab, hidden}, 0.25f),
              saved("base_model.model.model.language_model.embed_tokens.weight", {vocab, hidden},
                    0.5f)},
             both);
    EXPECT_TRUE(r.passed()) << lm << ": " << r.verdict_message;
    ASSERT_EQ(r.modules_to_save.size(), 2u);
    for (const auto& m : r.modules_to_save) {
      EXPECT_EQ(m.tensors.size(), 1u) << m.name;
      EXPECT_TRUE(m.problem.empty()) << m.problem;
    }
    EXPECT_FALSE(has_code(r, "other_tensors")) << lm;  // accounted for
  }
  // One listed module absent: exit 3, named; the LoRA verdict itself stays real.
  const LoraGateReport missing =
      with({saved("base_model.model.lm_head.weight", {vocab, hidden}, 0.25f)}, both);
  EXPECT_EQ(missing.verdict, GateVerdict::kReal);
  EXPECT_FALSE(missing.passed());
  EXPECT_EQ(missing.outcome, Outcome::kNo);
  EXPECT_TRUE(has_code(missing, "modules_to_save_missing"));
  EXPECT_NE(missing.modules_to_save[0].problem.find("'embed_tokens'"), std::string::npos)
      << missing.modules_to_save[0].problem;
  // A NaN in the copy: exit 3. All zero: a warning, the gate passes.
  const LoraGateReport nan = with(
      {saved("base_model.model.lm_head.weight", {vocab, hidden},
             std::numeric_limits<float>::quiet_NaN())},
      R"(, "modules_to_save": ["lm_head"])");
  EXPECT_FALSE(nan.passed());
  EXPECT_TRUE(has_code(nan, "modules_to_save_non_finite"));
  const LoraGateReport zero = with({saved("base_model.model.lm_head.weight", {vocab, hidden}, 0)},
                                   R"(, "modules_to_save": ["lm_head"])");
  EXPECT_TRUE(zero.passed());
  EXPECT_TRUE(has_code(zero, "modules_to_save_zero"));
  // Without modules_to_save the same tensor is another tensor, warned about, not gated.
  const LoraGateReport plain = with({saved("base_model.model.lm_head.weight", {vocab, hidden}, 1)}, "");
  EXPECT_TRUE(plain.passed());
  EXPECT_TRUE(plain.modules_to_save.empty());
  EXPECT_TRUE(has_code(plain, "other_tensors"));
  // Evidence reads back.
  const Json j = to_json(missing);
  const LoraGateReport back = lora_gate_report_from_json(j, "g.json results");
  EXPECT_EQ(to_json(back), j);
  EXPECT_FALSE(back.passed());
  EXPECT_EQ(j["adapter_config"]["modules_to_save"], Json::array({"embed_tokens", "lm_head"}));
}

// bias "all" / "lora_only": the base's bias tensors PEFT trains must be in the adapter. Gemma-4's
// linears have none, so the gate says there is nothing to train.
TEST(LoraGate, BiasAllOrLoraOnlyIsCheckedAgainstTheBase) {
  const auto lora = adapter_tensors(tiny(), Form{}, all_ones);
  for (const char* mode : {"all", "lora_only"}) {
    const std::string extra = std::string(", \"bias\": \"") + mode + "\"";
    const LoraGateReport r = gate_with(extra, lora);
    EXPECT_TRUE(r.passed()) << mode;
    EXPECT_TRUE(r.bias.checked);
    EXPECT_TRUE(r.bias.expected.empty());
    EXPECT_TRUE(has_code(r, "bias_nothing_to_train")) << mode;
    EXPECT_NE(r.bias.note.find("has no bias tensors"), std::string::npos) << r.bias.note;
    // Without a base: not checked, said so.
    const LoraGateReport nb = gate_with(extra, lora, std::nullopt);
    EXPECT_FALSE(nb.bias.checked);
    EXPECT_TRUE(has_code(nb, "bias_unchecked")) << mode;
  }
  // bias "none" (the default): no bias diagnostic at all.
  const LoraGateReport none = gate_with(R"(, "bias": "none")", lora);
  EXPECT_FALSE(has_code(none, "bias_nothing_to_train"));
  EXPECT_FALSE(has_code(none, "bias_unchecked"));
  // A base that has a bias on layer 0's q_proj (hand-made; Gemma-4 has none): lora_only needs it
  // in the adapter, under PEFT's wrapped name or the plain one.
  GateBase with_bias = tiny();
  with_bias.tensors.push_back(
      {with_bias.prefix + "layers.0.self_attn.q_proj.bias", DType::kF32, {64}});
  const LoraGateReport absent = gate_with(R"(, "bias": "lora_only")", lora, with_bias);
  EXPECT_FALSE(absent.passed());
  EXPECT_TRUE(has_code(absent, "bias_missing"));
  ASSERT_EQ(absent.bias.missing.size(), 1u);
  EXPECT_EQ(absent.bias.missing[0], "layers.0.self_attn.q_proj.bias");
  for (const char* name : {"base_model.model.model.language_model.layers.0.self_attn.q_proj."
                           "base_layer.bias",
                           "base_model.model.model.layers.0.self_attn.q_proj.bias"}) {
    std::vector<Stored> t = lora;
    t.push_back(saved(name, {64}, 0.1f));
    const LoraGateReport held = gate_with(R"(, "bias": "lora_only")", t, with_bias);
    EXPECT_TRUE(held.passed()) << name << ": " << held.bias.note;
    EXPECT_EQ(held.bias.found.size(), 1u);
    const Json j = to_json(held);
    EXPECT_EQ(to_json(lora_gate_report_from_json(j, "g.json results")), j);
  }
  // A bias tensor on Gemma-4 itself is one no base parameter takes: named in the note.
  std::vector<Stored> t = lora;
  t.push_back(saved("base_model.model.model.language_model.layers.0.self_attn.q_proj.bias", {64}, 1));
  const LoraGateReport extra = gate_with(R"(, "bias": "all")", t);
  EXPECT_NE(extra.bias.note.find("anyway"), std::string::npos) << extra.bias.note;
}

TEST(LoraGate, ModulesToSaveAndBiasFieldsAreTyped) {
  const std::string good =
      make_adapter(config_text(kSeven), adapter_tensors(tiny(), Form{}, all_ones));
  auto with_config = [&](const std::string& extra) {
    spit(good + "/adapter_config.json", config_text(kSeven, 2, extra));
    return error_of([&] { read_lora_adapter(good); });
  };
  EXPECT_NE(with_config(R"(, "bias": "some")").find("field 'bias' is 'some'"), std::string::npos);
  EXPECT_NE(with_config(R"(, "bias": 1)").find("'bias' must be a string"), std::string::npos);
  EXPECT_NE(with_config(R"(, "modules_to_save": "lm_head")").find("'modules_to_save' must be a list"),
            std::string::npos);
  EXPECT_NE(with_config(R"(, "modules_to_save": [""])").find("modules_to_save"), std::string::npos);
  // At most 64 names of at most 256 bytes (the gate's matching stays linear in the tensor names).
  auto names = [](int n, std::size_t bytes) {
    Json list = Json::array();
    for (int i = 0; i < n; ++i) list.push_back(std::string(bytes - 3, 'm') + fmt::format("{:03}", i));
    return ", \"modules_to_save\": " + list.dump();
  };
  EXPECT_NE(with_config(names(65, 8)).find("lists 65 modules (limit 64)"), std::string::npos);
  EXPECT_NE(with_config(names(1, 257)).find("a name of 257 bytes (limit 256)"), std::string::npos);
  EXPECT_EQ(with_config(names(64, 256)), "");
  // Negative controls: PEFT's own values.
  EXPECT_EQ(with_config(R"(, "bias": "lora_only", "modules_to_save": null)"), "");
  EXPECT_EQ(with_config(R"(, "bias": null, "modules_to_save": ["lm_head"])"), "");
}

}  // namespace
}  // namespace tprobe::core
