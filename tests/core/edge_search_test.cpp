// The measured memory edge's search (core/cost/edge_search) on a scripted OOM threshold: the edge
// and the step past it are the threshold's, from any prediction, in a logarithmic number of probes;
// a probe that fits its first step only is not an edge; the rounds and the JSON reader.
#include "tprobe/core/cost/edge_search.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "tprobe/core/base/error.hpp"

namespace tprobe::core {
namespace {

// A fake device: a point fits when its tokens are at most `limit(steps)` (the steps the probe
// runs: a noisy device fits more at one step than at three).
using Limit = std::function<int64_t(int64_t steps)>;

EdgeSearchProbe run_fake(int64_t batch, int64_t width, int64_t steps, const Limit& limit) {
  EdgeSearchProbe p;
  p.batch = batch;
  p.width = width;
  p.steps = steps;
  p.outcome = batch * width <= limit(steps) ? "fits" : "oom";
  p.peak_reserved_bytes = batch * width;
  p.wall_s = 0.1;
  return p;
}

EdgeSearchResult search(EdgeSearchRequest r, const Limit& limit) {
  EdgeSearch s(r);
  while (const auto p = s.next()) s.record(run_fake(p->first, p->second, r.steps, limit));
  return s.result();
}

EdgeSearchRequest width_request(int64_t predicted_steps, int64_t max_steps = 64) {
  EdgeSearchRequest r;
  r.axis = "width";
  r.batch = 2;
  r.step = 1024;
  r.max_value = max_steps * 1024;
  r.predicted = predicted_steps * 1024;
  r.start = predicted_steps * 1024;
  r.budget_bytes = 72.0 * (1 << 30);
  return r;
}

Limit fixed(int64_t tokens) {
  return [tokens](int64_t) { return tokens; };
}

TEST(EdgeSearch, ExactPredictionTakesTwoProbes) {
  // Batch 2 fits 8 steps of width (2 x 8192 tokens) and not 9.
  const EdgeSearchResult r = search(width_request(8), fixed(2 * 8 * 1024 + 100));
  EXPECT_EQ(r.status, "found");
  EXPECT_EQ(r.edge, 8 * 1024);
  EXPECT_EQ(r.past, 9 * 1024);
  ASSERT_TRUE(r.error_steps);
  EXPECT_EQ(*r.error_steps, 0);
  EXPECT_EQ(r.probes.size(), 2u);
  EXPECT_EQ(r.probes[0].width, 8 * 1024);
  EXPECT_EQ(r.probes[0].outcome, "fits");
  EXPECT_EQ(r.probes[1].outcome, "oom");
}

TEST(EdgeSearch, PredictionTooHighOrTooLowIsFoundAndItsErrorSaid) {
  const Limit at8 = fixed(2 * 8 * 1024);
  const EdgeSearchResult over = search(width_request(12), at8);
  EXPECT_EQ(over.status, "found");
  EXPECT_EQ(over.edge, 8 * 1024);
  EXPECT_EQ(over.past, 9 * 1024);
  EXPECT_EQ(*over.error_steps, 4);  // the model overshot by 4 steps
  const EdgeSearchResult under = search(width_request(3), at8);
  EXPECT_EQ(under.status, "found");
  EXPECT_EQ(under.edge, 8 * 1024);
  EXPECT_EQ(under.past, 9 * 1024);
  EXPECT_EQ(*under.error_steps, -5);  // conservative by 5
}

TEST(EdgeSearch, EveryThresholdFromEveryPredictionInFewProbes) {
  // 64 steps: every threshold (0 = nothing fits .. 64 = the bound fits) from every start.
  for (int64_t t = 0; t <= 64; ++t) {
    for (int64_t pred = 1; pred <= 64; ++pred) {
      const EdgeSearchResult r = search(width_request(pred), fixed(2 * t * 1024));
      SCOPED_TRACE(testing::Message() << "threshold " << t << " prediction " << pred);
      ASSERT_EQ(r.edge, t * 1024);
      if (t == 0) {
        EXPECT_EQ(r.status, "nothing_fits");
        EXPECT_EQ(r.past, 1024);
      } else if (t == 64) {
        EXPECT_EQ(r.status, "at_bound");
        EXPECT_EQ(r.past, 0);
        EXPECT_FALSE(r.error_steps);
      } else {
        EXPECT_EQ(r.status, "found");
        EXPECT_EQ(r.past, (t + 1) * 1024);
        EXPECT_EQ(*r.error_steps, pred - t);
      }
      // Gallop (log2 of the distance + 1) then bisection (log2 of the bracket): 2·6 + 2 at most.
      EXPECT_LE(r.probes.size(), 14u);
      for (const auto& p : r.probes) EXPECT_EQ(p.steps, kEdgeSearchSteps);
    }
  }
}

TEST(EdgeSearch, ProbeCountIsLogarithmicInTheRange) {
  // The worst start (the first step) and the threshold at the far end of 2^6 and 2^12 steps.
  auto count = [](int64_t range) {
    EdgeSearchRequest r = width_request(1, range);
    r.max_probes = 1000;
    const EdgeSearchResult s = search(r, fixed(2 * (range - 1) * 1024));
    EXPECT_EQ(s.status, "found");
    EXPECT_EQ(s.edge, (range - 1) * 1024);
    return static_cast<int64_t>(s.probes.size());
  };
  const int64_t small = count(64), large = count(4096);
  EXPECT_LE(small, 2 * 6 + 2);
  EXPECT_LE(large, 2 * 12 + 2);
  // 64 times the range costs about 2·6 more probes, not 64 times as many.
  EXPECT_LE(large - small, 2 * 6 + 2);
  EXPECT_GT(large, small);
}

TEST(EdgeSearch, AnEdgeThatFitsOnlyTheFirstStepIsNotAccepted) {
  // Noisy: 10 steps of width fit one step, only 8 fit three (fragmentation by step 3).
  const Limit noisy = [](int64_t steps) { return 2 * (steps >= 3 ? 8 : 10) * 1024; };
  const EdgeSearchResult r = search(width_request(10), noisy);
  EXPECT_EQ(r.status, "found");
  EXPECT_EQ(r.edge, 8 * 1024);
  EXPECT_EQ(r.past, 9 * 1024);
  EXPECT_EQ(*r.error_steps, 2);
  // Negative control: the same device probed one step at a time answers 10.
  EdgeSearchRequest one = width_request(10);
  one.steps = 1;
  EXPECT_EQ(search(one, noisy).edge, 10 * 1024);
}

TEST(EdgeSearch, NothingFitsAndTheBoundAreSaid) {
  const EdgeSearchResult none = search(width_request(4), fixed(100));
  EXPECT_EQ(none.status, "nothing_fits");
  EXPECT_EQ(none.edge, 0);
  EXPECT_EQ(none.past, 1024);
  EXPECT_EQ(*none.error_steps, 4);
  EXPECT_NE(none.note.find("nothing fits"), std::string::npos);
  const EdgeSearchResult bound = search(width_request(60), fixed(int64_t{1} << 40));
  EXPECT_EQ(bound.status, "at_bound");
  EXPECT_EQ(bound.edge, 64 * 1024);
  EXPECT_EQ(bound.past, 0);
  EXPECT_NE(bound.note.find("at least"), std::string::npos);
}

TEST(EdgeSearch, TheBatchAxis) {
  EdgeSearchRequest r;
  r.axis = "batch";
  r.width = 4096;
  r.step = 1;
  r.max_value = 1024;
  r.predicted = 5;
  r.start = 5;
  const EdgeSearchResult s = search(r, fixed(13 * 4096 + 5));
  EXPECT_EQ(s.status, "found");
  EXPECT_EQ(s.edge, 13);
  EXPECT_EQ(s.past, 14);
  EXPECT_EQ(*s.error_steps, -8);
  for (const auto& p : s.probes) EXPECT_EQ(p.width, 4096);
}

TEST(EdgeSearch, TheProbeBoundStopsItWithTheBracketSaid) {
  EdgeSearchRequest r = width_request(1, 1024);
  r.max_probes = 4;
  const EdgeSearchResult s = search(r, fixed(2 * 700 * 1024));
  EXPECT_EQ(s.status, "probe_bound");
  EXPECT_EQ(s.probes.size(), 4u);
  EXPECT_EQ(s.edge, 5 * 1024);  // 1, 2, 3, 5 fitted
  EXPECT_EQ(s.past, 0);
  EXPECT_NE(s.note.find("probe bound hit"), std::string::npos);
  EXPECT_FALSE(s.error_steps);
}

TEST(EdgeSearch, AnErrorEndsItAndAProbeNotAskedForIsRefused) {
  EdgeSearch s(width_request(8));
  EdgeSearchProbe p;
  p.batch = 2;
  p.width = 9 * 1024;
  EXPECT_THROW(s.record(p), Error);  // 8 steps was asked for
  p.width = 8 * 1024;
  p.outcome = "exploded";
  EXPECT_THROW(s.record(p), Error);
  p.outcome = "error";
  p.message = "cuBLAS refused";
  s.record(p);
  EXPECT_TRUE(s.done());
  EXPECT_EQ(s.result().status, "error");
  EXPECT_NE(s.result().note.find("cuBLAS refused"), std::string::npos);
  EXPECT_FALSE(s.next());
}

TEST(EdgeSearch, BrokenRequestsAreRefused) {
  EdgeSearchRequest r = width_request(8);
  r.axis = "tokens";
  EXPECT_THROW(EdgeSearch{r}, UsageError);
  r = width_request(8);
  r.max_value = 1000;  // not a multiple of 1024
  EXPECT_THROW(EdgeSearch{r}, UsageError);
  r = width_request(8);
  r.steps = 0;
  EXPECT_THROW(EdgeSearch{r}, UsageError);
  // Negative control: the request above, unbroken, and a start past the bound clamped to it.
  r = width_request(8);
  r.start = int64_t{1} << 21;
  EdgeSearch ok(r);
  EXPECT_EQ(ok.next()->second, 64 * 1024);
}

TEST(EdgeSearchRounds, OneProbePerSearchPerRoundGroupedByCap) {
  EdgeSearchRounds rounds;
  const int64_t cap_a = 100, cap_b = 50;
  rounds.add(EdgeSearch(width_request(8)), cap_a);
  EdgeSearchRequest b = width_request(2);
  b.axis = "batch";
  b.width = 1024;
  b.step = 1;
  b.max_value = 64;
  b.start = 2;
  rounds.add(EdgeSearch(b), cap_a);
  rounds.add(EdgeSearch(width_request(8)), cap_b);
  // The cap is the device: under cap_a 2 x 8192 tokens fit, under cap_b 2 x 4096.
  int calls = 0;
  run_edge_rounds(rounds, [&](const EdgeRoundGroup& g) {
    ++calls;
    std::vector<EdgeSearchProbe> out;
    int64_t last = 0;
    for (const auto& p : g.points) {
      EXPECT_GE(p.batch * p.width, last);  // smallest first
      last = p.batch * p.width;
      out.push_back(run_fake(p.batch, p.width, g.steps, fixed(g.cap_bytes == cap_a ? 16384 : 8192)));
    }
    return out;
  });
  const auto res = rounds.results();
  ASSERT_EQ(res.size(), 3u);
  EXPECT_EQ(res[0].edge, 8 * 1024);
  EXPECT_EQ(res[1].edge, 16);
  EXPECT_EQ(res[2].edge, 4 * 1024);
  for (const auto& r : res) EXPECT_EQ(r.status, "found");
  EXPECT_GT(calls, 2);
  EXPECT_TRUE(rounds.next_round().empty());
}

TEST(EdgeSearchRounds, AShortRoundStopsTheSearchesItLeftOut) {
  EdgeSearchRounds rounds;
  rounds.add(EdgeSearch(width_request(8)), 100);
  rounds.add(EdgeSearch(width_request(4)), 100);
  const auto g = rounds.next_round();
  ASSERT_EQ(g.size(), 1u);
  ASSERT_EQ(g[0].points.size(), 2u);
  EXPECT_THROW(rounds.next_round(), Error);  // the round is out
  const auto& first = g[0].points[0];        // 2 x 4096: the smaller
  EXPECT_EQ(first.width, 4 * 1024);
  rounds.record_round({{run_fake(first.batch, first.width, 3, fixed(1 << 30))}});
  EXPECT_EQ(rounds.searches()[0].result().status, "stopped");
  EXPECT_FALSE(rounds.searches()[1].done());
  rounds.stop_all();
  EXPECT_EQ(rounds.searches()[1].result().status, "stopped");
  EXPECT_EQ(rounds.searches()[1].result().edge, 4 * 1024);
}

TEST(EdgeSearchJson, RoundTripsAndReplaysItsProbes) {
  const EdgeSearchResult r = search(width_request(3), fixed(2 * 8 * 1024));
  const Json j = to_json(r);
  EXPECT_EQ(to_json(edge_search_result_from_json(j, "s")), j);
  EXPECT_EQ(edge_probe_line(r, 0).find("edge search under"), 0u);
  Json bad = j;
  bad["edge"] = 9 * 1024;  // not what the probes say
  EXPECT_THROW(edge_search_result_from_json(bad, "s"), Error);
  bad = j;
  bad["probes"][0]["outcome"] = "oom";  // then the search would have asked for another probe next
  EXPECT_THROW(edge_search_result_from_json(bad, "s"), Error);
  bad = j;
  bad["step"] = 0;
  EXPECT_THROW(edge_search_result_from_json(bad, "s"), Error);
  bad = j;
  bad["probes"].erase(bad["probes"].size() - 1);  // then it stopped, and says found
  EXPECT_THROW(edge_search_result_from_json(bad, "s"), Error);
  // A stopped search reads back as stopped.
  EdgeSearch s(width_request(3));
  s.stop();
  EXPECT_EQ(to_json(edge_search_result_from_json(to_json(s.result()), "s")), to_json(s.result()));
}

}  // namespace
}  // namespace tprobe::core
