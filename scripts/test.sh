#!/usr/bin/env bash
# Sets up everything (system packages, Python environment, build) and runs
# all tests: the C++ tests through CTest, then the Python tests through pytest.
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
setup_all
cd "$REPO"
log "C++ tests (ctest)"
ctest --test-dir build --output-on-failure -j 2
log "Python tests (pytest)"
"$PYTHON" -m pytest tests/python -q "$@"
