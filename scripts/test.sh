#!/usr/bin/env bash
# Sets up everything (system packages, Python environment, build) and runs
# all tests: the C++ tests through CTest, then the Python tests through pytest.
#
#   scripts/test.sh --sanitize   instead: the C++ tests linked against the
#                                library's sanitized flavour (AddressSanitizer
#                                + UBSan on all of tmm's own code but the op's
#                                registration glue; CMakeLists.txt says which),
#                                built in build/ beside the plain one, and run;
#                                any sanitizer report fails the run.
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"

if [ "${1:-}" = "--sanitize" ]; then
  shift
  setup_all
  cd "$REPO"
  # Any report stops the process with a non-zero exit. The tests link the
  # non-instrumented libtorch, so only tmm's own code is checked for memory
  # errors; leaks are reported wherever they are allocated (lsan.supp holds
  # any suppressions, none at present).
  export ASAN_OPTIONS="halt_on_error=1:abort_on_error=0:detect_leaks=1:detect_stack_use_after_return=1:strict_string_checks=1:check_initialization_order=1"
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
  export LSAN_OPTIONS="suppressions=$REPO/tests/sanitizers/lsan.supp:print_suppressions=0"
  log "building tmm_tests_sanitized (TMM_SANITIZE=$TMM_SANITIZERS)"
  cmake --build build --target tmm_tests_sanitized -j "$(nproc)"
  # All the C++ tests (seconds: the heavy lifting is in libtorch, which is
  # not instrumented); extra arguments go to Catch2, e.g. a tag: "[fuzz]".
  log "C++ tests under AddressSanitizer + UBSan"
  build/tests/cpp/tmm_tests_sanitized "$@"
  exit
fi

setup_all
ensure_wheelhouse  # for tests/python/test_pip_install.py
cd "$REPO"
log "C++ tests (ctest)"
ctest --test-dir build --output-on-failure -j 2
log "installed-package consumer (cmake --install, the tree moved, find_package(tmm_torch))"
# Installed elsewhere and then moved into place: the tree must not depend on
# where it was installed (RPATHs relative to the binaries, a relocatable
# CMake package).
rm -rf build/install build/install-unmoved
cmake --install build --prefix build/install-unmoved >/dev/null
mv build/install-unmoved build/install
torch_cmake="$("$PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
# The docs' C++ blocks compile against it too (tests/python/test_docs.py checks the file is current).
"$PYTHON" tests/python/docs_snippets.py cpp build/docs_snippets/docs_snippets.cpp
cmake -S tests/consumer -B build/consumer -G Ninja -DCMAKE_PREFIX_PATH="$REPO/build/install;$torch_cmake" \
  -DTMM_DOCS_SNIPPETS="$REPO/build/docs_snippets/docs_snippets.cpp" >/dev/null
cmake --build build/consumer >build/consumer.log 2>&1 || { cat build/consumer.log; exit 1; }
build/consumer/tmm_consumer
# For tests/python/test_cli.py: the installed (moved) CLI and the installed-package example;
# for test_checkpoint_parity.py: the C++ checkpoint tool (a missing one fails those tests).
export TMM_CLI="$REPO/build/install/bin/tmm" TMM_CONSUMER_DIR="$REPO/build/consumer"
export TMM_CHECKPOINT_TOOL="$REPO/build/tests/cpp/tmm_checkpoint_tool"
log "Python tests (pytest)"
"$PYTHON" -m pytest tests/python -q "$@"
