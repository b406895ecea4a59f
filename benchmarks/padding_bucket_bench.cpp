// Benchmark (not a test): load + padding, and a bucket sweep, in-process, without the libtorch
// start-up the tprobe binary pays. usage: tprobe_padding_bench DATASET [SWEEP_SEEDS]
// DATASET is anything --dataset accepts (a file, synthetic:N). Results go to docs/benchmarks.md.
#include <chrono>
#include <cstdio>
#include <string>

#include "tprobe/core/data/bucket_report.hpp"
#include "tprobe/core/base/error.hpp"
#include "tprobe/core/data/padding_report.hpp"

namespace {
double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

int main(int argc, char** argv) {
  using namespace tprobe::core;
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DATASET [SEEDS]\n", argv[0]);
    return 2;
  }
  try {
    auto t0 = std::chrono::steady_clock::now();
    LengthDataset ds = load_dataset(argv[1]);
    const double load_s = since(t0);
    t0 = std::chrono::steady_clock::now();
    PaddingReport p = analyze_padding(ds, PaddingOptions{});
    std::string pj = to_json(p).dump();
    const double padding_s = since(t0);
    BucketOptions o;
    o.seeds = argc > 2 ? std::stoll(argv[2]) : 3;
    o.cost = parse_cost("6.8715e-4,8.8509e-8");
    t0 = std::chrono::steady_clock::now();
    BucketReport b = analyze_bucket(ds, o);
    std::string bj = to_json(b).dump();
    const double bucket_s = since(t0);
    std::printf("records %zu  load %.3f s  padding %.3f s (waste %.4f)  bucket sweep %zu sizes x "
                "%lld seeds %.3f s (bucket %lld waste %.4f)  json %zu+%zu bytes\n",
                ds.records(), load_s, padding_s, p.waste_ratio, b.sweep.size(),
                static_cast<long long>(o.seeds), bucket_s,
                static_cast<long long>(b.chosen_bucket), b.chosen.waste_ratio, pj.size(),
                bj.size());
  } catch (const tprobe::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
