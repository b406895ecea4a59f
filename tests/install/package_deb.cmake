# Install.DebianPackageRunsTheSuiteFromACleanRoot (tests/CMakeLists.txt): `cpack -G DEB` of this
# build (cmake/TprobePackage.cmake) into a temporary folder, the package unpacked with
# `dpkg-deb -x` into a clean root, and from there:
#   - the files: usr/bin/tprobe, the torch module beside it, the fixtures, the manual page, the
#     bash and zsh completions; the page and completions equal what the packaged binary's
#     `--generate` prints (they are made from its CLI, not kept by hand);
#   - Depends names Debian's libtorch package and the package of every library the binary and the
#     module link (`dpkg -S` of each NEEDED entry, as ldd resolves it); ldd resolves them all;
#   - `man -l` renders the page (groff when man is absent); the bash completion offers `suite`;
#   - the unpacked binary runs `tprobe suite` (its parity step) from another folder, reading the
#     packaged fixtures and loading the packaged torch module.
# Skipped, saying so, without cpack or dpkg-deb, or where the linked libtorch is not a Debian
# package's (a wheel's, as on the GPU host). Nothing is built: cpack installs what the build
# made (the Ninja generator has no pre-install build step), and the binary's time stamp is checked.
# -DBUILD_DIR=<the build> -DTMP_BASE=<temporary folders> -DCPACK=<cpack> -DVERSION=<version>
# -DCUPTI_LIBRARY=<the CUPTI library the module links, or "">
cmake_minimum_required(VERSION 3.22)
find_program(DPKG_DEB dpkg-deb)
if(NOT EXISTS "${CPACK}" OR NOT DPKG_DEB)
  message("SKIPPED: cpack (${CPACK}) or dpkg-deb is not installed: no Debian package was built")
  return()
endif()
# The package's Depends are Debian's packages: a build linked against a libtorch no Debian package
# holds (the GPU host's, from a PyTorch wheel) has none to name.
execute_process(COMMAND ldd "${BUILD_DIR}/src/app/libtprobe_torch.so" OUTPUT_VARIABLE linked
                RESULT_VARIABLE rc)
if(rc EQUAL 0 AND linked MATCHES "libtorch_cpu\\.so[^ ]* => ([^ ]+)")
  set(libtorch "${CMAKE_MATCH_1}")
  # dpkg knows it by the folder its package put it in (/lib or /usr/lib, merged or not).
  string(REGEX REPLACE "^/lib/" "/usr/lib/" in_usr "${libtorch}")
  string(REGEX REPLACE "^/usr/lib/" "/lib/" in_root "${libtorch}")
  set(held FALSE)
  foreach(candidate "${libtorch}" "${in_usr}" "${in_root}")
    execute_process(COMMAND dpkg -S "${candidate}" RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
    if(rc EQUAL 0)
      set(held TRUE)
    endif()
  endforeach()
  if(NOT held)
    message("SKIPPED: the build links ${libtorch}, which no Debian package holds: a Debian "
            "package of it could not name its libtorch")
    return()
  endif()
endif()
string(RANDOM LENGTH 8 tag)
set(work "${TMP_BASE}/tprobe-deb-${tag}")
set(root "${work}/root")
set(cwd "${work}/elsewhere")
file(MAKE_DIRECTORY "${work}/pkg" "${root}" "${cwd}")

function(fail what)
  message(FATAL_ERROR "${what} (left in ${work})")
endfunction()
include("${CMAKE_CURRENT_LIST_DIR}/suite_result.cmake")

function(run_or_fail out_var)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    fail("${ARGN} failed (${rc}):\n${out}${err}")
  endif()
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()

# The package: tprobe_<version>_<arch>.deb.
set(binary "${BUILD_DIR}/src/app/tprobe")
file(TIMESTAMP "${binary}" built_at "%Y-%m-%dT%H:%M:%S" UTC)
run_or_fail(log "${CPACK}" -G DEB --config "${BUILD_DIR}/CPackConfig.cmake" -B "${work}/pkg")
file(TIMESTAMP "${binary}" built_at_after "%Y-%m-%dT%H:%M:%S" UTC)
if(NOT built_at STREQUAL built_at_after)
  fail("cpack rebuilt the binary (${built_at} -> ${built_at_after}):\n${log}")
endif()
run_or_fail(arch dpkg-deb --version)  # dpkg-deb runs; the architecture from dpkg itself
execute_process(COMMAND dpkg --print-architecture OUTPUT_VARIABLE arch
                OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR arch STREQUAL "")
  set(arch "amd64")
endif()
set(deb "${work}/pkg/tprobe_${VERSION}_${arch}.deb")
if(NOT EXISTS "${deb}")
  file(GLOB made "${work}/pkg/*.deb")
  fail("no ${deb} (made: ${made}):\n${log}")
endif()

run_or_fail(unused "${DPKG_DEB}" -x "${deb}" "${root}")
set(bin "${root}/usr/bin")
foreach(f usr/bin/tprobe usr/bin/libtprobe_torch.so
          usr/share/man/man1/tprobe.1.gz
          usr/share/bash-completion/completions/tprobe
          usr/share/zsh/vendor-completions/_tprobe
          usr/share/tprobe/fixtures/gemma4-tiny-hf/config.json
          usr/share/tprobe/fixtures/traces/hf-sdpa-2x256.json.gz
          usr/share/tprobe/fixtures/adapters/after-step/adapter_config.json)
  if(NOT EXISTS "${root}/${f}")
    fail("not in the package: /${f}")
  endif()
endforeach()

# The page and the completions are the packaged binary's own `--generate` output.
set(ENV{ASAN_OPTIONS} "detect_leaks=0")
run_or_fail(page_in_package gzip -dc "${root}/usr/share/man/man1/tprobe.1.gz")
set(packaged_man "${page_in_package}")
file(READ "${root}/usr/share/bash-completion/completions/tprobe" packaged_bash)
file(READ "${root}/usr/share/zsh/vendor-completions/_tprobe" packaged_zsh)
foreach(kind man bash zsh)
  run_or_fail(now "${bin}/tprobe" --generate ${kind})
  if(NOT now STREQUAL packaged_${kind})
    fail("the packaged ${kind} file is not what the packaged binary's --generate ${kind} prints")
  endif()
endforeach()

# Depends: Debian's libtorch, and the owner of every library the ELF files link.
run_or_fail(depends "${DPKG_DEB}" -f "${deb}" Depends)
string(STRIP "${depends}" depends)
if(NOT depends MATCHES "(^|, )libtorch[0-9.]+( |,|$)")
  fail("Depends does not name Debian's libtorch package: ${depends}")
endif()
string(REGEX REPLACE " *\\([^)]*\\)" "" depends_names "${depends}")
string(REGEX REPLACE "[ ]*[,|][ ]*" ";" depends_names "${depends_names}")
find_program(READELF readelf)
find_program(DPKG dpkg)
foreach(elf "${bin}/tprobe" "${bin}/libtprobe_torch.so")
  run_or_fail(resolved ldd "${elf}")
  if(resolved MATCHES "not found")
    fail("ldd ${elf}: a library is not found:\n${resolved}")
  endif()
  if(NOT READELF OR NOT DPKG)
    message(STATUS "readelf or dpkg missing: the Depends of ${elf}'s libraries were not matched")
    continue()
  endif()
  run_or_fail(dynamic "${READELF}" -d "${elf}")
  string(REGEX MATCHALL "Shared library: \\[[^]]+\\]" needed "${dynamic}")
  foreach(entry IN LISTS needed)
    string(REGEX REPLACE "Shared library: \\[([^]]+)\\]" "\\1" soname "${entry}")
    string(REGEX REPLACE "([][+.*()^$?|\\])" "\\\\\\1" pattern "${soname}")
    string(REGEX MATCH "${pattern} => ([^ ]+)" where "${resolved}")
    set(path "${CMAKE_MATCH_1}")
    if(path STREQUAL "")
      fail("ldd ${elf} does not show where ${soname} is:\n${resolved}")
    endif()
    # dpkg knows a library by the folder its package put it in (/lib or /usr/lib, merged or not).
    set(owner "")
    get_filename_component(real "${path}" REALPATH)
    foreach(candidate "${path}" "${real}")
      string(REGEX REPLACE "^/usr/lib/" "/lib/" other "${candidate}")
      if(other STREQUAL candidate)
        string(REGEX REPLACE "^/lib/" "/usr/lib/" other "${candidate}")
      endif()
      foreach(p "${candidate}" "${other}")
        if(owner STREQUAL "")
          execute_process(COMMAND "${DPKG}" -S "${p}" OUTPUT_VARIABLE found ERROR_QUIET
                          RESULT_VARIABLE rc)
          if(rc EQUAL 0)
            string(REGEX REPLACE "[:,].*" "" owner "${found}")
          endif()
        endif()
      endforeach()
    endforeach()
    if(owner STREQUAL "" AND CUPTI_LIBRARY)
      # A build that found the CUDA toolkit links its CUPTI (TPROBE_ENABLE_CUPTI=AUTO): no Debian
      # package has it, so the package needs that toolkit (cmake/TprobePackage.cmake says so when
      # it configures; the `release` preset builds without CUPTI).
      get_filename_component(cupti_real "${CUPTI_LIBRARY}" REALPATH)
      if(real STREQUAL cupti_real)
        message(STATUS "${soname}: the CUDA toolkit's CUPTI (${real}), not from a Debian package")
        continue()
      endif()
    endif()
    if(owner STREQUAL "")
      fail("${soname} (${path}), linked by ${elf}, belongs to no Debian package: apt cannot pull it")
    endif()
    if(NOT owner IN_LIST depends_names)
      fail("${elf} links ${soname} of package ${owner}, which Depends does not name: ${depends}")
    endif()
  endforeach()
endforeach()

# `man tprobe` from the package: the page renders (man-db, else groff).
find_program(MAN man)
find_program(GROFF groff)
set(page "${root}/usr/share/man/man1/tprobe.1.gz")
if(MAN)
  execute_process(COMMAND "${CMAKE_COMMAND}" -E env MANPAGER=cat PAGER=cat MANWIDTH=100
                          "${MAN}" -l "${page}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE rendered ERROR_VARIABLE err)
  set(renderer "man -l")
elseif(GROFF)
  execute_process(COMMAND sh -c "gzip -dc \"$1\" | \"$2\" -man -Tutf8 -P-c -P-b -P-o -P-u" sh "${page}" "${GROFF}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE rendered ERROR_VARIABLE err)
  set(renderer "groff -man")
else()
  set(renderer "")
  message(STATUS "neither man nor groff is installed: the page was not rendered")
endif()
if(renderer)
  # Bold headings as overstrikes (X backspace X) or escape sequences, should any come.
  string(ASCII 8 backspace)
  string(ASCII 27 escape)
  string(REGEX REPLACE ".${backspace}" "" rendered "${rendered}")
  string(REGEX REPLACE "${escape}\\[[0-9;]*m" "" rendered "${rendered}")
  if(NOT rc EQUAL 0 OR NOT rendered MATCHES "SUBCOMMANDS" OR NOT rendered MATCHES "tprobe suite")
    fail("${renderer} ${page} did not render the page (${rc}):\n${err}${rendered}")
  endif()
endif()

# `tprobe <TAB>` from the package: the bash completion offers the subcommands.
find_program(BASH bash)
if(BASH)
  run_or_fail(offered "${BASH}" --norc --noprofile -c
              "source \"$1\" && COMP_WORDS=(tprobe su) && COMP_CWORD=1 && _tprobe && echo \"\${COMPREPLY[*]}\""
              bash "${root}/usr/share/bash-completion/completions/tprobe")
  string(STRIP "${offered}" offered)
  if(NOT offered STREQUAL "suite")
    fail("the packaged bash completion offers '${offered}' after 'tprobe su', not 'suite'")
  endif()
endif()

# The suite from the unpacked root, its parity step alone (and the report, which cannot be
# skipped): parity reads the packaged fixtures (the tiny checkpoint and its Hugging Face
# reference) and runs the packaged, stripped torch module. Install.SuiteFindsItsInstalledFixtures-
# AndModule runs every fixture-reading step from a `cmake --install` prefix already, and the
# package holds the same files (cpack runs the same install rules): the other steps would add
# about 20 s to CI and tell nothing more about the package.
execute_process(
  COMMAND "${bin}/tprobe" suite --out out --quiet --json suite.json
          --skip env,inspect,padding,bucket,scaling-fit,flops,mask,mask-padded,profile,levers,kernels,lora-gate,lora-gate-trap
  WORKING_DIRECTORY "${cwd}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  fail("the packaged suite exited ${rc}:\n${out}${err}")
endif()
suite_steps_in("${cwd}" "${root}/usr/share/tprobe/fixtures" "ok" ran)
if(NOT "parity" IN_LIST ran)
  fail("the packaged suite's parity step did not run ok (ok: ${ran}):\n${out}")
endif()
file(READ "${cwd}/out/parity.json" parity)
string(JSON module GET "${parity}" environment torch module)
if(NOT module STREQUAL "${bin}/libtprobe_torch.so")
  fail("the packaged binary loaded the torch module '${module}', not ${bin}'s")
endif()
file(REMOVE_RECURSE "${work}")
message(STATUS "built ${deb} (Depends: ${depends}); unpacked, the suite ran from it")
