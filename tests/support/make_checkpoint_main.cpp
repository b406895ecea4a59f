// tprobe_make_checkpoint: writes a synthetic checkpoint (real Gemma-4 names, sparse zero data)
// for benchmarks and manual runs of `tprobe inspect --checkpoint`.
#include <cstdlib>
#include <iostream>
#include <string>

#include "synthetic_checkpoint.hpp"
#include "tprobe/core/base/error.hpp"

int main(int argc, char** argv) {
  using tprobe::testing_support::SyntheticOptions;
  std::string dir, model = "gemma4-26b-a4b";
  SyntheticOptions opt;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--model" && i + 1 < argc) {
      model = argv[++i];
    } else if (a == "--shards" && i + 1 < argc) {
      opt.shards = std::atoi(argv[++i]);
    } else if (a == "--vision") {
      opt.vision_tower = true;
    } else if (a == "--text-only") {
      opt.multimodal = false;
    } else if (a == "--per-layer-config") {
      opt.form = tprobe::core::ConfigJsonForm::kMultimodalPerLayer;
    } else if (a == "--fill") {
      opt.fill = true;
    } else if (!a.empty() && a[0] != '-' && dir.empty()) {
      dir = a;
    } else {
      std::cerr << "usage: tprobe_make_checkpoint DIR [--model NAME] [--shards N] [--vision] "
                   "[--text-only] [--per-layer-config] [--fill]\n";
      return 2;
    }
  }
  if (dir.empty() || opt.shards < 1) {
    std::cerr << "usage: tprobe_make_checkpoint DIR [--model NAME] [--shards N] [--vision] "
                 "[--text-only] [--per-layer-config] [--fill]\n";
    return 2;
  }
  try {
    tprobe::testing_support::write_synthetic_checkpoint(dir, tprobe::core::embedded_model(model),
                                                        opt);
  } catch (const tprobe::Error& e) {
    std::cerr << "tprobe_make_checkpoint: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
