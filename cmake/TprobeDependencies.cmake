# Finds fmt, CLI11, nlohmann_json, GoogleTest, zlib and libtorch.
#
# Two sources for the small header libraries:
#  * Debian packages (the `cpu` preset): plain find_package.
#  * TPROBE_DEPS_DIR (the `cuda` preset): copies of those same Debian headers and the googletest
#    source, staged by scripts/stage-deps.sh, because the GPU host has no package archive.
set(TPROBE_DEPS_DIR "" CACHE PATH "Folder made by scripts/stage-deps.sh (hosts without Debian packages)")

if(TPROBE_DEPS_DIR)
  if(NOT EXISTS "${TPROBE_DEPS_DIR}/include/fmt/format.h")
    message(FATAL_ERROR "TPROBE_DEPS_DIR=${TPROBE_DEPS_DIR} holds no staged headers: "
                        "run scripts/stage-deps.sh on a Debian machine and carry the folder.")
  endif()
  # fmt is used header-only there: the staged copy carries headers, not a matching libfmt.so.
  add_library(tprobe_dep_fmt INTERFACE)
  target_include_directories(tprobe_dep_fmt SYSTEM INTERFACE "${TPROBE_DEPS_DIR}/include")
  target_compile_definitions(tprobe_dep_fmt INTERFACE FMT_HEADER_ONLY=1)
  add_library(fmt::fmt ALIAS tprobe_dep_fmt)
  add_library(tprobe_dep_cli11 INTERFACE)
  target_include_directories(tprobe_dep_cli11 SYSTEM INTERFACE "${TPROBE_DEPS_DIR}/include")
  add_library(CLI11::CLI11 ALIAS tprobe_dep_cli11)
  add_library(tprobe_dep_json INTERFACE)
  target_include_directories(tprobe_dep_json SYSTEM INTERFACE "${TPROBE_DEPS_DIR}/include")
  add_library(nlohmann_json::nlohmann_json ALIAS tprobe_dep_json)
  if(TPROBE_BUILD_TESTS)
    set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
    set(BUILD_GMOCK OFF CACHE BOOL "" FORCE)
    add_subdirectory("${TPROBE_DEPS_DIR}/googletest" "${CMAKE_BINARY_DIR}/_deps/googletest" EXCLUDE_FROM_ALL SYSTEM)
    # googletest >= 1.11 defines the GTest:: aliases itself; older trees do not.
    if(NOT TARGET GTest::gtest)
      add_library(GTest::gtest ALIAS gtest)
      add_library(GTest::gtest_main ALIAS gtest_main)
    endif()
  endif()
else()
  find_package(fmt 8 REQUIRED)
  find_package(CLI11 2 REQUIRED)
  find_package(nlohmann_json 3.10 REQUIRED)
  if(TPROBE_BUILD_TESTS)
    find_package(GTest REQUIRED)
  endif()
endif()

# zlib (Debian: zlib1g-dev) lets the length-dataset reader stream gzip files. A GPU host without
# zlib's headers falls back to the copy scripts/stage-deps.sh put in .deps/zlib (header + libz.a).
find_package(ZLIB QUIET)
if(NOT ZLIB_FOUND AND TPROBE_DEPS_DIR AND EXISTS "${TPROBE_DEPS_DIR}/zlib/lib/libz.a")
  add_library(ZLIB::ZLIB STATIC IMPORTED)
  set_target_properties(ZLIB::ZLIB PROPERTIES
    IMPORTED_LOCATION "${TPROBE_DEPS_DIR}/zlib/lib/libz.a"
    INTERFACE_INCLUDE_DIRECTORIES "${TPROBE_DEPS_DIR}/zlib/include")
  set(ZLIB_FOUND TRUE)
  message(STATUS "tprobe: zlib from ${TPROBE_DEPS_DIR}/zlib (staged)")
endif()
if(NOT ZLIB_FOUND)
  message(FATAL_ERROR "zlib not found. On Debian 12: apt-get install zlib1g-dev. On a host without "
                      "packages: run scripts/stage-deps.sh on a Debian machine and carry .deps.")
endif()

# libcrypto (Debian: libssl-dev): SHA-256 of the token batches profile --dataset measures. A GPU
# host without OpenSSL's headers uses the copy scripts/stage-deps.sh put in .deps/openssl
# (headers), linked against the host's own libcrypto.so.3 (OpenSSL 3 keeps one ABI across 3.x;
# Python's ssl module brings it), or the staged libcrypto.a where the host has none.
find_package(OpenSSL QUIET COMPONENTS Crypto)
if(NOT OPENSSL_FOUND AND TPROBE_DEPS_DIR AND EXISTS "${TPROBE_DEPS_DIR}/openssl/include/openssl/evp.h")
  find_library(TPROBE_HOST_LIBCRYPTO NAMES libcrypto.so.3)
  if(TPROBE_HOST_LIBCRYPTO)
    add_library(OpenSSL::Crypto SHARED IMPORTED)
    set_target_properties(OpenSSL::Crypto PROPERTIES IMPORTED_LOCATION "${TPROBE_HOST_LIBCRYPTO}")
  else()
    add_library(OpenSSL::Crypto STATIC IMPORTED)
    set_target_properties(OpenSSL::Crypto PROPERTIES
      IMPORTED_LOCATION "${TPROBE_DEPS_DIR}/openssl/lib/libcrypto.a"
      INTERFACE_LINK_LIBRARIES "${CMAKE_DL_LIBS};pthread")
  endif()
  set_target_properties(OpenSSL::Crypto PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${TPROBE_DEPS_DIR}/openssl/include")
  set(OPENSSL_FOUND TRUE)
  message(STATUS "tprobe: libcrypto headers from ${TPROBE_DEPS_DIR}/openssl (staged)")
endif()
if(NOT OPENSSL_FOUND)
  message(FATAL_ERROR "libcrypto not found. On Debian 12: apt-get install libssl-dev. On a host "
                      "without packages: run scripts/stage-deps.sh on a Debian machine and carry .deps.")
endif()

find_package(Torch QUIET)
if(NOT Torch_FOUND)
  message(FATAL_ERROR "libtorch not found. On Debian 12: apt-get install libtorch-dev. With a pip "
                      "PyTorch: -DCMAKE_PREFIX_PATH=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')")
endif()
# A CUDA build of libtorch defines the c10_cuda target; Debian's CPU build does not.
if(TARGET c10_cuda OR TORCH_CUDA_LIBRARIES)
  set(TPROBE_HAS_TORCH_CUDA 1)
  find_package(CUDAToolkit REQUIRED)
else()
  set(TPROBE_HAS_TORCH_CUDA 0)
endif()
message(STATUS "tprobe: libtorch ${Torch_VERSION} (CUDA: ${TPROBE_HAS_TORCH_CUDA})")
