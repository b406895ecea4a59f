# `cpack -G DEB` in a build folder: tprobe_<version>_<arch>.deb holding what `cmake --install`
# lays out (cmake/TprobeInstall.cmake) under /usr — /usr/bin/tprobe, the torch module beside it,
# /usr/share/tprobe/fixtures, the manual page and the bash and zsh completions. Its Depends are the
# Debian packages of the libraries the binary and the module link (libtorch1.13, libfmt9, zlib1g,
# libstdc++6, ...), computed by dpkg-shlibdeps, so `apt install ./tprobe_*.deb` pulls them.
# tests/install/package_deb.cmake builds it, unpacks it and runs the suite from it.
set(CPACK_PACKAGE_NAME tprobe)
set(CPACK_PACKAGE_VENDOR "tprobe")
set(CPACK_PACKAGE_CONTACT "tprobe maintainers <tprobe@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "where a LoRA MoE fine-tuning step's time and memory go")
set(CPACK_PACKAGE_DESCRIPTION
    "tprobe is one command-line binary whose subcommands each settle one question about a LoRA "
    "fine-tuning step of a Mixture-of-Experts model with a measurement, and write a JSON evidence "
    "file from which every number can be re-derived. `tprobe suite` runs every probe on its "
    "embedded defaults and draws an HTML report.")
string(JOIN "" CPACK_PACKAGE_DESCRIPTION ${CPACK_PACKAGE_DESCRIPTION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # tprobe_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# dpkg-shlibdeps reads every ELF file of the package (CPackDeb finds them with `file`). Without
# either tool the Depends are Debian 12's names for the same libraries.
find_program(TPROBE_DPKG_SHLIBDEPS dpkg-shlibdeps)
find_program(TPROBE_FILE_COMMAND file)
mark_as_advanced(TPROBE_DPKG_SHLIBDEPS TPROBE_FILE_COMMAND)
if(TPROBE_DPKG_SHLIBDEPS AND TPROBE_FILE_COMMAND)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
else()
  string(REGEX MATCH "^[0-9]+\\.[0-9]+" tprobe_torch_series "${Torch_VERSION}")
  set(CPACK_DEBIAN_PACKAGE_DEPENDS
      "libtorch${tprobe_torch_series}, libfmt9, zlib1g, libstdc++6, libgcc-s1, libc6")
endif()
if(TPROBE_HAS_CUPTI)
  message(STATUS "tprobe: the Debian package's torch module links ${TPROBE_CUPTI_LIBRARY}, which no "
                 "Debian package provides: the package runs only where that library is (the "
                 "`release` preset builds without CUPTI)")
endif()
include(CPack)
