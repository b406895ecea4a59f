// End-to-end `tprobe profile` on the CPU (gemma4-tiny, random weights): the sweep, the padded
// point, evidence that scaling-fit reads, the kernel table refused on the CPU and attributed from
// a replayed raw trace, and usage errors.
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "run_tprobe.hpp"

namespace tprobe::testing {
namespace {

using nlohmann::json;

const std::string kReplay = std::string(TPROBE_FIXTURES_DIR) + "/raw_trace_small.json";

std::vector<std::string> base_args(const std::string& json_path) {
  return {"profile", "--device",  "cpu",     "--model", "gemma4-tiny", "--dtype",  "fp32",
          "--rank",  "4",         "--alpha", "8",       "--widths",    "16,24,32", "--ce-chunk",
          "16",      "--repeats", "2",       "--json",  json_path};
}

TEST(ProfileCli, CpuSweepWritesEvidenceScalingFitReads) {
  const std::string dir = make_temp_dir();
  const std::string path = dir + "/profile.json";
  auto args = base_args(path);
  args.insert(args.end(), {"--pad-fraction", "0.5"});
  RunResult r = run_tprobe(args);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // one line per point as it finishes, then the tables
  EXPECT_NE(r.out.find("2x16 ok: step"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2x32 (lengths 32,16) ok"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("not available: not supported on the CPU"), std::string::npos) << r.out;

  json ev = json::parse(read_text(path));
  EXPECT_EQ(ev["schema"]["name"], "tprobe.profile");
  const json& res = ev["results"];
  ASSERT_EQ(res["points"].size(), 3u);
  ASSERT_EQ(res["padded_points"].size(), 1u);
  for (const auto& p : res["points"]) {
    EXPECT_EQ(p["outcome"], "ok");
    EXPECT_EQ(p["batch"], 2);
    EXPECT_EQ(p["samples_s"].size(), 2u);
    EXPECT_EQ(p["forward_samples_s"].size(), 2u);
    EXPECT_GT(p["performed_flops"].get<double>(), 0);
    EXPECT_TRUE(p["intended_mfu_ratio"].is_null());  // no peak on the CPU without --peak-tflops
    EXPECT_EQ(p["inert_adapters"], 0);
    // The CPU has no caching allocator: no memory figure rather than a peak of 0 B.
    EXPECT_TRUE(p["peak_allocated_bytes"].is_null());
    EXPECT_TRUE(p["peak_reserved_bytes"].is_null());
  }
  EXPECT_NE(r.out.find("peak memory not measured"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("peak 0 B"), std::string::npos) << r.out;
  const json& pad = res["padded_points"][0];
  EXPECT_EQ(pad["lengths"], json::array({32, 16}));
  EXPECT_EQ(pad["real_tokens"], 48);
  EXPECT_EQ(pad["loss_targets"], 31 + 15);
  EXPECT_LT(pad["intended_flops"].get<double>(), res["points"][2]["intended_flops"].get<double>());
  EXPECT_EQ(res["kernel_trace_status"]["supported"], false);
  EXPECT_NE(res["kernel_trace_status"]["reason"].get<std::string>().find("CPU"), std::string::npos);
  EXPECT_TRUE(res["kernel_table"].is_null());
  EXPECT_FALSE(res["scaling_fit"].is_null());
  EXPECT_EQ(res["scaling_fit"]["model"], "AB");
  EXPECT_TRUE(res["provenance"]["attn_requested"].is_null());  // not given
  // Not chosen: sdpa where the linked libtorch has it (2.x), eager on Debian's 1.13.
  const std::string torch_version = ev["environment"]["torch"]["version"].get<std::string>();
  EXPECT_EQ(res["provenance"]["attn_path"], torch_version.rfind("1.", 0) == 0 ? "eager" : "sdpa")
      << torch_version;
  EXPECT_EQ(res["provenance"]["ce_mode"], "chunk-checkpoint");  // the HF harness's form
  EXPECT_EQ(res["provenance"]["checkpointing_requested"], "reentrant");
  EXPECT_EQ(res["provenance"]["config_digest"].get<std::string>().rfind("fnv1a64:", 0), 0u);

  // scaling-fit reads the evidence as its documented input; the padded point is not a width.
  RunResult fit = run_tprobe({"scaling-fit", "--profile", path, "--json", dir + "/fit.json"});
  ASSERT_EQ(fit.exit_code, 0) << fit.out << fit.err;
  json fj = json::parse(read_text(dir + "/fit.json"));
  EXPECT_EQ(fj["results"]["distinct_widths"], 3);
  EXPECT_EQ(fj["results"]["input_points"].size(), 6u);
}

// The memory step on the CPU: every point's peak split into items that add up to it, the bytes
// alive at the peak by phase and part, a timeline, and the raw history written when asked for.
TEST(ProfileCli, MemoryStepItemsAddUpToThePeakOnTheCpu) {
  const std::string dir = make_temp_dir();
  const std::string path = dir + "/profile.json";
  auto args = base_args(path);
  args.insert(args.end(), {"--raw-memory", dir + "/mem.json"});
  RunResult r = run_tprobe(args);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("where the peak goes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bytes alive at the 2x32 peak by part and phase"), std::string::npos)
      << r.out;
  json ev = json::parse(read_text(path));
  const json& res = ev["results"];
  EXPECT_EQ(res["memory_status"]["memory_step"], true);
  for (const auto& p : res["points"]) {
    ASSERT_TRUE(p["memory"].is_object()) << p.dump();
    const json& m = p["memory"];
    EXPECT_EQ(m["allocator_totals"], false);  // the CPU allocator reports no totals
    int64_t sum = 0;
    for (const auto& it : m["items"]) {
      if (it["in_peak"].get<bool>()) sum += it["bytes"].get<int64_t>();
      EXPECT_GE(it["bytes"].get<int64_t>(), 0) << it.dump();
    }
    EXPECT_EQ(sum, m["items_sum_bytes"].get<int64_t>());
    EXPECT_EQ(sum, m["peak_allocated_bytes"].get<int64_t>());
    int64_t cells = 0;
    bool loss = false;
    for (const auto& c : m["alive_at_peak"]) {
      cells += c["bytes"].get<int64_t>();
      if (c["phase"] == "loss") loss = true;
    }
    (void)loss;
    // Everything alive at the peak that the step allocated is in a cell; the rest is resident.
    EXPECT_GT(cells, 0);
    EXPECT_LE(cells, m["peak_allocated_bytes"].get<int64_t>());
    EXPECT_GE(m["timeline"]["samples"].size(), 2u);
    EXPECT_GT(m["events"].get<int64_t>(), 0);
    EXPECT_GE(m["peak_allocated_bytes"].get<int64_t>(), m["start_allocated_bytes"].get<int64_t>());
  }
  // The first point's history, replayable.
  json raw = json::parse(read_text(dir + "/mem.json"));
  EXPECT_EQ(raw["schema"]["name"], "tprobe.raw_memory");
  EXPECT_EQ(raw["device"], "cpu");
  EXPECT_GT(raw["events"].size(), 0u);
  EXPECT_GT(raw["tags"].size(), 0u);

  // --memory off: no memory step, and --raw-memory without it is a usage error.
  auto off = base_args(dir + "/off.json");
  off.insert(off.end(), {"--memory", "off"});
  RunResult o = run_tprobe(off);
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_TRUE(json::parse(read_text(dir + "/off.json"))["results"]["points"][0]["memory"].is_null());
  off.insert(off.end(), {"--raw-memory", dir + "/m2.json"});
  off[off.size() - 5] = dir + "/off2.json";
  RunResult bad = run_tprobe(off);
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_FALSE(file_exists(dir + "/m2.json"));
}

// The cross-entropy's forms and checkpointing's values run, and the evidence says which ran.
TEST(ProfileCli, CeFormsAndCheckpointingValuesAreRecorded) {
  const std::string dir = make_temp_dir();
  for (const std::string ce : {"chunked", "chunk-checkpoint", "naive"}) {
    auto args = base_args(dir + "/" + ce + ".json");
    args.insert(args.end(), {"--ce", ce, "--widths", "16", "--memory", "off"});
    RunResult r = run_tprobe(args);
    ASSERT_EQ(r.exit_code, 0) << ce << r.err;
    json ev = json::parse(read_text(dir + "/" + ce + ".json"));
    EXPECT_EQ(ev["results"]["provenance"]["ce_mode"], ce);
  }
  // The three forms compute one loss: the first timed repeat's loss values agree.
  auto loss = [&](const std::string& ce) {
    return json::parse(read_text(dir + "/" + ce + ".json"))["results"]["points"][0]["loss_value"]
        .get<double>();
  };
  EXPECT_NEAR(loss("chunked"), loss("naive"), 1e-4 * std::abs(loss("naive")));
  EXPECT_NEAR(loss("chunk-checkpoint"), loss("naive"), 1e-4 * std::abs(loss("naive")));
  for (const std::string ck : {"reentrant", "non-reentrant", "off", "on"}) {
    auto args = base_args(dir + "/ck-" + ck + ".json");
    args.insert(args.end(), {"--checkpointing", ck, "--widths", "16", "--memory", "off"});
    RunResult r = run_tprobe(args);
    ASSERT_EQ(r.exit_code, 0) << ck << r.err;
    json ev = json::parse(read_text(dir + "/ck-" + ck + ".json"));
    const json& prov = ev["results"]["provenance"];
    EXPECT_EQ(prov["checkpointing_requested"], ck == "on" ? "reentrant" : ck);
    EXPECT_EQ(prov["gradient_checkpointing"], ck != "off");
    bool warned = false;
    for (const auto& d : ev["status"]["diagnostics"]) {
      if (d["code"] == "checkpointing_resolved") warned = true;
    }
    EXPECT_EQ(warned, ck == "non-reentrant") << ck;
  }
}

// --attention-mask ones: the values are the same (one loss), and the memory step's peak holds the
// step's two masks (eager materialises the sliding and the full one) at [B, 1, S, S] bools instead
// of [1, 1, S, S]: (B - 1) * S * S bytes more each.
TEST(ProfileCli, AttentionMaskOnesHoldsBatchWideMasksAndChangesNoValue) {
  const std::string dir = make_temp_dir();
  const int64_t width = 64, batch = 2;
  for (const std::string m : {"none", "ones"}) {
    std::vector<std::string> args = {"profile", "--device", "cpu", "--model", "gemma4-tiny",
                                     "--dtype", "fp32", "--rank", "4", "--alpha", "8",
                                     "--ce-chunk", "16", "--repeats", "1", "--attn", "eager",
                                     "--attention-mask", m, "--widths", std::to_string(width),
                                     "--json", dir + "/" + m + ".json"};
    RunResult r = run_tprobe(args);
    ASSERT_EQ(r.exit_code, 0) << m << r.err;
  }
  auto point = [&](const std::string& m) {
    json ev = json::parse(read_text(dir + "/" + m + ".json"));
    EXPECT_EQ(ev["results"]["provenance"]["attention_mask"], m);
    EXPECT_EQ(ev["results"]["points"][0]["batch"], batch);
    return ev["results"]["points"][0];
  };
  const json none = point("none"), ones = point("ones");
  EXPECT_EQ(none["loss_value"].get<double>(), ones["loss_value"].get<double>());
  ASSERT_TRUE(none["memory"].is_object());
  ASSERT_TRUE(ones["memory"].is_object());
  EXPECT_EQ(ones["memory"]["peak_allocated_bytes"].get<int64_t>() -
                none["memory"]["peak_allocated_bytes"].get<int64_t>(),
            2 * (batch - 1) * width * width);
  RunResult bad = run_tprobe({"profile", "--device", "cpu", "--attention-mask", "zeros"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
}

// --optimizer (issue 44, item 2). adamw, the default, ends each step with AdamW on the LoRA
// parameters, and the memory step is a step after the optimizer's first: its two fp32 moments per
// LoRA parameter are resident, an item in the peak, and the in-peak items still add up to the
// peak; the peak is above --optimizer none's by at least the moments, and none holds no moments in
// its peak (they stand beside it, computed). Every expectation comes from lora_parameters in the
// evidence. A value the registry does not have is a usage error.
TEST(ProfileCli, AdamWHoldsItsMomentsInThePeakAndNoneHoldsNone) {
  const std::string dir = make_temp_dir();
  auto run = [&](const std::string& mode) {
    const std::string path = dir + "/" + mode + ".json";
    std::vector<std::string> args = {"profile", "--device", "cpu", "--model", "gemma4-tiny",
                                     "--dtype", "fp32", "--rank", "4", "--alpha", "8",
                                     "--ce-chunk", "16", "--widths", "16,32", "--repeats", "1",
                                     "--optimizer", mode, "--json", path};
    RunResult r = run_tprobe(args);
    EXPECT_EQ(r.exit_code, 0) << mode << r.out << r.err;
    return json::parse(read_text(path))["results"];
  };
  const json adamw = run("adamw"), none = run("none");
  EXPECT_EQ(adamw["provenance"]["config"]["optimizer"], "adamw");
  EXPECT_EQ(none["provenance"]["config"]["optimizer"], "none");
  const int64_t lora_parameters = adamw["lora_parameters"].get<int64_t>();
  ASSERT_GT(lora_parameters, 0);
  EXPECT_EQ(none["lora_parameters"].get<int64_t>(), lora_parameters);
  const double moments = 8.0 * static_cast<double>(lora_parameters);  // two fp32 per parameter
  auto in_peak_sum = [](const json& m) {
    int64_t sum = 0;
    for (const auto& it : m["items"]) {
      if (it["in_peak"].get<bool>()) sum += it["bytes"].get<int64_t>();
    }
    return sum;
  };
  auto states = [](const json& m, bool in_peak) {
    int64_t n = 0, found = 0;
    for (const auto& it : m["items"]) {
      if (it["key"] == "adamw_states" && it["in_peak"].get<bool>() == in_peak) {
        n += it["bytes"].get<int64_t>();
        ++found;
      }
    }
    return std::make_pair(found, n);
  };
  ASSERT_EQ(adamw["points"].size(), 2u);
  ASSERT_EQ(none["points"].size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const json& a = adamw["points"][i];
    const json& n = none["points"][i];
    ASSERT_TRUE(a["memory"].is_object()) << a.dump();
    ASSERT_TRUE(n["memory"].is_object()) << n.dump();
    const double peak_a = a["memory"]["peak_allocated_bytes"].get<double>();
    const double peak_n = n["memory"]["peak_allocated_bytes"].get<double>();
    // adamw: the moments in the peak at 8 B per LoRA parameter (±1 %), the items adding up to it.
    const auto [found_a, bytes_a] = states(a["memory"], true);
    EXPECT_EQ(found_a, 1) << a["memory"]["items"].dump();
    EXPECT_NEAR(static_cast<double>(bytes_a), moments, 0.01 * moments);
    EXPECT_NEAR(static_cast<double>(in_peak_sum(a["memory"])), peak_a, 0.01 * peak_a);
    EXPECT_GE(peak_a - peak_n, moments) << "width " << a["width"];
    // The optimizer's step is timed, as part of the step.
    EXPECT_EQ(a["optimizer_samples_s"].size(), a["samples_s"].size());
    EXPECT_TRUE(n["optimizer_samples_s"].empty());
    // none: no moments in the peak; they stand beside it, computed.
    EXPECT_EQ(states(n["memory"], true).first, 0) << n["memory"]["items"].dump();
    EXPECT_EQ(states(n["memory"], false).second, static_cast<int64_t>(moments));
    EXPECT_NEAR(static_cast<double>(in_peak_sum(n["memory"])), peak_n, 0.01 * peak_n);
  }
  RunResult bad = run_tprobe({"profile", "--device", "cpu", "--optimizer", "sgd",
                              "--json", dir + "/bad.json"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("--optimizer"), std::string::npos) << bad.err;
  EXPECT_FALSE(file_exists(dir + "/bad.json"));
}

// What fits, on the CPU: there is no caching allocator, so no peak to fit, and the evidence says
// so instead of predicting from nothing; the budget's options are checked before anything runs.
TEST(ProfileCli, GpuMemoryOnTheCpuSaysThereIsNoPeakToFit) {
  const std::string dir = make_temp_dir();
  auto args = base_args(dir + "/fit.json");
  args.insert(args.end(), {"--gpu-memory", "80,95.6", "--reserve", "0,3", "--memory", "off"});
  RunResult r = run_tprobe(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("what fits"), std::string::npos) << r.out;
  json ev = json::parse(read_text(dir + "/fit.json"));
  const json& mf = ev["results"]["memory_fit"];
  ASSERT_TRUE(mf.is_object());
  EXPECT_EQ(mf["fit"]["ok"], false);
  EXPECT_NE(mf["fit"]["why_not"].get<std::string>().find("caching allocator"), std::string::npos);
  EXPECT_TRUE(mf["budgets"].empty());
  // The edge search is on by default, and on the CPU (no allocator to cap) it searches nothing
  // and says why.
  EXPECT_EQ(mf["edge_search"], "on");
  EXPECT_NE(r.out.find("no edge searched: no point has a measured peak"), std::string::npos)
      << r.out;
  // Without --gpu-memory there is no memory_fit at all.
  RunResult plain = run_tprobe(base_args(dir + "/plain.json"));
  ASSERT_EQ(plain.exit_code, 0);
  EXPECT_TRUE(json::parse(read_text(dir + "/plain.json"))["results"]["memory_fit"].is_null());
  auto bad = [&](std::vector<std::string> extra) {
    auto a = base_args(dir + "/bad.json");
    a.insert(a.end(), extra.begin(), extra.end());
    RunResult b = run_tprobe(a);
    EXPECT_EQ(b.exit_code, 2) << b.err;
    EXPECT_EQ(std::count(b.err.begin(), b.err.end(), '\n'), 1) << b.err;
    EXPECT_FALSE(file_exists(dir + "/bad.json"));
  };
  bad({"--reserve", "3"});                                     // no card
  bad({"--gpu-memory", "80", "--reserve", "80"});              // nothing left
  bad({"--gpu-memory", "80,96", "--reserve", "1,2,3"});        // neither one nor one per card
  bad({"--gpu-memory", "-1"});
  bad({"--gpu-memory", "nan"});
  bad({"--gpu-memory", "80", "--edge-step", "0"});
}

TEST(ProfileCli, ReplayedTraceGivesThePhaseTable) {
  const std::string dir = make_temp_dir();
  const std::string path = dir + "/profile.json";
  auto args = base_args(path);
  args[12] = "16,24";  // two widths: no fit, and it says why
  args.insert(args.end(), {"--replay-trace", kReplay, "--peak-tflops", "1"});
  RunResult r = run_tprobe(args);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  json ev = json::parse(read_text(path));
  const json& res = ev["results"];
  EXPECT_EQ(res["kernel_trace_status"]["supported"], true);
  // the kernels table of the widest point, in kernels' own shape
  ASSERT_TRUE(res["kernel_table"].is_object());
  EXPECT_EQ(res["kernel_table_point"]["width"], 24);
  const json& kt = res["points"][0]["kernel_trace"];
  EXPECT_EQ(kt["records"], 10);
  EXPECT_EQ(kt["dropped_records"], 3);
  EXPECT_EQ(kt["attribution"]["untagged_records"], 2);
  EXPECT_EQ(kt["attribution"]["untagged_unlinked_node_records"], 1);
  EXPECT_EQ(kt["attribution"]["linked_records"], 2);
  // the fixture by hand (tests/core/step_trace_test.cpp): 22 us of kernels, 1.5 us untagged
  EXPECT_DOUBLE_EQ(kt["kernel_sum_s"].get<double>(), 22000e-9);
  EXPECT_DOUBLE_EQ(kt["untagged_kernel_share_ratio"].get<double>(), 1500.0 / 22000.0);
  double rows_s = 0;
  for (const auto& row : kt["by_phase_part"]) rows_s += row["kernel_s"].get<double>();
  EXPECT_NEAR(rows_s, kt["kernel_sum_s"].get<double>(), 1e-15);
  // attention two ways: named kernels flash fwd x2 (4 + 1 us) and fmha_cutlassB (12 us) = 17 of
  // 22 us; the attention_core parts hold the same three kernels
  EXPECT_DOUBLE_EQ(kt["attention_share_ratio"].get<double>(), 17000.0 / 22000.0);
  EXPECT_DOUBLE_EQ(kt["attention_core_share_ratio"].get<double>(), 17000.0 / 22000.0);
  EXPECT_TRUE(kt["attention_deltas"].empty());
  ASSERT_EQ(kt["by_layer"].size(), 2u);
  EXPECT_DOUBLE_EQ(kt["by_layer"][1]["kernel_s"]["backward"]["attention_core"].get<double>(),
                   12000e-9);
  EXPECT_FALSE(res["points"][0]["intended_mfu_ratio"].is_null());
  EXPECT_TRUE(res["scaling_fit"].is_null());
  EXPECT_NE(res["scaling_fit_note"].get<std::string>().find("2 distinct"), std::string::npos);
  // dropped records are said out loud
  bool dropped = false;
  for (const auto& d : ev["status"]["diagnostics"]) dropped |= d["code"] == "cupti_dropped_records";
  EXPECT_TRUE(dropped);
  EXPECT_NE(r.out.find("forward"), std::string::npos);
  // the phase × part matrix of the widest point, with the untagged row
  EXPECT_NE(r.out.find("where the step's device time went, 2x24"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("untagged"), std::string::npos);

  // The report draws the phase × part stacked bar and one bar per layer from this evidence.
  RunResult rep = run_tprobe({"report", dir});
  ASSERT_EQ(rep.exit_code, 0) << rep.out << rep.err;
  const std::string html = read_text(dir + "/report.html");
  EXPECT_NE(html.find("id=\"fig-profile-phase-part\""), std::string::npos);
  EXPECT_NE(html.find("id=\"fig-profile-per-layer\""), std::string::npos);
  EXPECT_NE(html.find("layer 1 full"), std::string::npos);
  EXPECT_NE(html.find("results.points[1].kernel_trace.by_phase_part[].kernel_s"),
            std::string::npos);
}

// --norm fused runs libtorch's at::rms_norm (>= 2.4) and says so in the provenance; on an older
// libtorch (Debian's 1.13 in CI) it is a usage error naming what is missing, with no evidence.
TEST(ProfileCli, FusedNormIsRecordedOrRefused) {
  const std::string dir = make_temp_dir();
  auto args = base_args(dir + "/fused.json");
  args.insert(args.end(), {"--norm", "fused", "--widths", "16", "--trace", "off"});
  RunResult r = run_tprobe(args);
  if (r.exit_code == 2) {
    EXPECT_NE(r.err.find("--norm fused needs libtorch >= 2.4 (at::rms_norm)"), std::string::npos) << r.err;
    EXPECT_FALSE(file_exists(dir + "/fused.json"));
    return;
  }
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  json ev = json::parse(read_text(dir + "/fused.json"));
  EXPECT_EQ(ev["results"]["provenance"]["rms_norm"], "fused");
  RunResult plain = run_tprobe(base_args(dir + "/plain.json"));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(json::parse(read_text(dir + "/plain.json"))["results"]["provenance"]["rms_norm"], "hf");
}

TEST(ProfileCli, BadOptionsAreUsageErrors) {
  const std::string dir = make_temp_dir();
  auto args = base_args(dir + "/p.json");
  auto with = [&](std::vector<std::string> extra) {
    auto a = args;
    a.insert(a.end(), extra.begin(), extra.end());
    return run_tprobe(a);
  };
  EXPECT_EQ(with({"--lengths", "10"}).exit_code, 2);    // one length for batch 2
  EXPECT_EQ(with({"--lengths", "1,16"}).exit_code, 2);  // a row needs 2 tokens for a label
  EXPECT_EQ(with({"--pad-fraction", "1.5"}).exit_code, 2);
  EXPECT_EQ(with({"--attn", "flash-window"}).exit_code, 2);  // CPU
  EXPECT_EQ(with({"--attn", "bogus"}).exit_code, 2);
  EXPECT_EQ(with({"--repeats", "0"}).exit_code, 2);
  EXPECT_FALSE(file_exists(dir + "/p.json"));
  EXPECT_EQ(with({"--norm", "bogus"}).exit_code, 2);
  EXPECT_FALSE(file_exists(dir + "/p.json"));
  EXPECT_EQ(with({"--ce", "bogus"}).exit_code, 2);
  EXPECT_EQ(with({"--checkpointing", "sometimes"}).exit_code, 2);
  EXPECT_EQ(with({"--memory", "maybe"}).exit_code, 2);
  EXPECT_FALSE(file_exists(dir + "/p.json"));
  RunResult missing = with({"--replay-trace", dir + "/none.json"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("none.json"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace tprobe::testing

namespace tprobe::testing {
namespace {

// A point whose certain tensors exceed the host is refused before it runs, as an OOM row with
// every size (issue 33, item 3): it never asks the allocator for them, and the sweep goes on.
TEST(ProfileCli, APointThatCannotFitTheHostIsRefusedBeforeItRunsWithTheSizes) {
  const std::string dir = make_temp_dir();
  auto args = base_args(dir + "/p.json");
  args[std::find(args.begin(), args.end(), "--widths") - args.begin() + 1] = "1048576,16";
  // Eager attention named (the default is sdpa where the linked libtorch has it).
  args.insert(args.end(), {"--memory", "off", "--batch", "2", "--attn", "eager"});
  RunResult r = run_tprobe(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(read_text(dir + "/p.json"));
  const auto& points = doc["results"]["points"];
  ASSERT_EQ(points.size(), 2u) << points.dump();
  const auto& big = points[0];
  EXPECT_EQ(big["width"], 1048576);
  EXPECT_EQ(big["outcome"], "oom");
  EXPECT_EQ(big["refused_before_running"], true);
  // gemma4-tiny in fp32: the eager probabilities [2, 4, 2^20, 2^20] fp32 are 2^45 bytes.
  EXPECT_EQ(big["oom_tried_bytes"], int64_t{1} << 45);
  const std::string msg = big["message"];
  EXPECT_EQ(msg.rfind("not run: it needs at least 32.00 TiB (", 0), 0u) << msg;
  EXPECT_NE(msg.find("the eager attention's fp32 probabilities of a sliding layer [2, 4, 1048576, "
                     "1048576] fp32 = 32.00 TiB), above "),
            std::string::npos)
      << msg;
  EXPECT_GT(big["planned_floor_bytes"].get<double>(), 35184372088832.0);
  EXPECT_TRUE(big["samples_s"].empty());
  // The next point ran, with its own (small) plan.
  EXPECT_EQ(points[1]["outcome"], "ok");
  EXPECT_EQ(points[1]["refused_before_running"], false);
  EXPECT_GT(points[1]["planned_floor_bytes"].get<double>(), 0);
  EXPECT_LT(points[1]["planned_floor_bytes"].get<double>(), 64.0 * 1024 * 1024);
  // The line says it whole, on the refused point's row.
  EXPECT_NE(r.out.find("2x1048576 oom (tried to allocate 32.00 TiB): not run: it needs at least"),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace tprobe::testing
