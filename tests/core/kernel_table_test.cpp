// Kernel table: totals, per-name statistics, categories, architecture, steps, phases, JSON.
#include "tprobe/core/trace/stats/kernel_table.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <iterator>
#include <set>

#include "tprobe/core/evidence/fields.hpp"
#include "tprobe/core/evidence/kernel_trace.hpp"

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/trace/record/activity_name.hpp"
#include "tprobe/core/trace/stats/kernel_category.hpp"
#include "tprobe/core/trace/compare/kernel_diff.hpp"
#include "tprobe/core/trace/stats/kernel_table_report.hpp"

namespace tprobe::core {
namespace {

KernelRecord rec(const std::string& name, int64_t start, int64_t end, int64_t stream = 7,
                 int64_t step = -1, const std::string& phase = "",
                 ActivityKind kind = ActivityKind::kKernel, int32_t device = 0) {
  KernelRecord r;
  r.kind = kind;
  r.name = name;
  r.start_ns = start;
  r.end_ns = end;
  r.stream = stream;
  r.step = step;
  r.phase = phase;
  r.device = device;
  return r;
}

DeviceProperties h200() {
  DeviceProperties p;
  p.id = 0;
  p.name = "NVIDIA H200";
  p.compute_major = 9;
  p.compute_minor = 0;
  return p;
}

TEST(BusyTotals, MergesOverlapsAcrossStreams) {
  std::vector<std::pair<int64_t, int64_t>> v = {{20, 30}, {0, 10}, {5, 15}};
  const BusyTotals t = busy_totals(v);
  EXPECT_EQ(t.events, 3);
  EXPECT_EQ(t.sum_ns, 30);         // 10 + 10 + 10
  EXPECT_EQ(t.union_busy_ns, 25);  // [0,15] + [20,30]
  EXPECT_EQ(t.span_ns, 30);
  EXPECT_EQ(t.idle_ns, 5);
}

TEST(BusyTotals, TouchingIntervalsAreOneBusyStretch) {
  std::vector<std::pair<int64_t, int64_t>> v = {{0, 10}, {10, 20}};
  EXPECT_EQ(busy_totals(v).union_busy_ns, 20);
  EXPECT_EQ(busy_totals(v).idle_ns, 0);
}

TEST(OverlapNs, IntersectionOfTwoSets) {
  EXPECT_EQ(overlap_ns({{0, 10}, {20, 30}}, {{5, 25}}), 10);  // [5,10] + [20,25]
  EXPECT_EQ(overlap_ns({{0, 10}}, {{10, 20}}), 0);
  EXPECT_EQ(overlap_ns({}, {{0, 5}}), 0);
}

TEST(KernelTable, SumUnionSpanAreDifferentNumbers) {
  // Two streams overlap by 50 ns; a 100 ns gap follows.
  std::vector<KernelRecord> r = {rec("gemm_a", 0, 100, 7), rec("gemm_a", 50, 150, 8),
                                 rec("softmax_b", 250, 300, 7)};
  const KernelTable t = build_kernel_table(r, {h200()});
  EXPECT_EQ(t.totals.sum_ns, 250);
  EXPECT_EQ(t.totals.union_busy_ns, 200);
  EXPECT_EQ(t.totals.span_ns, 300);
  EXPECT_EQ(t.totals.idle_ns, 100);
  ASSERT_EQ(t.kernels.size(), 2u);
  EXPECT_EQ(t.kernels[0].name, "gemm_a");
  EXPECT_EQ(t.kernels[0].count, 2);
  EXPECT_EQ(t.kernels[0].total_ns, 200);
  EXPECT_DOUBLE_EQ(t.kernels[0].share_ratio, 0.8);
  EXPECT_EQ(t.kernels[0].category, KernelCategory::kDenseGemm);
  EXPECT_EQ(t.kernels[1].category, KernelCategory::kReduction);
}

TEST(KernelTable, PerNameStatistics) {
  std::vector<KernelRecord> r = {rec("k", 0, 10), rec("k", 100, 140), rec("k", 200, 220),
                                 rec("k", 300, 400)};
  const KernelTable t = build_kernel_table(r, {});
  const KernelRow& k = t.kernels.at(0);
  EXPECT_EQ(k.count, 4);
  EXPECT_EQ(k.total_ns, 170);
  EXPECT_DOUBLE_EQ(k.mean_ns, 42.5);
  EXPECT_EQ(k.lower_median_ns, 20);  // of 10, 20, 40, 100: the lower of the middle two
  EXPECT_EQ(k.min_ns, 10);
  EXPECT_EQ(k.max_ns, 100);
}

TEST(KernelTable, EveryCategoryListedAndSharesSumToOne) {
  std::vector<KernelRecord> r = {
      rec("my_custom_kernel", 0, 30),
      rec("Memcpy DtoD (Device -> Device)", 40, 50, 7, -1, "", ActivityKind::kMemcpy),
      rec("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 60, 120, 9)};
  const KernelTable t = build_kernel_table(r, {});
  ASSERT_EQ(t.categories.size(), static_cast<std::size_t>(kKernelCategoryCount));
  double share = 0;
  for (const CategoryRow& c : t.categories) share += c.share_ratio;
  EXPECT_NEAR(share, 1.0, 1e-12);
  EXPECT_EQ(t.other_ns, 30);
  EXPECT_EQ(t.categories[static_cast<int>(KernelCategory::kMemcpyMemset)].total_ns, 10);
  EXPECT_EQ(t.categories[static_cast<int>(KernelCategory::kCommunication)].total_ns, 60);
  // Communication on stream 9 ran beside nothing: no overlap with compute.
  EXPECT_EQ(t.devices.at(0).communication_ns, 60);
  EXPECT_EQ(t.devices.at(0).overlap_ns, 0);
}

TEST(KernelTable, ComputeCommunicationOverlap) {
  std::vector<KernelRecord> r = {rec("sm90_xmma_gemm_bf16", 0, 100, 7),
                                 rec("ncclDevKernel_AllReduce", 60, 160, 20)};
  const KernelTable t = build_kernel_table(r, {});
  const DeviceRow& d = t.devices.at(0);
  EXPECT_EQ(d.compute_union_ns, 100);
  EXPECT_EQ(d.communication_union_ns, 100);
  EXPECT_EQ(d.overlap_ns, 40);
}

TEST(KernelTable, EmptySelectionIsAnError) {
  EXPECT_THROW(build_kernel_table({}, {}), Error);
  std::vector<KernelRecord> r = {rec("k", 0, 10, 7, -1, "", ActivityKind::kKernel, 0)};
  KernelTableOptions o;
  o.device = 3;
  try {
    build_kernel_table(r, {}, o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kError);
    EXPECT_NE(std::string(e.what()).find("device 3"), std::string::npos) << e.what();
  }
}

TEST(KernelTable, StepSelection) {
  std::vector<KernelRecord> r = {rec("k", 0, 10, 7, 1), rec("k", 20, 40, 7, 2),
                                 rec("k", 50, 80, 7, 3), rec("k", 90, 91, 7, -1)};
  const KernelTable all = build_kernel_table(r, {});
  EXPECT_EQ(all.totals.sum_ns, 10 + 20 + 30 + 1);
  ASSERT_EQ(all.steps.size(), 4u);
  EXPECT_EQ(all.steps[0].step, -1);
  KernelTableOptions skip;
  skip.skip_first = 1;
  EXPECT_EQ(build_kernel_table(r, {}, skip).totals.sum_ns, 20 + 30);  // steps 2, 3; not -1
  KernelTableOptions one;
  one.steps = {3};
  EXPECT_EQ(build_kernel_table(r, {}, one).totals.sum_ns, 30);
  KernelTableOptions missing;
  missing.steps = {7};
  EXPECT_THROW(build_kernel_table(r, {}, missing), UsageError);
  KernelTableOptions too_many;
  too_many.skip_first = 3;
  EXPECT_THROW(build_kernel_table(r, {}, too_many), UsageError);
  KernelTableOptions dropped;
  dropped.skip_first = 1;
  dropped.steps = {1};
  EXPECT_THROW(build_kernel_table(r, {}, dropped), UsageError);
}

TEST(KernelTable, StepOptionsOnATraceWithoutStepsAreUsageErrors) {
  std::vector<KernelRecord> r = {rec("k", 0, 10)};
  KernelTableOptions o;
  o.skip_first = 1;
  EXPECT_THROW(build_kernel_table(r, {}, o), UsageError);
}

TEST(KernelTable, PhasesSplitForwardFromBackward) {
  std::vector<KernelRecord> r = {rec("k", 0, 10, 7, -1, "forward"),
                                 rec("k", 10, 40, 7, -1, "backward"),
                                 rec("j", 40, 100, 7, -1, "backward"), rec("j", 100, 101, 7)};
  const KernelTable t = build_kernel_table(r, {});
  ASSERT_EQ(t.phases.size(), 3u);
  EXPECT_EQ(t.phases[0].phase, "backward");
  EXPECT_EQ(t.phases[0].count, 2);
  EXPECT_EQ(t.phases[0].total_ns, 90);
  EXPECT_EQ(t.phases[1].phase, "forward");
  EXPECT_EQ(t.phases[2].phase, "");  // unknown
  EXPECT_EQ(t.kernels.at(0).phase_ns.at("backward"), 60);
}

TEST(KernelTable, OlderArchitectureFlaggedWithItsShare) {
  std::vector<KernelRecord> r = {
      rec("fmha_cutlassF_bf16_aligned_64x128_rf_sm80(PyTorchMemEffAttention::AttentionKernel)", 0,
          300),
      rec("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", 300, 400),
      rec("void at::native::vectorized_elementwise_kernel<4>(int)", 400, 500)};
  const KernelTable t = build_kernel_table(r, {h200()});
  const ArchitectureSummary& a = t.architecture;
  EXPECT_EQ(a.device_sm, 90);
  EXPECT_EQ(a.device_name, "NVIDIA H200");
  EXPECT_EQ(a.older_kernels, 1);
  EXPECT_EQ(a.older_ns, 300);
  EXPECT_DOUBLE_EQ(a.older_share_ratio, 0.6);
  ASSERT_EQ(a.by_target.size(), 3u);  // unknown, sm80, sm90
  EXPECT_EQ(a.by_target[0].sm, 0);
  EXPECT_EQ(a.by_target[1].sm, 80);
  EXPECT_EQ(a.by_target[2].sm, 90);
}

TEST(KernelTable, NoDevicePropertiesMeansNoFlag) {
  std::vector<KernelRecord> r = {rec("fmha_cutlassF_sm80", 0, 300)};
  const KernelTable t = build_kernel_table(r, {});
  EXPECT_EQ(t.architecture.device_sm, 0);
  EXPECT_EQ(t.architecture.older_kernels, 0);
}

TEST(KernelTable, NegativeDurationRecordsAreLeftOut) {
  std::vector<KernelRecord> r = {rec("k", 10, 5), rec("k", 20, 30)};
  EXPECT_EQ(build_kernel_table(r, {}).totals.sum_ns, 10);
}

TEST(KernelTableJson, RoundTripsThroughTheEvidenceShape) {
  std::vector<KernelRecord> r = {rec("fmha_cutlassF_sm80", 0, 300, 7, 1, "forward"),
                                 rec("nvjet_tst_128x256", 300, 400, 7, 2, "backward"),
                                 rec("Memset (Device)", 400, 410, 7, 2, "", ActivityKind::kMemset)};
  const KernelTable t = build_kernel_table(r, {h200()});
  const Json j = to_json(t);
  const KernelTable back = kernel_table_from_json(Json::parse(j.dump()), "test");
  EXPECT_EQ(to_json(back).dump(), j.dump());
  EXPECT_EQ(back.kernels.size(), 3u);
  EXPECT_EQ(back.totals.sum_ns, 410);
}

TEST(KernelTableJson, BrokenShapesNameTheField) {
  std::vector<KernelRecord> r = {rec("k", 0, 10)};
  Json j = to_json(build_kernel_table(r, {}));
  Json no_totals = j;
  no_totals.erase("totals");
  try {
    kernel_table_from_json(no_totals, "f.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'totals'"), std::string::npos) << e.what();
  }
  Json bad_kind = j;
  bad_kind["kernels"][0]["kind"] = "teleport";
  EXPECT_THROW(kernel_table_from_json(bad_kind, "f.json"), Error);
  Json bad_version = j;
  bad_version["schema_version"] = 99;
  EXPECT_THROW(kernel_table_from_json(bad_version, "f.json"), Error);
  Json bad_count = j;
  bad_count["kernels"][0]["count"] = "3";
  EXPECT_THROW(kernel_table_from_json(bad_count, "f.json"), Error);
  EXPECT_THROW(kernel_table_from_json(Json::array(), "f.json"), Error);
  // Version 1 wrote the lower median as median_ns: read under its own name.
  Json v1 = j;
  v1["schema_version"] = 1;
  for (Json& k : v1["kernels"]) {
    k["median_ns"] = k["lower_median_ns"];
    k.erase("lower_median_ns");
  }
  EXPECT_EQ(to_json(kernel_table_from_json(v1, "f.json")), j);
  Json v2_with_old_name = v1;
  v2_with_old_name["schema_version"] = 2;
  EXPECT_THROW(kernel_table_from_json(v2_with_old_name, "f.json"), Error);
}

TEST(KernelDiff, SortedByWhatMovedMost) {
  std::vector<KernelRecord> a = {rec("fmha_cutlassF_sm80", 0, 300), rec("nvjet_a", 300, 400)};
  std::vector<KernelRecord> b = {rec("pytorch_flash::flash_fwd_kernel<T>", 0, 50),
                                 rec("nvjet_a", 50, 160)};
  const KernelDiff d =
      diff_kernel_tables(build_kernel_table(a, {}), "A", build_kernel_table(b, {}), "B");
  ASSERT_GE(d.categories.size(), 2u);
  EXPECT_EQ(d.categories[0].key, "attention");
  EXPECT_EQ(d.categories[0].a_ns, 300);
  EXPECT_EQ(d.categories[0].b_ns, 50);
  EXPECT_EQ(d.categories[1].key, "dense_gemm");
  EXPECT_EQ(d.categories[1].delta_ns(), 10);
  // Families: fmha gone (−300), flash new (+50), nvjet +10.
  ASSERT_EQ(d.families.size(), 3u);
  EXPECT_EQ(d.families[0].key, "fmha_cutlassF_sm80");
  EXPECT_EQ(d.families[1].key, "pytorch_flash::flash_fwd_kernel");
  EXPECT_EQ(d.families[2].delta_ns(), 10);
}

TEST(ActivityName, KinetoCuptiAndOlderTprobeNamesAgree) {
  EXPECT_EQ(memcpy_kind_label(1), "HtoD");
  EXPECT_EQ(memcpy_kind_label(2), "DtoH");
  EXPECT_EQ(memcpy_kind_label(8), "DtoD");
  EXPECT_EQ(memcpy_kind_label(10), "PtoP");
  EXPECT_EQ(memcpy_kind_label(0), "kind 0");
  EXPECT_EQ(memcpy_kind_label(42), "kind 42");
  EXPECT_EQ(memcpy_activity_name(8), "Memcpy DtoD");
  const auto m = ActivityKind::kMemcpy;
  EXPECT_EQ(normalized_activity_name(m, "Memcpy DtoD (Device -> Device)"), "Memcpy DtoD");
  EXPECT_EQ(normalized_activity_name(m, "Memcpy HtoD (Pinned -> Device)"), "Memcpy HtoD");
  EXPECT_EQ(normalized_activity_name(m, "Memcpy DtoD"), "Memcpy DtoD");
  EXPECT_EQ(normalized_activity_name(m, "memcpy kind 8"), "Memcpy DtoD");
  EXPECT_EQ(normalized_activity_name(m, "memcpy kind 2"), "Memcpy DtoH");
  EXPECT_EQ(normalized_activity_name(m, "memcpy kind 99999999999"), "memcpy kind 99999999999");
  EXPECT_EQ(normalized_activity_name(m, "memcpy kind x"), "memcpy kind x");
  EXPECT_EQ(normalized_activity_name(ActivityKind::kMemset, "Memset (Device)"), "Memset");
  EXPECT_EQ(normalized_activity_name(ActivityKind::kMemset, "memset"), "Memset");
  EXPECT_EQ(normalized_activity_name(ActivityKind::kKernel, "void k<int>(int)"),
            "void k<int>(int)");
}

// A Kineto trace's rows against tprobe's own CUPTI records (today's names and the older ones an
// evidence file may hold): the same copies, memsets and kernels are one row each, never a
// "gone" row beside a "new" one.
TEST(KernelDiff, MemcpyMemsetAndKernelsFromKinetoAndCuptiMatch) {
  const auto m = ActivityKind::kMemcpy, z = ActivityKind::kMemset;
  std::vector<KernelRecord> kineto = {
      rec("void at::native::vectorized_elementwise_kernel<4, F>(int, F)", 0, 10),
      rec("Memcpy DtoD (Device -> Device)", 10, 14, 7, -1, "", m),
      rec("Memcpy HtoD (Pinned -> Device)", 14, 20, 7, -1, "", m),
      rec("Memset (Device)", 20, 21, 7, -1, "", z)};
  for (const std::vector<std::string>& names :
       {std::vector<std::string>{"Memcpy DtoD", "Memcpy HtoD", "Memset"},
        std::vector<std::string>{"memcpy kind 8", "memcpy kind 1", "memset"}}) {
    std::vector<KernelRecord> cupti = {
        rec("void at::native::vectorized_elementwise_kernel<4, F>(int, F)", 0, 12),
        rec(names[0], 12, 15, 7, -1, "", m), rec(names[1], 15, 25, 7, -1, "", m),
        rec(names[2], 25, 27, 7, -1, "", z)};
    const KernelDiff d = diff_kernel_tables(build_kernel_table(kineto, {}), "trace",
                                            build_kernel_table(cupti, {}), "evidence");
    ASSERT_EQ(d.families.size(), 4u) << names[0];
    for (const DiffRow& r : d.families) {
      EXPECT_EQ(r.a_count, 1) << r.key;
      EXPECT_EQ(r.b_count, 1) << r.key;
    }
    EXPECT_EQ(d.families[0].key, "Memcpy HtoD");  // 6 -> 10 ns: moved most
    EXPECT_EQ(d.families[0].delta_ns(), 4);
  }
}

// Printed tables never show two different kernels under one name, and say what they leave out.
TEST(KernelTableTables, DistinctNamesAndWhatIsLeftOut) {
  const auto m = ActivityKind::kMemcpy;
  std::vector<KernelRecord> rs = {rec("void k<A<int> >(int)", 0, 30), rec("void k<A<float> >(int)", 30, 50),
                                  rec("nvjet_a", 50, 60), rec("Memcpy DtoD (Device -> Device)", 60, 100, 7, -1, "", m)};
  const KernelTable t = build_kernel_table(rs, {h200()});
  ASSERT_EQ(short_kernel_name(rs[0].name), short_kernel_name(rs[1].name));  // the trap itself
  std::string all;
  for (const Table& x : kernel_table_tables(t, 2)) all += x.render();
  const std::string a = short_kernel_name(rs[0].name);
  // Sorted by time: memcpy (40), k<int> (30), k<float> (20): with top 2 only one k is printed,
  // so no suffix is needed; with every row, both carry their place in kernels[].
  EXPECT_NE(all.find("left out: the other 2 kernel name(s)"), std::string::npos) << all;
  std::string every;
  for (const Table& x : kernel_table_tables(t, 0)) every += x.render();
  EXPECT_NE(every.find(a + " [kernels[1]]"), std::string::npos) << every;
  EXPECT_NE(every.find(a + " [kernels[2]]"), std::string::npos) << every;
  EXPECT_EQ(every.find("nvjet_a ["), std::string::npos);
  // The architecture table leaves the memcpy out and says so, with what its shares add to.
  EXPECT_NE(every.find("left out: memcpy/memset rows (1 calls"), std::string::npos) << every;
  EXPECT_NE(every.find("add up to 60.0 %"), std::string::npos) << every;
  // The category table names the categories it does not list.
  EXPECT_NE(every.find("no rows, not listed: attention"), std::string::npos) << every;
}

}  // namespace
}  // namespace tprobe::core

namespace tprobe::core {
namespace {

// The kernels command's rows declared in core/evidence/kernel_trace.hpp: docs/kernels.md holds
// their field lists as the tables give them, and a row read back writes what was read.
TEST(KernelTraceFields, DocsListAndRoundTrip) {
  std::ifstream in(std::string(TPROBE_FIXTURES_DIR) + "/../../docs/kernels.md");
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(doc.empty());
  for (const auto& docs :
       {evidence::field_docs<BusyTotals>("kernel_table.totals."),
        evidence::field_docs<OverlapFigures>("kernel_table.devices[]."),
        evidence::field_docs<RankRow>("rank_summary[]."), evidence::field_docs<PartCells>(),
        evidence::field_docs<PartRow>("by_phase_part[]."),
        evidence::field_docs<LayerRow>("by_layer[]."),
        evidence::field_docs<DoubleCount>("trace.key_averages_trap.")}) {
    ASSERT_FALSE(docs.empty());
    for (const evidence::FieldDoc& d : docs) {
      const std::string row = evidence::field_rows({d});
      EXPECT_NE(doc.find(row), std::string::npos) << "docs/kernels.md lacks the row:\n" << row;
    }
  }
  PartRow r;
  r.phase = "forward";
  r.kernel_ns = 1500;
  r.span_share_ratio = 0.25;
  const Json j = evidence::to_json(r);
  EXPECT_EQ(evidence::to_json(evidence::from_json<PartRow>(j, "r")), j);
  EXPECT_TRUE(j["kernel_share_ratio"].is_null());
  // Refused: a time that is not one (negative, past 1e6 s), a derived trap figure that disagrees.
  for (const double bad : {-1.0, 2e6}) {
    Json x = j;
    x["kernel_s"] = bad;
    EXPECT_THROW(evidence::from_json<PartRow>(x, "r"), Error) << bad;
  }
  DoubleCount d;
  d.device_rows_ns = 10;
  d.host_attributed_ns = 8;
  Json t = evidence::to_json(d);
  EXPECT_EQ(evidence::to_json(evidence::from_json<DoubleCount>(t, "t")), t);
  t["op_and_kernel_ns"] = 17;
  EXPECT_THROW(evidence::from_json<DoubleCount>(t, "t"), Error);
}

// The kernel table declared in core/evidence/kernel_table.hpp: read back it writes what was read
// (other_devices absent where none were folded, present where some were); a field missing or of
// the wrong type is one line naming its path; its key and its rows' paths are declared fields.
TEST(KernelTableFields, RoundTripBrokenInputAndDeclaredPaths) {
  std::vector<KernelRecord> r = {rec("fmha_cutlassF_sm80", 0, 300, 7, 1, "forward"),
                                 rec("nvjet_tst_128x256", 300, 400, 7, 2, ""),
                                 rec("Memset (Device)", 400, 410, 7, 2, "", ActivityKind::kMemset)};
  const Json j = to_json(build_kernel_table(r, {h200()}));
  ASSERT_FALSE(j.contains("other_devices"));
  EXPECT_EQ(j["kernels"][1]["phase_ns"].begin().key(), "unknown");
  EXPECT_EQ(to_json(kernel_table_from_json(j, "k")).dump(), j.dump());  // negative control
  KernelTable folded = kernel_table_from_json(j, "k");
  folded.other_devices = 2;
  folded.other_device.totals.events = 5;
  const Json fj = to_json(folded);
  EXPECT_EQ(fj["other_devices"]["devices"], 2);
  EXPECT_EQ(to_json(kernel_table_from_json(fj, "k")).dump(), fj.dump());
  const std::pair<std::function<void(Json&)>, const char*> broken[] = {
      {[](Json& x) { x["kernels"][0]["category"] = "teleport"; }, "k.kernels[0]: field 'category'"},
      {[](Json& x) { x["kernels"][0]["phase_ns"]["forward"] = "x"; }, "k.kernels[0].phase_ns.forward"},
      {[](Json& x) { x["devices"][0].erase("sum_ns"); }, "k.devices[0]: missing field 'sum_ns'"},
      {[](Json& x) { x["kernels"][1]["count"] = 0; }, "k.kernels[1]: field 'count'"},
      {[](Json& x) { x["selection"] = 1; }, "k.selection: must be an object"},
      {[](Json& x) { x["architecture"]["by_target"][0]["sm"] = 9.5; }, "k.architecture.by_target[0]: field 'sm'"},
      {[](Json& x) { x["phases"][0].erase("share_ratio"); }, "k.phases[0]: missing field 'share_ratio'"},
      {[](Json& x) { x["other_devices"] = {{"devices", 1}}; }, "k.other_devices: missing field 'events'"},
  };
  for (const auto& [edit, names] : broken) {
    Json x = j;
    edit(x);
    std::string e = "no error";
    try {
      kernel_table_from_json(x, "k");
    } catch (const Error& err) {
      e = err.what();
    }
    EXPECT_NE(e.find(names), std::string::npos) << names << ": " << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  std::set<std::string> paths;
  for (const evidence::FieldDoc& d : evidence::declared_fields()) paths.insert(d.path);
  for (const char* p : {"kernel_table", "kernel_table.devices[].sum_ns", "kernel_table.devices[].device",
                        "kernel_table.kernels[].phase_ns", "kernel_table.kernels[].architecture_sm",
                        "kernel_table.architecture.by_target[].sm", "kernel_table.other_devices"})
    EXPECT_TRUE(paths.count(p)) << p;
}

}  // namespace
}  // namespace tprobe::core
