# Runs the built binary's `tprobe --generate man|bash|zsh` (src/app/cli_docs.hpp) into OUT:
#   OUT/tprobe.1.gz  the manual page (gzip -9n, as Debian installs them; OUT/tprobe.1 beside it)
#   OUT/tprobe       the bash completion (share/bash-completion/completions/tprobe)
#   OUT/_tprobe      the zsh completion (share/zsh/vendor-completions/_tprobe)
# -DTPROBE=<the binary> -DOUT=<folder>. src/app/CMakeLists.txt runs it after each link of tprobe.
cmake_minimum_required(VERSION 3.22)
file(MAKE_DIRECTORY "${OUT}")
set(name_man tprobe.1)
set(name_bash tprobe)
set(name_zsh _tprobe)
foreach(kind man bash zsh)
  set(dest "${OUT}/${name_${kind}}")
  # An instrumented (asan preset) binary: no leak check at its exit.
  execute_process(COMMAND "${CMAKE_COMMAND}" -E env ASAN_OPTIONS=detect_leaks=0
                          "${TPROBE}" --generate ${kind}
                  RESULT_VARIABLE rc OUTPUT_FILE "${dest}" ERROR_VARIABLE err)
  file(SIZE "${dest}" size)
  if(NOT rc EQUAL 0 OR size EQUAL 0)
    file(REMOVE "${dest}")
    message(FATAL_ERROR "${TPROBE} --generate ${kind} failed (${rc}): ${err}")
  endif()
endforeach()
# Compressed without a name or time stamp: the same text gives the same bytes.
find_program(GZIP gzip)
if(NOT GZIP)
  message(FATAL_ERROR "gzip not found: it compresses the manual page")
endif()
execute_process(COMMAND "${GZIP}" -9n -c "${OUT}/tprobe.1" OUTPUT_FILE "${OUT}/tprobe.1.gz"
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gzip of ${OUT}/tprobe.1 failed (${rc})")
endif()
