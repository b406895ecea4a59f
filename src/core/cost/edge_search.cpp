// The measured memory edge: exponential bracketing from the model's prediction, then bisection to
// the step; several searches in rounds grouped by cap; the JSON view and its replaying reader.
#include "tprobe/core/cost/edge_search.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/json_read.hpp"
#include "tprobe/core/base/table.hpp"

namespace tprobe::core {
namespace {

int64_t value_of(const EdgeSearchRequest& r, int64_t batch, int64_t width) {
  return r.axis == "width" ? width : batch;
}

std::pair<int64_t, int64_t> point_at(const EdgeSearchRequest& r, int64_t k) {
  return r.axis == "width" ? std::pair<int64_t, int64_t>{r.batch, k * r.step}
                           : std::pair<int64_t, int64_t>{k * r.step, r.width};
}

// 2^n, saturated (n counts probes, so it stays small; the caller clamps to the bound).
int64_t pow2(int64_t n) { return n >= 62 ? int64_t{1} << 62 : int64_t{1} << n; }

}  // namespace

EdgeSearch::EdgeSearch(EdgeSearchRequest r) {
  if (r.axis != "width" && r.axis != "batch")
    fail_usage("edge search: axis '{}': expected width or batch", r.axis);
  if (r.step < 1 || r.step > kEdgeSearchMaxValue)
    fail_usage("edge search: step {}: must be 1..{}", r.step, kEdgeSearchMaxValue);
  if (r.max_value < r.step || r.max_value > kEdgeSearchMaxValue || r.max_value % r.step != 0)
    fail_usage("edge search: bound {}: must be a multiple of the step {} in {}..{}", r.max_value,
               r.step, r.step, kEdgeSearchMaxValue);
  if (r.batch < 1 || r.batch > kEdgeSearchMaxValue || r.width < 1 || r.width > kEdgeSearchMaxValue)
    fail_usage("edge search: fixed shape {}x{}: must be 1..{} each", r.batch, r.width,
               kEdgeSearchMaxValue);
  if (r.steps < 1 || r.steps > 1000) fail_usage("edge search: steps {}: must be 1..1000", r.steps);
  if (r.max_probes < 1 || r.max_probes > 1000)
    fail_usage("edge search: max_probes {}: must be 1..1000", r.max_probes);
  if (r.predicted && (*r.predicted < 0 || *r.predicted > kEdgeSearchMaxValue))
    fail_usage("edge search: predicted edge {}: must be 0..{}", *r.predicted, kEdgeSearchMaxValue);
  if (!(r.budget_bytes >= 0)) fail_usage("edge search: budget {}: must be >= 0", r.budget_bytes);
  kmax_ = r.max_value / r.step;
  k0_ = std::clamp<int64_t>(r.start / r.step, 1, kmax_);
  r.start = k0_ * r.step;
  lo_ = 0;
  hi_ = kmax_ + 1;
  result_.request = std::move(r);
}

bool EdgeSearch::done() const { return done_; }

std::optional<std::pair<int64_t, int64_t>> EdgeSearch::next() const {
  if (done_) return std::nullopt;
  const EdgeSearchRequest& r = result_.request;
  int64_t k = 0;
  if (result_.probes.empty()) {
    k = k0_;
  } else if (hi_ == kmax_ + 1) {
    k = std::min(kmax_, k0_ + pow2(up_));  // every probe fitted: gallop up from the prediction
  } else if (lo_ == 0) {
    k = std::max<int64_t>(1, k0_ - pow2(down_));  // every probe failed: gallop down
  } else {
    k = lo_ + (hi_ - lo_) / 2;  // bracketed: bisect
  }
  return point_at(r, k);
}

void EdgeSearch::record(const EdgeSearchProbe& p) {
  const auto want = next();
  if (!want) fail("edge search: a probe {}x{} after the search was done", p.batch, p.width);
  if (want->first != p.batch || want->second != p.width)
    fail("edge search: probe {}x{} is not the one asked for ({}x{})", p.batch, p.width,
         want->first, want->second);
  if (p.outcome != "fits" && p.outcome != "oom" && p.outcome != "error")
    fail("edge search: outcome '{}': expected fits, oom or error", p.outcome);
  const EdgeSearchRequest& r = result_.request;
  const int64_t k = value_of(r, p.batch, p.width) / r.step;
  const bool first = result_.probes.empty();
  result_.probes.push_back(p);
  if (p.outcome == "error") {
    result_.status = "error";
    done_ = true;
    finish();
    return;
  }
  if (p.outcome == "fits") {
    lo_ = std::max(lo_, k);
    if (!first && hi_ == kmax_ + 1) ++up_;
  } else {
    hi_ = std::min(hi_, k);
    if (!first && lo_ == 0) ++down_;
  }
  if (hi_ == lo_ + 1 || lo_ == kmax_ || probes_run() >= r.max_probes) {
    done_ = true;
    if (lo_ == kmax_) {
      result_.status = "at_bound";  // hi_ is past the bound: never run
    } else if (hi_ == lo_ + 1) {
      result_.status = lo_ == 0 ? "nothing_fits" : "found";
    } else {
      result_.status = "probe_bound";
    }
  }
  finish();
}

void EdgeSearch::stop() {
  if (done_) return;
  done_ = true;
  result_.status = "stopped";
  finish();
}

void EdgeSearch::finish() {
  const EdgeSearchRequest& r = result_.request;
  result_.edge = lo_ * r.step;
  result_.past = hi_ <= kmax_ ? hi_ * r.step : 0;
  result_.error_steps.reset();
  const std::string axis = r.axis == "width" ? fmt::format("width at batch {}", r.batch)
                                             : fmt::format("batch at width {}", r.width);
  const std::string& s = result_.status;
  if (!done_) {
    result_.note = "searching";
    return;
  }
  if ((s == "found" || s == "nothing_fits") && r.predicted) {
    result_.error_steps = (*r.predicted - result_.edge) / r.step;
  }
  if (s == "found") {
    result_.note = fmt::format("largest {}: {} runs {} steps under the cap, {} runs out of memory",
                               axis, result_.edge, r.steps, result_.past);
  } else if (s == "nothing_fits") {
    result_.note = fmt::format("nothing fits: the smallest {} ({}) runs out of memory under the cap",
                               axis, result_.past);
  } else if (s == "at_bound") {
    result_.note = fmt::format("the search's bound fits: {} {} runs under the cap (the edge is at "
                               "least this; nothing past the bound was run)",
                               axis, result_.edge);
  } else if (s == "probe_bound") {
    result_.note = fmt::format(
        "probe bound hit: {} probes ran before the step was found; the {} edge is in [{}, {})",
        r.max_probes, axis, result_.edge, result_.past == 0 ? r.max_value + r.step : result_.past);
  } else if (s == "error") {
    result_.note = "a probe failed (not by running out of memory): " +
                   result_.probes.back().message.substr(0, 300);
  } else {
    result_.note = "the run stopped before the search was done";
  }
}

std::size_t EdgeSearchRounds::add(EdgeSearch search, int64_t cap_bytes) {
  if (!pending_.empty()) fail("edge search rounds: a search added while a round is out");
  searches_.push_back(std::move(search));
  caps_.push_back(cap_bytes);
  return searches_.size() - 1;
}

std::vector<EdgeRoundGroup> EdgeSearchRounds::next_round() {
  if (!pending_.empty()) fail("edge search rounds: the last round was not recorded");
  std::vector<EdgeRoundGroup> groups;
  for (std::size_t i = 0; i < searches_.size(); ++i) {
    const auto p = searches_[i].next();
    if (!p) continue;
    const int64_t steps = searches_[i].result().request.steps;
    auto g = std::find_if(groups.begin(), groups.end(), [&](const EdgeRoundGroup& x) {
      return x.cap_bytes == caps_[i] && x.steps == steps;
    });
    if (g == groups.end()) {
      groups.push_back({caps_[i], steps, {}});
      g = groups.end() - 1;
    }
    g->points.push_back({i, p->first, p->second});
  }
  for (EdgeRoundGroup& g : groups) {
    std::stable_sort(g.points.begin(), g.points.end(),
                     [](const EdgeRoundPoint& a, const EdgeRoundPoint& b) {
                       return a.batch * a.width < b.batch * b.width;
                     });
  }
  pending_ = groups;
  return groups;
}

void EdgeSearchRounds::record_round(const std::vector<std::vector<EdgeSearchProbe>>& outcomes) {
  if (outcomes.size() > pending_.size())
    fail("edge search rounds: {} groups of outcomes for {} asked", outcomes.size(), pending_.size());
  std::vector<EdgeRoundGroup> round = std::move(pending_);
  pending_.clear();
  for (std::size_t g = 0; g < round.size(); ++g) {
    const auto& pts = round[g].points;
    const std::size_t got = g < outcomes.size() ? outcomes[g].size() : 0;
    if (got > pts.size())
      fail("edge search rounds: {} outcomes for a group of {} points", got, pts.size());
    for (std::size_t i = 0; i < pts.size(); ++i) {
      if (i < got) {
        searches_[pts[i].search].record(outcomes[g][i]);
      } else {
        searches_[pts[i].search].stop();
      }
    }
  }
}

void EdgeSearchRounds::stop_all() {
  pending_.clear();
  for (EdgeSearch& s : searches_) s.stop();
}

std::vector<EdgeSearchResult> EdgeSearchRounds::results() const {
  std::vector<EdgeSearchResult> out;
  for (const EdgeSearch& s : searches_) out.push_back(s.result());
  return out;
}

void run_edge_rounds(EdgeSearchRounds& rounds, const EdgeGroupRunner& run, int max_rounds) {
  for (int i = 0; i < max_rounds; ++i) {
    const std::vector<EdgeRoundGroup> groups = rounds.next_round();
    if (groups.empty()) return;
    std::vector<std::vector<EdgeSearchProbe>> outcomes;
    for (const EdgeRoundGroup& g : groups) outcomes.push_back(run(g));
    rounds.record_round(outcomes);
  }
  rounds.stop_all();
}

std::string edge_probe_line(const EdgeSearchResult& s, std::size_t i) {
  const EdgeSearchRequest& r = s.request;
  const EdgeSearchProbe& p = s.probes.at(i);
  std::string peak;
  if (p.peak_reserved_bytes) peak = fmt::format(", {} reserved", format_bytes(static_cast<double>(*p.peak_reserved_bytes)));
  return fmt::format("edge search under {}: {} {}: probe {}: {}x{} {}{}, {:.2f} s",
                     format_bytes(r.budget_bytes), r.axis,
                     r.axis == "width" ? fmt::format("at batch {}", r.batch)
                                       : fmt::format("at width {}", r.width),
                     i + 1, p.batch, p.width, p.outcome == "fits" ? "fits" : p.outcome == "oom" ? "OOM" : "error",
                     peak, p.wall_s);
}

namespace {

Json opt(const std::optional<int64_t>& v) { return v ? Json(*v) : Json(nullptr); }

}  // namespace

Json to_json(const EdgeSearchResult& s) {
  const EdgeSearchRequest& r = s.request;
  return Json{{"axis", r.axis},
              {"batch", r.batch},
              {"width", r.width},
              {"step", r.step},
              {"max_value", r.max_value},
              {"start", r.start},
              {"predicted", opt(r.predicted)},
              {"budget_bytes", r.budget_bytes},
              {"steps", r.steps},
              {"max_probes", r.max_probes},
              {"status", s.status},
              {"edge", s.edge},
              {"past", s.past},
              {"error_steps", opt(s.error_steps)},
              {"note", s.note},
              {"probes", evidence::to_json(s.probes)}};
}

EdgeSearchResult edge_search_result_from_json(const Json& j, const std::string& where) {
  namespace jr = json_read;
  if (!j.is_object()) fail("{} must be an object", where);
  EdgeSearchRequest r;
  r.axis = jr::choice(j, "axis", where, {"width", "batch"}) == 0 ? "width" : "batch";
  r.batch = jr::integer(j, "batch", where, 1, kEdgeSearchMaxValue);
  r.width = jr::integer(j, "width", where, 1, kEdgeSearchMaxValue);
  r.step = jr::integer(j, "step", where, 1, kEdgeSearchMaxValue);
  r.max_value = jr::integer(j, "max_value", where, 1, kEdgeSearchMaxValue);
  r.start = jr::integer(j, "start", where, 1, kEdgeSearchMaxValue);
  r.predicted = jr::nullable_integer(j, "predicted", where, 0, kEdgeSearchMaxValue);
  r.budget_bytes = jr::number(j, "budget_bytes", where);
  r.steps = jr::integer(j, "steps", where, 1, 1000);
  r.max_probes = jr::integer(j, "max_probes", where, 1, 1000);
  EdgeSearch search = [&] {
    try {
      return EdgeSearch(r);
    } catch (const UsageError& e) {
      fail("{}: {}", where, e.what());
    }
  }();
  const Json& probes = jr::array(j, "probes", where);
  for (std::size_t i = 0; i < probes.size(); ++i) {
    const std::string pw = jr::at(where, "probes", i);
    const auto p = evidence::from_json<EdgeSearchProbe>(probes[i], pw);
    if (p.wall_s < 0) fail("{}: field 'wall_s' is negative", pw);
    try {
      search.record(p);
    } catch (const Error& e) {
      fail("{}: not the search's probe: {}", pw, e.what());
    }
  }
  if (!search.done()) search.stop();
  const EdgeSearchResult& got = search.result();
  jr::check_rewritten(j, to_json(got), where);
  return got;
}

}  // namespace tprobe::core
