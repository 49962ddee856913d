#!/usr/bin/env bash
# Builds the libFuzzer targets through CMake (TMM_FUZZ=ON, clang, in
# build-fuzz/: the library's sources and CPU kernel variants instrumented
# with libFuzzer's coverage, ASan and UBSan) and runs each for a bounded
# number of inputs over its seeds (tests/fuzz/corpus/<target>/) and its
# regressions (tests/fuzz/regressions/<target>/). An input that crashes, leaks
# or hangs is written into tests/fuzz/regressions/<target>/ and fails the run:
# commit it with its fix (tests/cpp/test_fuzz_regressions.cpp replays it in
# every C++ test run).
#
#   tests/fuzz/run.sh                           # every target, FUZZ_RUNS inputs each (default 2000)
#   FUZZ_RUNS=0 tests/fuzz/run.sh               # build, then replay the seeds and regressions only
#   tests/fuzz/run.sh fuzz_tokenizer -max_total_time=600    # one target, longer (more libFuzzer flags)
#
# New inputs that reach new code collect in build-fuzz/corpus/<target>/.
# FUZZ_SEED fixes libFuzzer's random seed (default: a new one each run).
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/_env.sh"
ensure_system_packages clang libclang-rt-dev  # libFuzzer
ensure_python
OUT="$REPO/build-fuzz"
if [ ! -f "$OUT/build.ninja" ]; then
  log "configuring build-fuzz/ (clang, TMM_FUZZ=ON)"
  torch_cmake="$("$PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
  mkdir -p "$OUT"
  cmake -S "$REPO" -B "$OUT" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_PREFIX_PATH="$torch_cmake" \
    -DTMM_FUZZ=ON -DTMM_WITH_CUDA=OFF -DTMM_BUILD_PYTHON=OFF -DTMM_BUILD_TESTS=OFF -DTMM_BUILD_CLI=OFF \
    >"$OUT/configure.log" 2>&1 || { cat "$OUT/configure.log"; exit 1; }
fi
log "building the fuzzers (ccache: ${CCACHE_DIR:-$HOME/.cache/ccache})"
cmake --build "$OUT" --target tmm_fuzzers -j "$(nproc)"

# target: max_len dictionary
declare -A MAX_LEN=([fuzz_safetensors]=65536 [fuzz_model_config]=8192 [fuzz_tokenizer]=16384
                    [fuzz_checkpoint]=65536 [fuzz_distillation]=65536)
declare -A DICT=([fuzz_safetensors]=safetensors [fuzz_model_config]=model_config [fuzz_tokenizer]=tokenizer
                 [fuzz_checkpoint]=checkpoint [fuzz_distillation]=distillation)
targets=("${!MAX_LEN[@]}")
extra=()
if [ $# -gt 0 ] && [ -n "${MAX_LEN[$1]:-}" ]; then
  targets=("$1")
  shift
  extra=("$@")
fi
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:strict_string_checks=1:check_initialization_order=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export LSAN_OPTIONS="suppressions=$REPO/tests/sanitizers/lsan.supp:print_suppressions=0"
for target in $(printf '%s\n' "${targets[@]}" | sort); do
  name="${target#fuzz_}"
  regressions="$REPO/tests/fuzz/regressions/$name"
  mkdir -p "$OUT/corpus/$name" "$regressions"
  log "$target: ${FUZZ_RUNS:-2000} inputs ${extra[*]} over tests/fuzz/corpus/$name and tests/fuzz/regressions/$name"
  if ! "$OUT/fuzz/$target" -runs="${FUZZ_RUNS:-2000}" -max_len="${MAX_LEN[$target]}" -timeout=20 \
       -rss_limit_mb=4096 -dict="$REPO/tests/fuzz/${DICT[$target]}.dict" -print_final_stats=1 \
       ${FUZZ_SEED:+-seed="$FUZZ_SEED"} -artifact_prefix="$regressions/" "${extra[@]}" \
       "$OUT/corpus/$name" "$REPO/tests/fuzz/corpus/$name" "$regressions" 2>"$OUT/$target.log"; then
    tail -n 60 "$OUT/$target.log"
    log "$target failed: the input is kept in tests/fuzz/regressions/$name/ (commit it with its fix and its" \
        "expected error in tests/cpp/test_fuzz_regressions.cpp)"
    exit 1
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb|Done [0-9]+ runs" "$OUT/$target.log" | tr '\n' ' ' >&2
  echo >&2
done
