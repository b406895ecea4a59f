# Locates CUPTI. On the GPU host libtorch already loads the CUPTI of the PyTorch wheel and only
# one CUPTI may live in a process, so TPROBE_CUPTI_LIBRARY lets the build link exactly that file.
set(TPROBE_CUPTI_LIBRARY "" CACHE FILEPATH "libcupti to link (default: the CUDA toolkit's)")
set(TPROBE_CUPTI_INCLUDE_DIR "" CACHE PATH "Folder holding cupti.h (default: the CUDA toolkit's)")
set(TPROBE_HAS_CUPTI 0)

if(NOT TPROBE_ENABLE_CUPTI STREQUAL "OFF")
  if(NOT TARGET CUDA::cupti)
    find_package(CUDAToolkit QUIET)
  endif()
  set(_cupti_include "${TPROBE_CUPTI_INCLUDE_DIR}")
  if(NOT _cupti_include AND CUDAToolkit_FOUND)
    find_path(_tprobe_cupti_h cupti.h HINTS ${CUDAToolkit_INCLUDE_DIRS}
              "${CUDAToolkit_LIBRARY_ROOT}/extras/CUPTI/include")
    if(_tprobe_cupti_h)
      set(_cupti_include "${_tprobe_cupti_h}")
    endif()
  endif()
  if(NOT TPROBE_CUPTI_LIBRARY AND TARGET CUDA::cupti)
    get_target_property(TPROBE_CUPTI_LIBRARY CUDA::cupti IMPORTED_LOCATION)
  endif()
  if(TPROBE_CUPTI_LIBRARY AND _cupti_include AND EXISTS "${TPROBE_CUPTI_LIBRARY}")
    set(TPROBE_HAS_CUPTI 1)
    add_library(tprobe_dep_cupti INTERFACE)
    target_include_directories(tprobe_dep_cupti SYSTEM INTERFACE "${_cupti_include}"
                               ${CUDAToolkit_INCLUDE_DIRS})
    target_link_libraries(tprobe_dep_cupti INTERFACE "${TPROBE_CUPTI_LIBRARY}")
  elseif(TPROBE_ENABLE_CUPTI STREQUAL "ON")
    message(FATAL_ERROR "TPROBE_ENABLE_CUPTI=ON but CUPTI was not found: install the CUDA toolkit "
                        "or set TPROBE_CUPTI_LIBRARY and TPROBE_CUPTI_INCLUDE_DIR.")
  endif()
endif()
message(STATUS "tprobe: CUPTI ${TPROBE_HAS_CUPTI} ${TPROBE_CUPTI_LIBRARY}")
