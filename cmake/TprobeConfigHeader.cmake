# Generates tprobe/config.hpp: version, git sha and which optional parts were built.
set(TPROBE_GIT_SHA "unknown")
find_package(Git QUIET)
if(DEFINED ENV{TPROBE_GIT_SHA})
  # The GPU host receives a copy of the tree without .git: the caller passes the sha along.
  set(TPROBE_GIT_SHA "$ENV{TPROBE_GIT_SHA}")
elseif(GIT_FOUND AND EXISTS "${CMAKE_SOURCE_DIR}/.git")
  execute_process(COMMAND "${GIT_EXECUTABLE}" rev-parse --short=12 HEAD
                  WORKING_DIRECTORY "${CMAKE_SOURCE_DIR}" OUTPUT_VARIABLE _sha
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _rc)
  execute_process(COMMAND "${GIT_EXECUTABLE}" status --porcelain --untracked-files=no
                  WORKING_DIRECTORY "${CMAKE_SOURCE_DIR}" OUTPUT_VARIABLE _dirty
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(_rc EQUAL 0 AND _sha)
    set(TPROBE_GIT_SHA "${_sha}")
    if(_dirty)
      string(APPEND TPROBE_GIT_SHA "-dirty")
    endif()
  endif()
endif()
# The sha is read at configure time; re-run cmake (the scripts do) after committing.
configure_file("${CMAKE_CURRENT_LIST_DIR}/config.hpp.in"
               "${CMAKE_BINARY_DIR}/generated/tprobe/config.hpp" @ONLY)
