// Skipping a test case that cannot run here (no GPU, a CPU-only build).
// Catch2 v2 (Debian's) has no SKIP: TMM_SKIP prints a marker and returns,
// and CTest reports every test whose output holds the marker as skipped
// (SKIP_REGULAR_EXPRESSION in tests/cpp/CMakeLists.txt). Call it before any
// assertion: a skipped test must not also have checked something.
#pragma once

#include <catch2/catch.hpp>

#define TMM_SKIP_MARKER "tmm-test-skipped:"
#define TMM_SKIP(reason)               \
  do {                                 \
    WARN(TMM_SKIP_MARKER " " reason);  \
    return;                            \
  } while (0)
