// Paths of the folders a checkpoint or a distillation is saved in. POSIX
// calls rather than std::filesystem: libtorch.so exports std::filesystem
// symbols of its own (torch 2.11 wheels), some of which crash when they win
// symbol resolution over libstdc++'s.
#pragma once

#include <sys/stat.h>

#include <string>

namespace tmm::io {

// dir/file: no '/' added after an empty dir or one ending in '/'.
inline std::string join_path(const std::string& dir, const char* file) {
  return dir.empty() || dir.back() == '/' ? dir + file : dir + "/" + file;
}

inline bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

inline bool is_regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace tmm::io
