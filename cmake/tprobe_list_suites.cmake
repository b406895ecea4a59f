# cmake -P script (TprobeGtestSuites.cmake): writes OUT, one add_test per GoogleTest suite of
# BINARY, each running that suite's tests (`--gtest_filter=Suite.*`; DISABLED_ tests stay off).
foreach(var BINARY OUT LABEL WORKING_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "tprobe_list_suites: ${var} is not set")
  endif()
endforeach()
execute_process(COMMAND "${BINARY}" --gtest_list_tests
                WORKING_DIRECTORY "${WORKING_DIR}"
                OUTPUT_VARIABLE listing ERROR_VARIABLE errors RESULT_VARIABLE rc TIMEOUT 60)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${BINARY} --gtest_list_tests failed (${rc}): ${errors}")
endif()
string(REPLACE "\n" ";" lines "${listing}")
set(script "")
set(suites 0)
foreach(line IN LISTS lines)
  # A suite line is "Suite." or "Prefix/Suite.", optionally followed by "  # TypeParam = ...";
  # test lines are indented, and gtest_main's "Running main() from ..." has no trailing dot.
  if(line MATCHES "^([A-Za-z0-9_/]+)\\.( |$)")
    set(suite "${CMAKE_MATCH_1}")
    math(EXPR suites "${suites} + 1")
    string(APPEND script
      "add_test([=[${suite}]=] \"${BINARY}\" [=[--gtest_filter=${suite}.*]=])\n"
      "set_tests_properties([=[${suite}]=] PROPERTIES WORKING_DIRECTORY \"${WORKING_DIR}\" "
      "LABELS ${LABEL} ENVIRONMENT OMP_NUM_THREADS=2)\n")
  endif()
endforeach()
if(suites EQUAL 0)
  message(FATAL_ERROR "${BINARY} --gtest_list_tests listed no suite")
endif()
file(WRITE "${OUT}" "${script}")
