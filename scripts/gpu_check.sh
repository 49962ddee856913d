#!/usr/bin/env bash
# The one-call GPU check of the CUDA causal_toeplitz op (docs/cuda.md, "The
# GPU check"): build, correctness, CUDA-only checks, compute-sanitizer and the
# benchmark, within one deadline, on a machine with a GPU and no network.
#
#   bash scripts/gpu_check.sh             the device call (on the GPU machine)
#   bash scripts/gpu_check.sh --cpu       CPU mode: the same steps against the CPU op (CI runs it)
#   bash scripts/gpu_check.sh --dry-run   on this machine: stage what must be carried and print the
#                                         exact device call (command, carry list, timeout)
# Options: --budget SECONDS (default 480; CPU mode 300), --out DIR (default $OUT, else a new /tmp folder).
#
# Steps, each under `timeout` within the budget, every line also in $OUT/gpu_check.log:
#   1. preflight  tools, headers, libraries, GPU, torch -> preflight.txt (first in the log)
#   2. build      libtmm_torch + tmm._C against this machine's torch, CUDA on, in a fresh /tmp
#                 folder (CPU mode: the incremental build of ./build) -> build.log
#   3. check      scripts/gpu_check.py: op tests (pytest --device), CUDA graphs, zoo training
#                 step, copy bandwidth, benchmark -> check.log, gpu_check.json (rewritten after
#                 every record), tests.jsonl, pytest.log, junit.xml, bench-<dtype>/
#   4. sanitizer  compute-sanitizer memcheck (API errors not reported: those of torch and the
#                 driver are not tmm's) on a small case -> sanitizer.log (CPU mode: unsanitized)
#   5. report     the verdict and tables, printed last -> table.md, gpu_check.json
# Exit status: 0 passed, 1 a kernel is wrong, 2 could not run, 3 partially run.
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CARRY_JSON="third_party/nlohmann_json"  # git-ignored; staged by --dry-run, carried to the GPU machine
CARRY_UTF8PROC="third_party/utf8proc"   # likewise
DEVICE_TIMEOUT_S=540                    # the device call's timeout_s (the budget leaves it a margin)

log() { printf '[gpu_check %4ds] %s\n' "$(( $(date +%s) - START ))" "$*"; }

# ------------------------------------------------------------------ options
parse_args() {
  MODE=gpu DRY=0 BUDGET_S="${TMM_GPU_CHECK_BUDGET_S:-}" OUT="${OUT:-}"
  while [ $# -gt 0 ]; do
    case "$1" in
      --cpu) MODE=cpu ;;
      --dry-run) DRY=1 ;;
      --budget) BUDGET_S="$2"; shift ;;
      --out) OUT="$2"; shift ;;
      -h|--help) sed -n '2,22p' "${BASH_SOURCE[0]}"; exit 0 ;;
      *) echo "gpu_check.sh: unknown option '$1' (expected --cpu, --dry-run, --budget S, --out DIR)" >&2; exit 2 ;;
    esac
    shift
  done
  [ -n "$BUDGET_S" ] || BUDGET_S=$([ "$MODE" = cpu ] && echo 300 || echo 480)
}

# ------------------------------------------------------------------ nlohmann_json
# The library's sources need nlohmann/json.hpp; the GPU machine has no
# package. A system CMake package wins; else the headers staged in
# $CARRY_JSON (by --dry-run on a machine that has them) through a stub package.
json_headers_here() {
  for d in /usr/include /usr/local/include; do
    [ -f "$d/nlohmann/json.hpp" ] && { echo "$d"; return 0; }
  done
  return 1
}

json_cmake_package() {
  for d in /usr/share/cmake/nlohmann_json /usr/lib/cmake/nlohmann_json /usr/local/share/cmake/nlohmann_json \
           /usr/local/lib/cmake/nlohmann_json /usr/lib/x86_64-linux-gnu/cmake/nlohmann_json; do
    [ -f "$d/nlohmann_jsonConfig.cmake" ] && { echo "$d"; return 0; }
  done
  return 1
}

stage_json() {  # copies this machine's headers into the carried folder
  local src
  src="$(json_headers_here)" || { echo "no nlohmann/json.hpp on this machine (apt-get install nlohmann-json3-dev)"; return 1; }
  mkdir -p "$REPO/$CARRY_JSON/include"
  rm -rf "$REPO/$CARRY_JSON/include/nlohmann"
  cp -r "$src/nlohmann" "$REPO/$CARRY_JSON/include/"
  echo "staged $src/nlohmann -> $CARRY_JSON/include/nlohmann ($(du -sh "$REPO/$CARRY_JSON" | cut -f1))"
}

json_cmake_args() {  # prints -D arguments; writes the stub package into $1
  [ -z "${TMM_GPU_CHECK_JSON_STUB:-}" ] && json_cmake_package >/dev/null && return 0  # tests force the stub
  local inc="$REPO/$CARRY_JSON/include"
  [ -f "$inc/nlohmann/json.hpp" ] || return 1
  mkdir -p "$1"
  cat >"$1/nlohmann_jsonConfig.cmake" <<EOF
# Written by scripts/gpu_check.sh: the headers carried in $CARRY_JSON.
if(NOT TARGET nlohmann_json::nlohmann_json)
  add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
  set_target_properties(nlohmann_json::nlohmann_json PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "$inc")
endif()
EOF
  printf 'set(PACKAGE_VERSION "3.11.3")\nset(PACKAGE_VERSION_COMPATIBLE TRUE)\n' >"$1/nlohmann_jsonConfigVersion.cmake"
  echo "-Dnlohmann_json_DIR=$1"
}

# ------------------------------------------------------------------ utf8proc
# csrc/text links utf8proc's static library (cmake/utf8proc.cmake); the GPU
# machine has no package. This machine's, else the header and library staged
# in $CARRY_UTF8PROC (by --dry-run on a machine that has them).
utf8proc_here() {  # prints "HEADER LIBRARY"
  local inc lib
  for inc in /usr/include /usr/local/include; do [ -f "$inc/utf8proc.h" ] && break; done
  lib="$(readlink -f "$(c++ -print-file-name=libutf8proc.a 2>/dev/null)")"
  [ -f "$inc/utf8proc.h" ] && [ -f "$lib" ] && echo "$inc/utf8proc.h $lib"
}

stage_utf8proc() {  # copies this machine's header and static library into the carried folder
  local found
  found="$(utf8proc_here)" || { echo "no utf8proc.h and libutf8proc.a on this machine (apt-get install libutf8proc-dev)"; return 1; }
  mkdir -p "$REPO/$CARRY_UTF8PROC/include" "$REPO/$CARRY_UTF8PROC/lib"
  cp "${found% *}" "$REPO/$CARRY_UTF8PROC/include/"
  cp "${found#* }" "$REPO/$CARRY_UTF8PROC/lib/"
  echo "staged ${found% *} and ${found#* } -> $CARRY_UTF8PROC"
}

utf8proc_cmake_args() {  # prints -D arguments (none for this machine's own)
  [ -z "${TMM_GPU_CHECK_UTF8PROC_CARRIED:-}" ] && utf8proc_here >/dev/null && return 0  # tests force the carried copy
  local dir="$REPO/$CARRY_UTF8PROC"
  [ -f "$dir/include/utf8proc.h" ] && [ -f "$dir/lib/libutf8proc.a" ] || return 1
  echo "-DUTF8PROC_INCLUDE_DIR=$dir/include"
  echo "-DUTF8PROC_LIBRARY=$dir/lib/libutf8proc.a"
}

# ------------------------------------------------------------------ cuFFT
# The toolkit's cufft.h and libcufft, else those of the nvidia-cufft wheel
# (torch's own dependency): its header is linked into $1, its library named
# to CMake's FindCUDAToolkit.
cuda_root() { local nvcc; nvcc="$(command -v nvcc)" || return 1; dirname "$(dirname "$(readlink -f "$nvcc")")"; }

cufft_toolkit() {
  local root; root="$(cuda_root)" || return 1
  [ -z "${TMM_GPU_CHECK_CUFFT_WHEEL:-}" ] || return 1  # tests force the wheel
  [ -f "$root/include/cufft.h" ] && ls "$root"/lib64/libcufft.so* "$root"/targets/*/lib/libcufft.so* >/dev/null 2>&1 \
    && echo "$root"
}

cufft_wheel() {  # prints "HEADER_DIR LIBRARY" of the nvidia-cufft wheel
  "$PY" - <<'EOF' 2>/dev/null
import importlib.metadata as md
files = [f.locate() for f in (md.files("nvidia-cufft") or [])]
inc = [f for f in files if f.name == "cufft.h"]
lib = sorted(f for f in files if f.name.startswith("libcufft.so"))
if inc and lib:
    print(inc[0].parent.resolve(), lib[0].resolve())
EOF
}

cufft_cmake_args() {  # prints -D arguments (none for the toolkit); links the wheel's headers into $1
  cufft_toolkit >/dev/null && return 0
  local found inc lib
  found="$(cufft_wheel)" || return 1
  [ -n "$found" ] || return 1
  read -r inc lib <<<"$found"
  mkdir -p "$1"
  for h in "$inc"/cufft*.h; do ln -sf "$h" "$1/"; done
  echo "-DCUDA_cufft_LIBRARY=$lib"
  echo "-DCMAKE_CXX_FLAGS=-isystem $1"
  echo "-DCMAKE_CUDA_FLAGS=-isystem $1"
}

# ------------------------------------------------------------------ preflight
python_headers() {
  "$PY" -c 'import os, sysconfig; p = os.path.join(sysconfig.get_paths()["include"], "Python.h"); print(p if os.path.exists(p) else "")' 2>/dev/null
}

preflight() {  # prints the report; returns 1 if the check cannot run
  local fatal=0 v
  echo "preflight ($MODE mode) $(date -u +%FT%TZ) on $(uname -n), $(nproc) cores, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
  echo "  repo:              $REPO ($(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo 'no git'))"
  if [ "$MODE" = gpu ]; then
    v="$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -2)" || { v="MISSING ($v)"; fatal=1; }
    echo "  gpu:               $v"
  fi
  v="$(command -v nvcc && nvcc --version | tail -2 | head -1)" || v="MISSING"
  echo "  nvcc:              $(echo $v)"; [ "$MODE" = gpu ] && [ "$v" = MISSING ] && fatal=1
  v="$(cmake --version 2>/dev/null | head -1)" || v=""; echo "  cmake:             ${v:-MISSING}"; [ -n "$v" ] || fatal=1
  v="$(ninja --version 2>/dev/null)" || v=""; echo "  ninja:             ${v:-MISSING (Unix Makefiles instead)}"
  v="$(compute-sanitizer --version 2>/dev/null | tail -1)" || v=""; echo "  compute-sanitizer: ${v:-MISSING (step skipped)}"
  echo "  python:            $PY ($("$PY" --version 2>&1))"
  v="$(python_headers)"; echo "  python headers:    ${v:-MISSING (no tmm._C: op-level checks only)}"
  v="$("$PY" - 2>&1 <<'PYEOF' | tail -2
import importlib.util as u
try:
    import pytest
    print("pytest", pytest.__version__, "timeout plugin", bool(u.find_spec("pytest_timeout")))
except ImportError as e:
    print("pytest MISSING", e)
import torch
c = torch.cuda.is_available()
print(torch.__version__, "cuda", torch.version.cuda, "available", c, torch.cuda.get_device_name() if c else "")
PYEOF
)"
  echo "  torch:             $(tail -1 <<<"$v")"
  echo "  pytest:            $(head -1 <<<"$v" | sed 's/^pytest //')"
  case "$(tail -1 <<<"$v")" in *Error*|*error*) fatal=1 ;; *"available False"*) [ "$MODE" = gpu ] && fatal=1 ;; esac
  if [ "$MODE" = gpu ]; then
    if v="$(cufft_toolkit)"; then echo "  cuFFT:             toolkit $v"
    elif v="$(cufft_wheel)" && [ -n "$v" ]; then echo "  cuFFT:             nvidia-cufft wheel: $v"
    else echo "  cuFFT:             MISSING (neither the toolkit nor the nvidia-cufft wheel has it)"; fatal=1; fi
    if v="$(json_cmake_package)"; then echo "  nlohmann_json:     package $v"
    elif [ -f "$REPO/$CARRY_JSON/include/nlohmann/json.hpp" ]; then echo "  nlohmann_json:     carried $CARRY_JSON"
    else echo "  nlohmann_json:     MISSING (run scripts/gpu_check.sh --dry-run where it is installed and carry $CARRY_JSON)"; fatal=1; fi
    if v="$(utf8proc_here)"; then echo "  utf8proc:          $v"
    elif [ -f "$REPO/$CARRY_UTF8PROC/lib/libutf8proc.a" ]; then echo "  utf8proc:          carried $CARRY_UTF8PROC"
    else echo "  utf8proc:          MISSING (run scripts/gpu_check.sh --dry-run where it is installed and carry $CARRY_UTF8PROC)"; fatal=1; fi
  fi
  echo "  disk /tmp:         $(df -h /tmp 2>/dev/null | awk 'NR==2{print $4" free"}')"
  echo "  budget:            $BUDGET_S s; out: $OUT"
  return $fatal
}

# ------------------------------------------------------------------ steps
left() { echo $(( DEADLINE - $(date +%s) - $1 )); }

record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${4:-}" >>"$OUT/steps.tsv"; }

limited() {  # limited MAX RESERVE cmd...: cmd under timeout, at most MAX s, leaving RESERVE s of the budget
  local max=$1 reserve=$2; shift 2
  local limit; limit=$(left "$reserve"); [ "$limit" -gt "$max" ] && limit=$max
  [ "$limit" -ge 5 ] || return 124
  timeout --kill-after=10 "$limit" "$@"
}

build_gpu() {  # sets LIB and PYMOD (1 when tmm._C was built)
  local build args=() gen=(-G Ninja) keep_going=(-- -k 0) have_py targets=(tmm_torch)
  build="$(mktemp -d /tmp/tmm-gpu-build.XXXXXX)"
  mapfile -t args < <(json_cmake_args "$build/nlohmann_json_stub"; utf8proc_cmake_args
                      cufft_cmake_args "$build/cufft_include")
  command -v ninja >/dev/null || { gen=(); keep_going=(-- -k); }
  have_py="$(python_headers)"
  [ -n "$have_py" ] && targets+=(tmm_python)
  log "configure $build (${args[*]:-toolkit cuFFT, system nlohmann_json and utf8proc})"
  limited 120 100 cmake -S "$REPO" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')" \
    -DPython3_EXECUTABLE="$(command -v "$PY")" -DTMM_PYTHON_OUTPUT_DIR="$REPO/tmm" \
    -DTMM_WITH_CUDA=ON -DTMM_BUILD_PYTHON=$([ -n "$have_py" ] && echo ON || echo OFF) \
    -DTMM_BUILD_TESTS=OFF -DTMM_BUILD_CLI=OFF "${args[@]}" >"$OUT/build.log" 2>&1 || return $?
  # Both targets at once (in parallel), going on past a failure: without
  # tmm._C the check still runs what libtmm_torch alone allows.
  log "build ${targets[*]} (-j $(nproc))"
  limited 360 100 cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" "${keep_going[@]}" >>"$OUT/build.log" 2>&1
  local rc=$?
  LIB="$(find "$build" "$REPO/tmm" -maxdepth 3 -name 'libtmm_torch.so' 2>/dev/null | head -1)"
  [ -n "$LIB" ] || { log "libtmm_torch.so was not built (rc $rc)"; return $(( rc ? rc : 1 )); }
  PYMOD=0
  ls "$REPO"/tmm/_C*.so >/dev/null 2>&1 && [ "$rc" = 0 ] && PYMOD=1
  [ "$PYMOD" = 1 ] || log "tmm._C not built (rc $rc): the check runs the op-level parts with $LIB"
  return 0
}

build_cpu() {  # the checkout's own incremental build (scripts/_env.sh), as the tests use it
  limited 900 60 bash -c 'source scripts/_env.sh && ensure_python >/dev/null && build_tmm' >"$OUT/build.log" 2>&1 \
    || return $?
  LIB="$REPO/tmm/libtmm_torch.so" PYMOD=1
}

run_steps() {
  local t rc
  t=$(date +%s); preflight | tee "$OUT/preflight.txt"; rc=${PIPESTATUS[0]}
  record preflight "$rc" $(( $(date +%s) - t ))
  [ "$rc" = 0 ] || { log "preflight: the check cannot run here (see above)"; return; }

  t=$(date +%s); "build_$MODE"; rc=$?
  record build "$rc" $(( $(date +%s) - t )) "$( [ "${PYMOD:-0}" = 1 ] || echo 'tmm._C not built')"
  if [ "$rc" != 0 ]; then
    grep -E -m 40 "error|Error|CMake Error" "$OUT/build.log"; tail -5 "$OUT/build.log"
    log "build FAILED (rc $rc; build.log)"; return
  fi
  local device=cuda; [ "$MODE" = cpu ] && device=cpu
  local libarg=(); [ "$PYMOD" = 1 ] || libarg=(--lib "$LIB")

  # The sanitizer and the report keep their share; the check stops 15 s before its kill.
  local reserve=100; [ "$MODE" = cpu ] && reserve=30
  t=$(date +%s)
  log "check: scripts/gpu_check.py --device $device (deadline in $(left $reserve) s)"
  limited 900 $((reserve - 15)) "$PY" "$REPO/scripts/gpu_check.py" --device "$device" --out "$OUT" \
    --deadline $(( DEADLINE - reserve )) "${libarg[@]}" 2>&1 | tee "$OUT/check.log"
  record check "${PIPESTATUS[0]}" $(( $(date +%s) - t ))

  t=$(date +%s)
  if [ "$MODE" = cpu ]; then
    limited 60 15 "$PY" "$REPO/scripts/gpu_check.py" --sanitize-case --device cpu >"$OUT/sanitizer.log" 2>&1
    rc=$?; [ "$rc" = 0 ] && rc=cpu
  elif ! command -v compute-sanitizer >/dev/null; then
    echo "compute-sanitizer is not on PATH" >"$OUT/sanitizer.log"; rc=skipped
  else
    log "compute-sanitizer memcheck on the small case"
    limited 85 15 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 86 --print-limit 20 \
      "$PY" "$REPO/scripts/gpu_check.py" --sanitize-case --device cuda "${libarg[@]}" >"$OUT/sanitizer.log" 2>&1
    rc=$?
    tail -3 "$OUT/sanitizer.log"
  fi
  record sanitizer "$rc" $(( $(date +%s) - t ))
}

dry_run() {
  echo "On this machine: staging what the GPU machine lacks (git-ignored, so it must be carried):"
  stage_json || exit 2
  stage_utf8proc || exit 2
  cat <<EOF

The device call (the run tool), from the root of this checkout:
  command:   bash scripts/gpu_check.sh
  carry:     ["$CARRY_JSON", "$CARRY_UTF8PROC"]
  timeout_s: $DEVICE_TIMEOUT_S

It runs within a budget of ${BUDGET_S} s (--budget; the timeout leaves the rest as a margin):
  preflight ~5 s; build: configure <= 120 s, then tmm_torch and tmm._C together <= 360 s (while 100 s remain);
  check: the rest less 100 s (its sections: tests, graphs, zoo, bandwidth, bench, each skipped once the
  deadline leaves it too little); compute-sanitizer <= 85 s; the report last.
It writes to \$OUT: gpu_check.log (everything, the preflight first), preflight.txt, build.log, check.log,
gpu_check.json (rewritten after every record), tests.jsonl, pytest.log, junit.xml, bench-<dtype>/,
sanitizer.log, steps.tsv, table.md (the verdict and tables, also printed last).
Exit status: 0 passed, 1 a kernel is wrong, 2 could not run, 3 partially run.

Untracked files that will travel with the working tree (git status):
EOF
  git -C "$REPO" status --porcelain --untracked-files=all | grep '^??' | sed 's/^?? /  /' | head -20 || true
  echo
  echo "This machine's preflight (for reference; the GPU machine's comes first in its log):"
  MODE=gpu preflight || true
}

main() {
  parse_args "$@"
  PY="${PYTHON:-python3}"
  START=$(date +%s)
  DEADLINE=$((START + BUDGET_S))
  if [ "$DRY" = 1 ]; then OUT="${OUT:-/tmp/tmm_gpu_check}"; dry_run; exit 0; fi
  if [ "$MODE" = cpu ]; then  # the checkout's venv (scripts/_env.sh), as the tests use it
    PY="$(cd "$REPO" && bash -c 'source scripts/_env.sh && ensure_python >/dev/null && echo "$PYTHON"')" || exit 2
  fi
  export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
  [ -d /usr/local/cuda/bin ] && export PATH="$PATH:/usr/local/cuda/bin"
  OUT="${OUT:-$(mktemp -d /tmp/tmm_gpu_check.XXXXXX)}"
  mkdir -p "$OUT"
  rm -f "$OUT/steps.tsv" "$OUT/gpu_check.json" "$OUT/sanitizer.log"
  exec > >(tee -a "$OUT/gpu_check.log") 2>&1
  local tee_pid=$! rc
  cd "$REPO"
  run_steps
  # The report's last line gives the status; anything else (python itself
  # failing) means the check could not run.
  local report
  report="$("$PY" "$REPO/scripts/gpu_check.py" --report --out "$OUT" 2>&1)"
  printf '%s\n' "$report"
  rc="$(sed -n 's/^gpu_check exit status: \([0-3]\).*/\1/p' <<<"$report")"
  rc="${rc:-2}"
  log "done in $(( $(date +%s) - START )) s: exit status $rc; results in $OUT"
  exec >&- 2>&-
  wait "$tee_pid" 2>/dev/null
  exit "$rc"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  main "$@"
fi
