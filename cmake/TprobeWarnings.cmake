# Warnings live on an INTERFACE target so third-party headers (SYSTEM includes) stay quiet.
add_library(tprobe_warnings INTERFACE)
target_compile_options(tprobe_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow=local -Wnon-virtual-dtor -Wcast-align
  -Woverloaded-virtual -Wformat=2 -Wimplicit-fallthrough)
if(TPROBE_WERROR)
  target_compile_options(tprobe_warnings INTERFACE -Werror)
endif()
