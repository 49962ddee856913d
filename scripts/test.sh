#!/usr/bin/env bash
# Sets up everything (system packages, Python environment, build) and runs
# all tests: the C++ tests through CTest, then the Python tests through pytest.
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
setup_all
cd "$REPO"
log "C++ tests (ctest)"
ctest --test-dir build --output-on-failure -j 2
log "installed-package consumer (cmake --install, find_package(tmm_torch))"
cmake --install build --prefix build/install >/dev/null
torch_cmake="$("$PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
cmake -S tests/consumer -B build/consumer -G Ninja -DCMAKE_PREFIX_PATH="$REPO/build/install;$torch_cmake" >/dev/null
cmake --build build/consumer >/dev/null
build/consumer/tmm_consumer
log "Python tests (pytest)"
"$PYTHON" -m pytest tests/python -q "$@"
