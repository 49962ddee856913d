#!/usr/bin/env bash
# The one-call GPU check of the CUDA causal_toeplitz ops (issue 3), for a
# machine with a GPU, nvcc and a CUDA build of torch, and no network:
#
#   1. builds libtmm_torch from this checkout against that machine's torch
#      into a fresh build directory (CUDA on, no Python module, no tests);
#   2. scripts/gpu_check.py: correctness (CUDA vs CPU op vs float64 reference,
#      gradcheck, opcheck, torch.compile with CUDA graphs), then the benchmark;
#   3. compute-sanitizer memcheck on a small case, where the machine allows it;
#   4. prints the summary table last.
#
# Writes build.log, check.log, sanitizer.log, gpu_check.json and table.md
# under $OUT (default /tmp/tmm_gpu_check). Budget: under 8 minutes in all.
#
# The GPU machine has no nlohmann_json; carry the headers with the call:
#   mkdir -p third_party/nlohmann_json/include && cp -r /usr/include/nlohmann third_party/nlohmann_json/include/
#   (third_party/ is git-ignored, as carried paths must be)
#   device run: command "bash scripts/gpu_check.sh", carry ["third_party"]
# Environment: PYTHON (default python3), OUT, TMM_GPU_CHECK_BUDGET_S (480),
# TMM_JSON_STUB=1 (use the nlohmann_json stub even where a package exists).
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${OUT:-/tmp/tmm_gpu_check}"
PY="${PYTHON:-python3}"
BUDGET_S="${TMM_GPU_CHECK_BUDGET_S:-480}"
START=$(date +%s)
DEADLINE=$((START + BUDGET_S))
mkdir -p "$OUT"
log() { printf '[gpu_check %4ds] %s\n' "$(( $(date +%s) - START ))" "$*" >&2; }

# ------------------------------------------------------------------ build
# nvcc and compute-sanitizer: the toolkit's bin folder after whatever PATH has.
[ -d /usr/local/cuda/bin ] && export PATH="$PATH:/usr/local/cuda/bin"
if [ -z "${CUDACXX:-}" ] && ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi
TORCH_CMAKE="$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')" || {
  log "cannot import torch with $PY"; exit 2; }
BUILD="$(mktemp -d /tmp/tmm-gpu-build.XXXXXX)"
SRC="$REPO"
EXTRA=()

# The top-level CMakeLists requires the nlohmann_json package. Where the
# machine has none, a stub package satisfies find_package: an INTERFACE
# target whose include folder is third_party/nlohmann_json/include, the
# headers carried from a machine that has them (git-ignored; see the top).
have_json=0
for d in /usr/share/cmake/nlohmann_json /usr/lib/cmake/nlohmann_json /usr/local/share/cmake/nlohmann_json \
         /usr/local/lib/cmake/nlohmann_json /usr/lib/x86_64-linux-gnu/cmake/nlohmann_json; do
  [ -f "$d/nlohmann_jsonConfig.cmake" ] && have_json=1
done
if [ "$have_json" = 0 ] || [ -n "${TMM_JSON_STUB:-}" ]; then
  if grep -rqs "nlohmann/json" "$REPO/csrc" && [ ! -f "$REPO/third_party/nlohmann_json/include/nlohmann/json.hpp" ]; then
    log "the sources include nlohmann/json.hpp and this machine has no nlohmann_json: copy the headers to"
    log "third_party/nlohmann_json/include/nlohmann (cp -r /usr/include/nlohmann ...) and carry third_party"
    exit 1
  fi
  STUB="$BUILD/nlohmann_json_stub"
  mkdir -p "$STUB"
  cat >"$STUB/nlohmann_jsonConfig.cmake" <<EOF
# Stub written by scripts/gpu_check.sh: no nlohmann_json package on this machine.
if(NOT TARGET nlohmann_json::nlohmann_json)
  add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
  if(EXISTS "$REPO/third_party/nlohmann_json/include")
    set_target_properties(nlohmann_json::nlohmann_json PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "$REPO/third_party/nlohmann_json/include")
  endif()
endif()
EOF
  cat >"$STUB/nlohmann_jsonConfigVersion.cmake" <<'EOF'
set(PACKAGE_VERSION "3.11.3")
if(PACKAGE_FIND_VERSION_MAJOR STREQUAL "" OR PACKAGE_FIND_VERSION_MAJOR EQUAL 3)
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
endif()
EOF
  EXTRA+=("-Dnlohmann_json_DIR=$STUB")
  log "no nlohmann_json package here: using a stub package"
fi

log "configuring $BUILD (torch: $TORCH_CMAKE)"
if ! cmake -S "$SRC" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$TORCH_CMAKE" \
    -DTMM_WITH_CUDA=ON -DTMM_BUILD_PYTHON=OFF -DTMM_BUILD_TESTS=OFF "${EXTRA[@]}" \
    >"$OUT/build.log" 2>&1; then
  tail -40 "$OUT/build.log"; log "configure FAILED (build.log)"; exit 1
fi
log "building tmm_torch"
if ! cmake --build "$BUILD" -j "$(nproc)" --target tmm_torch >>"$OUT/build.log" 2>&1; then
  grep -E "error|Error" "$OUT/build.log" | head -40; log "build FAILED (build.log)"; exit 1
fi
LIB="$(find "$BUILD" -name 'libtmm_torch.so' | head -1)"
[ -n "$LIB" ] || { log "libtmm_torch.so not found in $BUILD"; exit 1; }
log "built $LIB"

# ------------------------------------------------------------------ checks
export PYTHONUNBUFFERED=1
SANITIZE_S=100  # torch's start under memcheck is slow; a timeout is reported as inconclusive
"$PY" "$REPO/scripts/gpu_check.py" --lib "$LIB" --out "$OUT" --deadline $((DEADLINE - SANITIZE_S - 15)) \
  2>&1 | tee "$OUT/check.log"
CHECK_RC=${PIPESTATUS[0]}

# ------------------------------------------------------------------ sanitizer
SAN_RC=skipped
LEFT=$((DEADLINE - $(date +%s) - 20))
if ! command -v compute-sanitizer >/dev/null; then
  echo "compute-sanitizer not on PATH" >"$OUT/sanitizer.log"
elif [ "$LEFT" -lt 45 ]; then
  echo "skipped: $LEFT s left of the budget" >"$OUT/sanitizer.log"
else
  log "compute-sanitizer memcheck on a small case (timeout $((LEFT < SANITIZE_S ? LEFT : SANITIZE_S)) s)"
  timeout $((LEFT < SANITIZE_S ? LEFT : SANITIZE_S)) compute-sanitizer --tool memcheck --error-exitcode 86 \
    --print-limit 20 "$PY" "$REPO/scripts/gpu_check.py" --lib "$LIB" --sanitize >"$OUT/sanitizer.log" 2>&1
  SAN_RC=$?
  tail -5 "$OUT/sanitizer.log" >&2
fi

# ------------------------------------------------------------------ report
"$PY" "$REPO/scripts/gpu_check.py" --out "$OUT" --report --sanitizer-rc "$SAN_RC" \
  --sanitizer-log "$OUT/sanitizer.log" --wall-s $(( $(date +%s) - START ))
REPORT_RC=$?
log "done in $(( $(date +%s) - START )) s (check rc $CHECK_RC, sanitizer rc $SAN_RC)"
[ "$CHECK_RC" = 0 ] && [ "$REPORT_RC" = 0 ] || exit 1
