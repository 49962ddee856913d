# Shared set-up of scripts/run.sh and scripts/test.sh (sourced, not run):
# system packages, a Python environment with torch, and an incremental build.
# Everything cached lives outside the clone: the venv under
# ${TMM_CACHE:-~/.cache/tmm}, compiler outputs in ccache.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TMM_CACHE="${TMM_CACHE:-$HOME/.cache/tmm}"
APT_PACKAGES="cmake g++ ninja-build ccache nlohmann-json3-dev libutf8proc-dev catch2 bible-kjv bible-kjv-text"

# Paths under the clone are hashed relative to it, so a fresh clone (CI) hits
# the cache filled by another checkout; and not the build folder (ccache
# hashes it for nvcc), so build/ and pip's build-pip/ share their objects.
export CCACHE_BASEDIR="$REPO" CCACHE_NOHASHDIR=1

log() { printf '\033[1m[tmm %4ds]\033[0m %s\n' "$SECONDS" "$*" >&2; }  # seconds since the script started

ensure_system_packages() {  # [packages...]: default $APT_PACKAGES
  local missing=()
  for p in ${@:-$APT_PACKAGES}; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "installing ${missing[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    log "missing system packages: ${missing[*]}"
    log "install them with: sudo apt-get install ${missing[*]}"
    exit 1
  fi
}

# Uses the active virtual environment when it has torch; otherwise creates or
# reuses one keyed by the hash of requirements.txt and requirements-runtime.txt,
# with requirements-extra.txt installed on top.
ensure_python() {
  if [ -n "${VIRTUAL_ENV:-}" ] && python -c "import torch" 2>/dev/null; then
    PYTHON="$(command -v python)"
  else
    local key venv
    key="$(cat "$REPO/requirements.txt" "$REPO/requirements-runtime.txt" | sha256sum | cut -c1-12)"
    venv="$TMM_CACHE/venv-$key"
    if [ ! -x "$venv/bin/python" ] || [ ! -f "$venv/.complete" ]; then
      log "creating the Python environment $venv (torch and friends; takes a few minutes once)"
      rm -rf "$venv"
      mkdir -p "$TMM_CACHE"
      python3 -m venv "$venv"
      "$venv/bin/pip" install -q --upgrade pip
      "$venv/bin/pip" install -q -r "$REPO/requirements.txt"
      touch "$venv/.complete"
    fi
    # The extra layer, keyed by its own hash (requirements-extra.txt says why).
    local extra
    extra="$(sha256sum "$REPO/requirements-extra.txt" | cut -c1-12)"
    if [ ! -f "$venv/.extra-$extra" ]; then
      log "installing requirements-extra.txt into $venv"
      "$venv/bin/pip" install -q -r "$REPO/requirements-extra.txt"
      touch "$venv/.extra-$extra"
    fi
    PYTHON="$venv/bin/python"
  fi
  export PATH="$(dirname "$PYTHON"):$PATH"
  export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
}

# The local wheelhouse of tests/python/test_pip_install.py, whose fresh venv
# installs with no package index (scripts/wheelhouse.py says what it holds).
ensure_wheelhouse() {
  TMM_WHEELHOUSE="$("$PYTHON" "$REPO/scripts/wheelhouse.py" "$TMM_CACHE")"
  export TMM_WHEELHOUSE
}

# Configures once and builds incrementally into build/, placing the Python
# module in tmm/ so that the checkout imports as the package. The sanitized
# flavour's targets are defined there too, built only by test.sh --sanitize.
TMM_SANITIZERS="address,undefined"
build_tmm() {
  local torch_cmake
  torch_cmake="$("$PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
  # Portable kernels unless TMM_NATIVE_ARCH=ON is asked for; a build folder
  # configured otherwise (e.g. by an older checkout) is configured again.
  local native="${TMM_NATIVE_ARCH:-OFF}"
  if [ ! -f "$REPO/build/build.ninja" ] || ! grep -qx "TMM_NATIVE_ARCH:BOOL=$native" "$REPO/build/CMakeCache.txt" \
     || ! grep -qx "TMM_SANITIZE:STRING=$TMM_SANITIZERS" "$REPO/build/CMakeCache.txt"; then
    log "configuring build/ (TMM_NATIVE_ARCH=$native)"
    cmake -S "$REPO" -B "$REPO/build" -G Ninja \
      -DCMAKE_PREFIX_PATH="$torch_cmake" \
      -DPython3_EXECUTABLE="$PYTHON" \
      -DTMM_NATIVE_ARCH="$native" \
      -DTMM_SANITIZE="$TMM_SANITIZERS" \
      -DTMM_PYTHON_OUTPUT_DIR="$REPO/tmm" >"$REPO/build.log" 2>&1 || { cat "$REPO/build.log"; exit 1; }
  fi
  log "building (ccache: ${CCACHE_DIR:-$HOME/.cache/ccache})"
  cmake --build "$REPO/build" -j "$(nproc)"
}

setup_all() {
  ensure_system_packages
  ensure_python
  build_tmm
}
