# `cmake --install build/<preset> --prefix P`: the binary, its torch module and the suite's
# fixtures (docs/suite.md, "Installed"):
#   P/bin/tprobe
#   P/bin/libtprobe_torch.so          beside the binary: where it looks for the module first
#   P/share/tprobe/fixtures/...       what `tprobe suite` reads (its steps' `needs`), nothing more
#   P/share/man/man1/tprobe.1.gz      the manual page         } written by the binary itself
#   P/share/bash-completion/completions/tprobe                 } (`tprobe --generate`, after
#   P/share/zsh/vendor-completions/_tprobe                     }  each link: src/app/CMakeLists.txt)
# The paths are fixed, not GNUInstallDirs': the suite finds its fixtures at
# <bindir>/../share/tprobe/fixtures and the binary its module in <bindir> (probes/suite_plan.hpp,
# src/engine/module_table.cpp).
install(TARGETS tprobe RUNTIME DESTINATION bin)
install(TARGETS tprobe_torch LIBRARY DESTINATION bin)
# A libtorch outside the system paths (the GPU host's pip wheel, its CUPTI) stays found from P.
set_target_properties(tprobe_torch PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)

set(tprobe_suite_fixtures
  gemma4-tiny-hf/config.json
  gemma4-tiny-hf/model.safetensors
  gemma4-tiny-hf/reference.safetensors
  traces/hf-sdpa-2x256.json.gz
  adapters/after-step/adapter_config.json
  adapters/after-step/adapter_model.safetensors
  adapters/checkpointing-without-input-grads/adapter_config.json
  adapters/checkpointing-without-input-grads/adapter_model.safetensors)
foreach(f IN LISTS tprobe_suite_fixtures)
  get_filename_component(dir "${f}" DIRECTORY)
  install(FILES "${PROJECT_SOURCE_DIR}/tests/fixtures/${f}"
          DESTINATION "share/tprobe/fixtures/${dir}")
endforeach()

install(FILES "${TPROBE_GENERATED_DOCS_DIR}/tprobe.1.gz" DESTINATION share/man/man1)
install(FILES "${TPROBE_GENERATED_DOCS_DIR}/tprobe" DESTINATION share/bash-completion/completions)
install(FILES "${TPROBE_GENERATED_DOCS_DIR}/_tprobe" DESTINATION share/zsh/vendor-completions)
