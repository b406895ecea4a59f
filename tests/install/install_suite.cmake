# Install.SuiteFindsItsInstalledFixtures (tests/CMakeLists.txt): `cmake --install` of this build
# into a temporary prefix outside the source tree, then the installed binary runs `tprobe suite`
# from another temporary folder and must read its fixtures from P/share/tprobe/fixtures and its
# torch module from P/bin. The measured and the 26B steps are skipped (seconds, not minutes).
# -DBUILD_DIR=<the build>  -DTMP_BASE=<where temporary folders go>
cmake_minimum_required(VERSION 3.22)  # IN_LIST, string(JSON)
string(RANDOM LENGTH 8 tag)
set(work "${TMP_BASE}/tprobe-install-${tag}")
set(prefix "${work}/prefix")
set(cwd "${work}/elsewhere")
file(MAKE_DIRECTORY "${prefix}" "${cwd}")

function(fail what)
  message(FATAL_ERROR "${what} (left in ${work})")
endfunction()
include("${CMAKE_CURRENT_LIST_DIR}/suite_result.cmake")

execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  fail("cmake --install failed (${rc}):\n${out}${err}")
endif()
foreach(f bin/tprobe bin/libtprobe_torch.so
          share/tprobe/fixtures/gemma4-tiny-hf/config.json
          share/tprobe/fixtures/traces/hf-sdpa-2x256.json.gz
          share/tprobe/fixtures/adapters/after-step/adapter_config.json)
  if(NOT EXISTS "${prefix}/${f}")
    fail("not installed: ${prefix}/${f}")
  endif()
endforeach()
# Only what the suite reads: no test-only fixture comes along.
if(EXISTS "${prefix}/share/tprobe/fixtures/gemma4-tiny-hf/backward.safetensors")
  fail("a test-only fixture was installed")
endif()

execute_process(
  COMMAND "${prefix}/bin/tprobe" suite --out out --quiet --json suite.json
          --skip profile,levers,mask,mask-padded,inspect,flops,padding,scaling-fit,bucket
  WORKING_DIRECTORY "${cwd}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  fail("the installed suite exited ${rc}:\n${out}${err}")
endif()
suite_steps_in("${cwd}" "${prefix}/share/tprobe/fixtures" "ok;no" ran)
foreach(step parity kernels lora-gate lora-gate-trap env)
  if(NOT step IN_LIST ran)
    fail("step ${step} did not run from the installed binary (ran: ${ran}):\n${out}")
  endif()
endforeach()
# The torch module the installed binary loaded is the installed one.
file(READ "${cwd}/out/env.json" env)
string(JSON module GET "${env}" environment torch module)
if(NOT module STREQUAL "${prefix}/bin/libtprobe_torch.so")
  fail("the installed binary loaded the torch module '${module}', not ${prefix}/bin's")
endif()
file(REMOVE_RECURSE "${work}")
message(STATUS "installed into ${prefix}; the suite found its fixtures and module there")
