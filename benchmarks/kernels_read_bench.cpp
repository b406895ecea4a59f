// Benchmark (not a test): what `tprobe kernels TRACE` computes — the trace read with its module
// attribution, the tables and the results JSON — in-process, without the CLI and the evidence
// envelope. usage: tprobe_kernels_read_bench TRACE [MODEL] [--parts off]
// MODEL: an embedded model name for the layer kinds (as --model); --parts off as kernels' own. The read overhead of the module
// attribution (benchmarks/kernels_parts_overhead.py) runs it; results go to docs/benchmarks.md.
#include <chrono>
#include <cstdio>
#include <string>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/gemma4/model_config.hpp"
#include "tprobe/core/trace/compare/kernels.hpp"

int main(int argc, char** argv) {
  using namespace tprobe::core;
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s TRACE [MODEL]\n", argv[0]);
    return 2;
  }
  try {
    const auto t0 = std::chrono::steady_clock::now();
    KernelsRequest q;
    q.inputs = {argv[1]};
    std::string model;
    for (int i = 2; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--parts" && i + 1 < argc) {
        q.parts.attribute = std::string(argv[++i]) != "off";
      } else {
        model = a;
      }
    }
    if (!model.empty()) {
      const ModelConfig config = embedded_model(model);
      q.parts.model = model;
      for (int64_t i = 0; i < config.num_layers; ++i) {
        q.parts.layer_types.push_back(config.layer(i).type);
      }
    }
    const KernelsReport r = analyze_kernels(q);
    std::size_t text = 0;
    for (const Table& t : kernels_tables(r, 3)) text += t.render().size();
    const std::string json = to_json(r).dump();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const TraceParts& p = r.sources.at(0).trace.parts;
    std::printf("%s: %.3f s, %lld device rows, module events %s, %lld attributed, %lld untagged, "
                "%zu + %zu bytes of text and JSON\n",
                argv[1], s, static_cast<long long>(p.counts.rows), p.module_events ? "yes" : "no",
                static_cast<long long>(p.counts.attributed),
                static_cast<long long>(p.counts.untagged), text, json.size());
  } catch (const tprobe::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
