# Precompiled headers: the third-party headers every translation unit of a target parses (libtorch's
# torch/torch.h, CLI11, GoogleTest, nlohmann_json, fmt) are compiled once per target. Measured on
# the 2-core development machine: a libtorch translation unit 48 -> 25 s of CPU, a core one 8.6 ->
# 7.1 s (docs/benchmarks.md, "Build time"). Single-file targets gain nothing and are left alone.
option(TPROBE_PCH "Precompile the heavy third-party headers of multi-file targets" ON)

function(tprobe_pch target kind)
  if(NOT TPROBE_PCH)
    return()
  endif()
  set(common <fmt/format.h> <nlohmann/json.hpp> <map> <memory> <optional> <string> <vector>)
  if(kind STREQUAL "torch")
    target_precompile_headers(${target} PRIVATE <torch/torch.h>)
  elseif(kind STREQUAL "cli")
    target_precompile_headers(${target} PRIVATE <CLI/CLI.hpp> ${common})
  elseif(kind STREQUAL "test")
    target_precompile_headers(${target} PRIVATE <gtest/gtest.h> ${common})
  elseif(kind STREQUAL "core")
    target_precompile_headers(${target} PRIVATE ${common})
  else()
    message(FATAL_ERROR "tprobe_pch: unknown kind '${kind}'")
  endif()
endfunction()

# `target` compiles with `from`'s precompiled header instead of building its own (a libtorch one
# takes about 35 s on the 2-core machine). The flags must match: a position-independent `from`
# gets `target` -fPIC here (CMake's property would give an executable -fPIE, which gcc refuses
# on a -fPIC header); -Winvalid-pch, on with every PCH, makes any other mismatch an error under
# -Werror.
function(tprobe_pch_reuse target from)
  if(NOT TPROBE_PCH)
    return()
  endif()
  get_target_property(pic ${from} POSITION_INDEPENDENT_CODE)
  if(pic)
    target_compile_options(${target} PRIVATE -fPIC)
  endif()
  target_precompile_headers(${target} REUSE_FROM ${from})
endfunction()
