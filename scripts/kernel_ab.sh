#!/usr/bin/env bash
# Interleaved A/B of the CPU FFT kernels of two source trees in one process
# (lab/bench/kernel_ab.cpp): per call the min and median ms of each and
# whether their outputs are bitwise equal. For kernel work on a shared
# machine, where two processes timed one after the other see different load.
#
#   bash scripts/kernel_ab.sh A B [--variant avx512|avx2|default] [--rounds N] -- L MODE REPS [THREADS B C G K]
#
# A and B: git revisions of this repository, or "." for the working tree;
# the variant's sources, files and flags are read from each tree's
# CMakeLists.txt (TMM_CPU_VARIANT_SOURCES, TMM_CPU_KERNEL_OPTIONS,
# TMM_CPU_FLAGS_<variant>); the portable fft_size.cpp is B's. --rounds runs
# the driver N times (default 1). Needs g++, GNU ld and objcopy; valgrind's
# callgrind runs the driver for instruction counts (avx2 or default: valgrind
# lacks AVX-512). At L >= 16384 the same code ran 8-13% faster as table b
# than as table a in one process (AMD EPYC; a alone and b alone: equal):
# there, time AB_ONLY=a and AB_ONLY=b in alternating processes. Example:
#   bash scripts/kernel_ab.sh main . -- 4096 both 5 2
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VARIANT=avx512
ROUNDS=1
REVS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --variant) VARIANT="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --) shift; break ;;
    *) REVS+=("$1"); shift ;;
  esac
done
if [ ${#REVS[@]} -ne 2 ] || [ $# -lt 3 ]; then
  sed -n '2,18p' "$0" >&2
  exit 2
fi

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# tree REV DIR: the sources of REV (or the working tree for ".") in DIR.
tree() {
  mkdir -p "$2"
  if [ "$1" = . ]; then
    cp -r "$REPO/csrc" "$REPO/CMakeLists.txt" "$2/"
  else
    git -C "$REPO" archive "$1" csrc CMakeLists.txt | tar -x -C "$2"
  fi
}

# cmake_list DIR NAME: the values of set(NAME ...) in DIR's CMakeLists.txt.
cmake_list() {
  awk -v name="$2" '$0 ~ "^ *set\\(" name "([ )]|$)" {grab=1} grab {print} grab && /\)/ {exit}' "$1/CMakeLists.txt" \
    | tr '\n' ' ' | sed -e "s/.*set($2//" -e 's/).*//'
}

# object DIR TABLE: DIR's variant object with its table renamed to TABLE.
object() {
  local dir="$1" sources flags objs=()
  sources="$(cmake_list "$dir" TMM_CPU_VARIANT_SOURCES)"
  flags="$(cmake_list "$dir" TMM_CPU_KERNEL_OPTIONS) $([ "$VARIANT" = default ] || cmake_list "$dir" "TMM_CPU_FLAGS_$VARIANT")"
  for src in $sources; do
    g++ -O3 -DNDEBUG -std=gnu++17 -fPIC $flags -DTMM_CPU_VARIANT="$VARIANT" -I"$dir/csrc" -c "$dir/$src" \
      -o "$dir/$(basename "$src").o" &
    objs+=("$dir/$(basename "$src").o")
  done
  wait
  ld -r --force-group-allocation -o "$dir/all.o" "${objs[@]}"
  objcopy --keep-global-symbol="tmm_cpu_kernels_$VARIANT" "$dir/all.o" "$dir/one.o"
  objcopy --redefine-sym "tmm_cpu_kernels_$VARIANT=$2" "$dir/one.o" "$dir/table.o"
}

tree "${REVS[0]}" "$WORK/a"
tree "${REVS[1]}" "$WORK/b"
object "$WORK/a" kernel_table_a
object "$WORK/b" kernel_table_b
g++ -O2 -std=gnu++17 -I"$WORK/b/csrc" "$REPO/lab/bench/kernel_ab.cpp" "$WORK/b/csrc/cpu/fft_size.cpp" \
  "$WORK/a/table.o" "$WORK/b/table.o" -o "$WORK/kernel_ab" -lpthread
for _ in $(seq "$ROUNDS"); do "$WORK/kernel_ab" "$@"; done
