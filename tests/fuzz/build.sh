#!/usr/bin/env bash
# Builds the libFuzzer targets into build-fuzz/ with clang (libFuzzer + ASan +
# UBSan). The tmm sources they reach are compiled into each fuzzer with
# coverage instrumentation (the gcc-built libtmm_torch would be opaque to the
# fuzzer); libtorch is the venv's, built by gcc, linked as usual (clang uses
# libstdc++ here, so the ABI matches).
#
#   tests/fuzz/build.sh                     # build the three targets
#   nice -n 19 build-fuzz/fuzz_safetensors -max_len=65536 -timeout=10 -rss_limit_mb=4096 \
#       -max_total_time=600 build-fuzz/corpus/safetensors tests/fuzz/corpus/safetensors
#   nice -n 19 build-fuzz/fuzz_model_config -max_len=8192 -timeout=10 -rss_limit_mb=4096 \
#       -max_total_time=600 build-fuzz/corpus/model_config tests/fuzz/corpus/model_config
#   nice -n 19 build-fuzz/fuzz_tokenizer -max_len=16384 -timeout=10 -rss_limit_mb=4096 \
#       -dict=tests/fuzz/tokenizer.dict -max_total_time=600 build-fuzz/corpus/tokenizer tests/fuzz/corpus/tokenizer
#
# (The first corpus directory collects what the fuzzer finds; the seeds in
# tests/fuzz/corpus/ stay untouched.) A crashing input is written to ./crash-*:
# keep it under tests/fuzz/regressions/<target>/, where the Catch2 test
# tests/cpp/test_fuzz_regressions.cpp replays it in the normal test run.
# Needs clang and libclang-rt-<version>-dev (libFuzzer); not part of CI.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/_env.sh"
ensure_python
CXX="${CXX_FUZZ:-clang++}"
command -v "$CXX" >/dev/null || { log "no $CXX: apt-get install clang libclang-rt-14-dev"; exit 1; }

OUT="$REPO/build-fuzz"
TORCH="$("$PYTHON" -c 'import os, torch; print(os.path.dirname(torch.__file__))')"
TORCH_VERSION="$("$PYTHON" -c 'import torch; print(torch.__version__)')"
mkdir -p "$OUT/obj" "$OUT/include/tmm"
cat >"$OUT/include/tmm/version.h.new" <<H
#pragma once
#define TMM_VERSION "fuzz"
#define TMM_TORCH_VERSION "$TORCH_VERSION"
#define TMM_WITH_CUDA 0
H
cmp -s "$OUT/include/tmm/version.h.new" "$OUT/include/tmm/version.h" || mv "$OUT/include/tmm/version.h.new" "$OUT/include/tmm/version.h"
rm -f "$OUT/include/tmm/version.h.new"

SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
CXXFLAGS="-std=c++17 -O1 -g -fPIC $SAN -DUTF8PROC_STATIC -I$REPO/csrc/include -I$REPO/csrc -I$REPO -I$OUT/include \
  -isystem $TORCH/include -isystem $TORCH/include/torch/csrc/api/include"
LAUNCHER=""
command -v ccache >/dev/null && LAUNCHER=ccache

# Every C++ source of libtmm_torch but the CUDA glue and the Python module.
SOURCES=$(cd "$REPO" && ls csrc/cpu/*.cpp csrc/io/*.cpp csrc/models/*.cpp csrc/ops/*.cpp csrc/text/*.cpp | grep -v _cuda.cpp)
log "compiling $(echo "$SOURCES" | wc -w) tmm sources with $CXX (fuzzer coverage, ASan, UBSan)"
# Each must compile with clang 14 (Debian 12's), so none uses a C++20 feature
# that gcc accepts in C++17 mode (e.g. a lambda capturing a structured
# binding, which clang < 16 rejects); a compile error stops the build.
export CXX CXXFLAGS LAUNCHER REPO OUT
echo "$SOURCES" | xargs -P "${FUZZ_JOBS:-2}" -I{} sh -c '
  $LAUNCHER $CXX $CXXFLAGS -fsanitize=fuzzer-no-link -c "$REPO/{}" -o "$OUT/obj/$(echo {} | tr / _).o"'
OBJS=$(for s in $SOURCES; do echo "$OUT/obj/$(echo "$s" | tr / _).o"; done)
# The tokenizer is torch-free: its fuzzer links only csrc/text.
TEXT_OBJS=$(for s in $SOURCES; do case $s in csrc/text/*) echo "$OUT/obj/$(echo "$s" | tr / _).o";; esac; done)

# csrc/text's Unicode data: utf8proc's static library, as in libtmm_torch (cmake/utf8proc.cmake).
UTF8PROC="$($CXX -print-file-name=libutf8proc.a)"
[ -f "$UTF8PROC" ] || { log "no libutf8proc.a: apt-get install libutf8proc-dev"; exit 1; }
LIBS="$UTF8PROC -L$TORCH/lib -Wl,-rpath,$TORCH/lib -Wl,--no-as-needed -ltorch -ltorch_cpu -lc10 -Wl,--as-needed -lpthread"
for target in fuzz_safetensors fuzz_model_config fuzz_tokenizer; do
  log "linking build-fuzz/$target"
  $LAUNCHER $CXX $CXXFLAGS -fsanitize=fuzzer -c "$REPO/tests/fuzz/$target.cpp" -o "$OUT/obj/$target.o"
  # shellcheck disable=SC2086
  if [ "$target" = fuzz_tokenizer ]; then
    $CXX $SAN -fsanitize=fuzzer "$OUT/obj/$target.o" $TEXT_OBJS "$UTF8PROC" -lpthread -o "$OUT/$target"
  else
    $CXX $SAN -fsanitize=fuzzer "$OUT/obj/$target.o" $OBJS $LIBS -o "$OUT/$target"
  fi
done
mkdir -p "$OUT/corpus/safetensors" "$OUT/corpus/model_config" "$OUT/corpus/tokenizer"
log "built build-fuzz/fuzz_safetensors, build-fuzz/fuzz_model_config and build-fuzz/fuzz_tokenizer"
