// The checkout's files that the tests read: the zoo's configs, the tolerance
// table, the fuzz corpora. Their absolute paths are written in one generated
// source (repo_paths.cpp.in, configured by tests/cpp/CMakeLists.txt), so that
// no other test file's compile command holds the checkout's path: each then
// compiles alike, and ccache serves it, in any clone.
#pragma once

#include <string>

namespace tmm_test {

std::string models_dir();       // <checkout>/models
std::string tolerances_json();  // <checkout>/tmm/tolerances.json

}  // namespace tmm_test
