# One ctest test per GoogleTest suite (`--gtest_filter=Suite.*`) instead of one per test, for the
# test executables whose start is the cost: the model tests start libtorch under the sanitizer
# runtime (1.7 s of CPU each on the 2-core machine, against seconds of test), the core tests an
# instrumented core (0.2 s, 419 tests). Per-test discovery (gtest_discover_tests) started each
# executable once per test. Like it, the list is read from the built executable
# (`--gtest_list_tests`, after each link) into a file ctest includes.
#
# A suite passes when every test in it passed or skipped; GTEST_SKIP'd tests are named in its
# output (`ctest -V`, or on failure), not in ctest's skipped count.
set(_tprobe_suites_script "${CMAKE_CURRENT_LIST_DIR}/tprobe_list_suites.cmake")

function(tprobe_add_suite_tests target label)
  set(listed "${CMAKE_CURRENT_BINARY_DIR}/${target}_suites.cmake")
  set(include_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_suites_include.cmake")
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND "${CMAKE_COMMAND}" -D "BINARY=$<TARGET_FILE:${target}>" -D "OUT=${listed}"
            -D "LABEL=${label}" -D "WORKING_DIR=${CMAKE_CURRENT_BINARY_DIR}"
            -P "${_tprobe_suites_script}"
    BYPRODUCTS "${listed}"
    VERBATIM)
  file(WRITE "${include_file}"
       "if(EXISTS \"${listed}\")\n"
       "  include(\"${listed}\")\n"
       "else()\n"
       "  add_test(${target}_NOT_BUILT ${target}_NOT_BUILT)\n"
       "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${include_file}")
endfunction()
