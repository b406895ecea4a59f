// The knob registry and the attention registry (core/step): every value spelled once and every
// view derived from the entries — the enums' names, the options' values and help, the evidence's
// spelling read back, the engine's checks, the levers' candidates, the FLOP and mask rules.
//
// A hypothetical attention path or knob: each test below iterates the registries, so a new entry
// is covered without an edit here; what a new entry needs beyond itself is its engine code (the
// kernels for a path, the StepConfig field and the engine's use of it for a knob). docs/
// ARCHITECTURE.md, "Adding a knob or an attention path", records the scratch branch that added one
// of each and what it touched.
#include <gtest/gtest.h>

#include <set>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/cost/flops.hpp"
#include "tprobe/core/cost/levers.hpp"
#include "tprobe/core/gemma4/model_config.hpp"
#include "tprobe/core/mask/mask_geometry.hpp"
#include "tprobe/core/step/knobs.hpp"

namespace tprobe::core {
namespace {

EngineFacts facts(int major, int minor, bool cuda_build, const char* device, const char* dtype) {
  EngineFacts f;
  f.torch_major = major;
  f.torch_minor = minor;
  f.cuda_build = cuda_build;
  f.device = device;
  f.dtype = dtype;
  f.torch_version = std::to_string(major) + "." + std::to_string(minor);
  return f;
}

TEST(KnobRegistry, EveryKnobIsOneEntryInEnumOrderWithItsOwnFlagAndKey) {
  std::set<std::string> flags, keys;
  const auto& r = knob_registry();
  for (std::size_t i = 0; i < r.size(); ++i) {
    const KnobInfo& k = r[i];
    EXPECT_EQ(static_cast<std::size_t>(k.id), i);
    EXPECT_EQ(&knob_info(k.id), &k);
    EXPECT_TRUE(flags.insert(k.flag).second) << k.flag;
    EXPECT_TRUE(keys.insert(k.key).second) << k.key;
    EXPECT_EQ(std::string(k.flag).rfind("--", 0), 0u) << k.flag;
    EXPECT_STRNE(k.summary, "");
    std::set<std::string> names;
    for (const KnobValue& v : k.values) {
      EXPECT_TRUE(names.insert(v.name).second) << k.key << " " << v.name;
      EXPECT_STRNE(v.summary, "") << v.name;
    }
    // A default is one of the values, or left to the engine with a sentence saying how.
    if (*k.default_value && !k.values.empty()) {
      EXPECT_TRUE(names.count(k.default_value)) << k.key;
    }
    if (!*k.default_value) {
      EXPECT_STRNE(k.auto_summary, "") << k.key;
    }
    for (const auto& [alias, to] : k.aliases) EXPECT_TRUE(names.count(to)) << alias;
    // What evidence from before the knob ran is one of its values.
    if (*k.absent_value) {
      EXPECT_TRUE(names.count(k.absent_value)) << k.key;
    }
    if (*k.lever) {
      EXPECT_STRNE(k.moves, "") << k.key;
      EXPECT_STRNE(k.in_hf_stack, "") << k.key;
    }
  }
}

// Every value of every knob: set by its name, read back by its name, written in the evidence and
// read back from it; an unknown name is a usage error naming the flag and every value.
TEST(KnobRegistry, EveryValueRoundTripsThroughItsNameAndTheEvidence) {
  for (const KnobInfo& k : knob_registry()) {
    if (k.values.empty()) {
      StepConfig c;
      set_knob(c, k.id, "7");
      EXPECT_EQ(knob_value(c, k.id), "7");
      EXPECT_THROW(set_knob(c, k.id, "0"), UsageError);
      EXPECT_THROW(set_knob(c, k.id, "two"), UsageError);
      continue;
    }
    for (const KnobValue& v : k.values) {
      // A parametric family ("zipf:S") by its instance; a plain value by its name.
      EXPECT_EQ(*v.example != '\0', k.parametric && std::string(v.name).find(':') != std::string::npos)
          << k.key << " " << v.name;
      const std::string name = *v.example ? v.example : v.name;
      StepConfig c;
      set_knob(c, k.id, name);
      EXPECT_EQ(knob_value(c, k.id), name);
      const Json j = to_json(c);
      EXPECT_EQ(j.at(k.key), name);
      EXPECT_EQ(step_config_from_json(j, "e.json"), c) << k.key << " " << name;
    }
    for (const auto& [alias, to] : k.aliases) {
      StepConfig c;
      set_knob(c, k.id, alias);
      EXPECT_EQ(knob_value(c, k.id), to);
    }
    StepConfig c;
    try {
      set_knob(c, k.id, "no-such-value");
      ADD_FAILURE() << k.flag << " took an unknown value";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(k.flag), std::string::npos) << e.what();
      for (const KnobValue& v : k.values)
        EXPECT_NE(std::string(e.what()).find(v.name), std::string::npos) << e.what();
    }
    // The help names every value the engine runs, with its words.
    for (const KnobValue& v : k.values) {
      if (!v.engine) continue;
      EXPECT_NE(knob_help(k.id, true).find(std::string(v.name) + " (" + v.summary),
                std::string::npos)
          << k.flag << " " << v.name;
    }
  }
  // The enums' names are the registry's.
  EXPECT_STREQ(to_string(NormKind::kFused), "fused");
  EXPECT_STREQ(to_string(MoeDispatch::kHfGroupedMm), "hf_grouped_mm");
  EXPECT_STREQ(to_string(Checkpointing::kNonReentrant), "non-reentrant");
  EXPECT_STREQ(to_string(CeForm::kChunkCheckpoint), "chunk-checkpoint");
  EXPECT_STREQ(to_string(OptimizerKind::kAdamw), "adamw");
  EXPECT_STREQ(to_string(OptimizerKind::kNone), "none");
  // A default left to the engine is null in the evidence, and read back open.
  const StepConfig open;
  EXPECT_TRUE(to_json(open)["attn"].is_null());
  EXPECT_EQ(step_config_from_json(to_json(open), "e.json"), open);
  Json bad = to_json(open);
  bad["norm"] = "magic";
  EXPECT_THROW(step_config_from_json(bad, "e.json"), Error);
  // A knob absent from the file: one with a default was added after the file was written, and
  // the file ran that default; one the engine resolves, or the batch, is required.
  StepConfig naive;
  naive.ce = CeForm::kNaive;
  Json older = to_json(naive);
  older.erase("ce");
  EXPECT_EQ(step_config_from_json(older, "e.json").ce, CeForm::kChunkCheckpoint);
  // ...unless the knob says what such a file ran: evidence from before --optimizer existed ran
  // no optimizer, though a step today runs AdamW by default; a file that says adamw reads adamw.
  const StepConfig baseline = hf_peft_baseline();
  EXPECT_EQ(baseline.optimizer, OptimizerKind::kAdamw);
  Json before = to_json(baseline);
  EXPECT_EQ(before.at("optimizer"), "adamw");
  EXPECT_EQ(step_config_from_json(before, "e.json").optimizer, OptimizerKind::kAdamw);
  before.erase("optimizer");
  EXPECT_EQ(step_config_from_json(before, "e.json").optimizer, OptimizerKind::kNone);
  for (const KnobInfo& k : knob_registry()) {
    if (!*k.absent_value) continue;
    Json without = to_json(baseline);
    without.erase(k.key);
    EXPECT_EQ(knob_value(step_config_from_json(without, "e.json"), k.id), k.absent_value) << k.key;
  }
  for (const char* required : {"attn", "moe", "batch"}) {
    bad = to_json(open);
    bad.erase(required);
    EXPECT_THROW(step_config_from_json(bad, "e.json"), Error) << required;
  }
}

// The engine's checks are the entries' requirements held against the engine's facts, for every
// value: on an engine that has everything nothing is refused; take away one fact a value needs and
// exactly the values needing it are refused, each saying what it needs.
TEST(KnobRegistry, TheEnginesChecksAreTheRequirementsOfEveryValue) {
  const EngineFacts all = facts(99, 0, true, "cuda", "bf16");
  for (const KnobInfo& k : knob_registry()) {
    for (const KnobValue& v : k.values) {
      const auto why = unavailable(k.id, v.name, all);
      EXPECT_EQ(why.has_value(), !v.engine) << k.flag << " " << v.name;
      const Requirement& q = v.needs;
      if (!v.engine) continue;
      EXPECT_EQ(unavailable(k.id, v.name, facts(99, 0, false, "cuda", "bf16")).has_value(),
                q.cuda_build)
          << v.name;
      EXPECT_EQ(unavailable(k.id, v.name, facts(99, 0, true, "cpu", "bf16")).has_value(),
                q.cuda_device)
          << v.name;
      EXPECT_EQ(unavailable(k.id, v.name, facts(99, 0, true, "cuda", "fp32")).has_value(),
                q.half_dtype)
          << v.name;
      if (q.torch_major > 0) {
        const auto old = unavailable(k.id, v.name,
                                     facts(q.torch_major, q.torch_minor - 1, true, "cuda", "bf16"));
        ASSERT_TRUE(old) << v.name;
        EXPECT_NE(old->find(std::to_string(q.torch_major) + "." + std::to_string(q.torch_minor)),
                  std::string::npos)
            << *old;
      }
    }
  }
  // Debian's libtorch 1.13 on the CPU: SDPA, the fused norm and the grouped GEMMs are refused,
  // and the defaults resolve to what it runs, saying so.
  const EngineFacts ci = facts(1, 13, false, "cpu", "fp32");
  std::vector<Diagnostic> notes;
  const StepConfig c = resolve_defaults(hf_peft_baseline(), ci, &notes);
  EXPECT_EQ(c.attn, AttentionPath::kEager);
  EXPECT_EQ(c.moe, MoeDispatch::kLoop);
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[0].code, "attn_default_eager");
  EXPECT_EQ(notes[1].code, "moe_default_loop");
  EXPECT_FALSE(config_refusal(c, ci));
  StepConfig fused = c;
  fused.norm = NormKind::kFused;
  ASSERT_TRUE(config_refusal(fused, ci));
  EXPECT_NE(config_refusal(fused, ci)->find("--norm fused needs libtorch >= 2.4"),
            std::string::npos);
  // The H200's libtorch 2.11 (CUDA): the baseline resolves to HF's own choices.
  const StepConfig gpu = resolve_defaults(hf_peft_baseline(), facts(2, 11, true, "cuda", "bf16"));
  EXPECT_EQ(gpu.attn, AttentionPath::kSdpa);
  EXPECT_EQ(gpu.moe, MoeDispatch::kHfGroupedMm);
}

// The difference of two configurations is the options that make one from the other, each flag
// as the registry spells it.
TEST(KnobRegistry, ADifferenceIsTheRegistrysFlags) {
  StepConfig a = hf_peft_baseline(2), b = a;
  EXPECT_EQ(config_difference(a, b), "");
  b.norm = NormKind::kFused;
  b.batch = 4;
  EXPECT_EQ(config_difference(b, a), "--norm fused --batch 4");
  b = a;
  b.attn = AttentionPath::kFlashWindow;
  EXPECT_EQ(config_difference(b, a), "--attn flash-window");
  EXPECT_EQ(config_difference(a, b), "--attn (default)");
  b = a;
  b.optimizer = OptimizerKind::kNone;
  EXPECT_EQ(config_difference(b, a), "--optimizer none");
}

// Every attention path's FLOP and mask rules come from its entry: the counter and the mask
// geometry switch over the rule kinds, never over the paths.
TEST(AttentionRegistry, EveryPathsRulesComeFromItsEntry) {
  const ModelConfig tiny = embedded_model("gemma4-tiny");
  for (const AttentionPathInfo& i : attention_registry()) {
    EXPECT_EQ(&attention_info(i.path), &i);
    EXPECT_EQ(parse_attention_path(i.name), i.path);
    EXPECT_EQ(sliding_layers_dense(i.path),
              i.sliding_pairs == PairRule::kDense || i.sliding_pairs == PairRule::kHfSdpa);
    FlopsRequest req;
    req.path = i.path;
    req.batch = 1;
    req.width = 4 * tiny.sliding_window;
    const FlopsReport rep = count_flops(tiny, req);
    const double dense = double(req.width) * double(req.width);
    const bool full_dense = i.full_pairs == PairRule::kDense;
    EXPECT_EQ(rep.pairs_performed_full == dense, full_dense) << i.name;
    EXPECT_LE(rep.pairs_intended_sliding, rep.pairs_performed_sliding) << i.name;
    if (i.engine) {
      const auto rules = all_mask_rules();
      EXPECT_NE(std::find(rules.begin(), rules.end(), MaskRules::of(i.path)), rules.end());
      EXPECT_EQ(MaskRules::of(i.path).plan(), i.mask);
      EXPECT_EQ(to_string(MaskRules::of(i.path)), i.name);
    }
  }
  EXPECT_EQ(MaskRules::hf().plan(), MaskPlanKind::kHfSdpa);
  EXPECT_EQ(to_string(MaskRules::hf()), "hf-sdpa");
}

// The levers' candidates are the registry's: every value offered as a lever, on its device, is a
// configuration moving that one knob; none the registry does not offer.
TEST(KnobRegistry, TheLeversCandidatesAreTheRegistrysLeverValues) {
  for (const char* device : {"cpu", "cuda"}) {
    LeverPlanInput in;
    in.device = device;
    in.baseline = resolve_defaults(hf_peft_baseline(), facts(2, 11, true, device, "bf16"));
    const std::vector<LeverConfig> configs = lever_configs(in);
    std::set<std::string> settings;
    for (const LeverConfig& c : configs) settings.insert(c.setting);
    for (const KnobInfo& k : knob_registry()) {
      if (!*k.lever || k.values.empty()) continue;
      const std::string current = knob_value(in.baseline, k.id);
      for (const KnobValue& v : k.values) {
        const bool offered = v.engine && v.lever && current != v.name &&
                             (!*v.lever_device || std::string(device) == v.lever_device);
        EXPECT_EQ(settings.count(std::string(k.flag) + " " + v.name), offered ? 1u : 0u)
            << device << " " << k.flag << " " << v.name;
      }
    }
  }
}

TEST(KnobRegistry, TheDefaultWidthsAreOneDefinition) {
  EXPECT_EQ(default_widths("cuda", WidthsUse::kLevers), (std::vector<int64_t>{2048, 16384}));
  EXPECT_EQ(default_widths("cpu", WidthsUse::kProfile).size(), 6u);
  EXPECT_NE(default_widths_help(WidthsUse::kProfile).find("2048,4096,6144,8192,12288,16384 on cuda"),
            std::string::npos);
}

}  // namespace
}  // namespace tprobe::core
