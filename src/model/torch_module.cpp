// The entry point of libtprobe_torch.so: the table of torch-backed work the binary calls.
//
// Every call is wrapped: a libtorch (c10::Error), allocator or other std exception never leaves
// the module as itself. It becomes one tprobe::Error line naming the work and its input — c10's
// own text without its backtrace, first line only — so no "internal error" and no 15-line
// backtrace reach the user (issue 23, item 4).
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <functional>
#include <new>
#include <string>

#include "tprobe/core/base/error.hpp"
#include "tprobe/core/base/interrupt.hpp"
#include "tprobe/cupti/cupti_info.hpp"
#include "tprobe/model/engine.hpp"
#include "tprobe/engine/mask_check_request.hpp"
#include "tprobe/engine/profile_request.hpp"
#include "tprobe/engine/module_table.hpp"

namespace {

using tprobe::Error;
namespace api = tprobe::engine;

std::string first_line(const std::string& s) {
  const std::string line = s.substr(0, s.find('\n'));
  return line.size() > 240 ? line.substr(0, 240) + "..." : line;
}

template <typename Fn>
auto translated(const std::string& what, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const Error&) {
    throw;  // already a message for the user (Interrupted included)
  } catch (const c10::OutOfMemoryError& e) {
    const std::string text = e.what_without_backtrace();
    throw Error(fmt::format("{}: {}", what,
                            tprobe::model::allocator_refusal(text).value_or(
                                "out of memory: " + first_line(text))));
  } catch (const c10::Error& e) {
    // The CPU allocator's refusal is a plain c10::Error ("[enforce fail at alloc_cpu.cpp:75] ...
    // DefaultCPUAllocator: not enough memory"): said in tprobe's words, with the bytes asked.
    const std::string text = e.what_without_backtrace();
    if (std::optional<std::string> words = tprobe::model::allocator_refusal(text)) {
      throw Error(fmt::format("{}: {}", what, *words));
    }
    throw Error(fmt::format("{}: libtorch refused it: {}", what, first_line(text)));
  } catch (const std::bad_alloc&) {
    throw Error(fmt::format("{}: out of memory", what));
  } catch (const std::exception& e) {
    throw Error(fmt::format("{}: {}", what, first_line(e.what())));
  }
}

void describe(tprobe::core::Environment& env) {
  translated("libtorch environment", [&] {
    tprobe::model::describe_torch(env);
    tprobe::cupti::describe_cupti(env);
  });
}

api::ParityResult run_parity(const api::ParityOptions& o) {
  return translated(fmt::format("parity of {} against {}", o.checkpoint_dir, o.reference_path),
                    [&] { return tprobe::model::run_parity(o); });
}

api::MaskCheckResult run_mask_check(const api::MaskCheckOptions& o) {
  return translated(fmt::format("mask --materialise at width {}", o.width),
                    [&] { return tprobe::model::run_mask_check(o); });
}

api::MaskBackendsResult run_mask_backends(const api::MaskBackendsOptions& o) {
  return translated(fmt::format("mask --backends at width {}", o.width),
                    [&] { return tprobe::model::run_mask_backends(o); });
}

api::ProfileReport run_profile(const api::ProfileRequest& request,
                               const std::function<void(const api::PointResult&)>& on_point) {
  return translated("profile", [&] { return tprobe::model::run_profile(request, on_point); });
}

api::DeviceMemory device_memory() {
  return translated("the device's memory", [] { return tprobe::model::device_memory(); });
}

const api::Engine kApi = [] {
  api::Engine table;
  table.version = api::kEngineVersion;
  table.describe = &describe;
  table.run_parity = &run_parity;
  table.run_mask_check = &run_mask_check;
  table.run_mask_backends = &run_mask_backends;
  table.run_profile = &run_profile;
  table.share_interrupt_flag = &tprobe::core::share_interrupt_flag;
  table.share_temporaries = &tprobe::core::share_temporaries;
  table.device_memory = &device_memory;
  return table;
}();

}  // namespace

extern "C" __attribute__((visibility("default"))) const tprobe::engine::Engine*
tprobe_engine() {
  return &kApi;
}
