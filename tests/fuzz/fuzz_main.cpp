// One libFuzzer target: TPROBE_FUZZ_ENTRY names the reader entry point (fuzz_entries.hpp).
#include <cstddef>
#include <cstdint>

#include "fuzz_entries.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  tprobe::fuzz::TPROBE_FUZZ_ENTRY(data, size);
  return 0;
}
