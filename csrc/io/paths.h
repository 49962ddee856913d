// Paths of the folders a checkpoint or a distillation is saved in, and the
// text of a file in them. POSIX calls rather than std::filesystem: libtorch.so exports std::filesystem
// symbols of its own (torch 2.11 wheels), some of which crash when they win
// symbol resolution over libstdc++'s.
#pragma once

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include <c10/util/Exception.h>

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

// The whole file at `path`; errors start with `what` and name the path.
inline std::string read_text_file(const std::string& path, const char* what) {
  struct stat st {};
  TORCH_CHECK(::stat(path.c_str(), &st) == 0, what, ": '", path, "' ",
              errno == ENOENT ? "does not exist" : std::strerror(errno));
  TORCH_CHECK(S_ISREG(st.st_mode), what, ": '", path, "' is not a regular file");
  std::ifstream f(path, std::ios::binary);
  TORCH_CHECK(f, what, ": cannot open '", path, "': ", std::strerror(errno));
  std::ostringstream s;
  s << f.rdbuf();
  TORCH_CHECK(!f.bad(), what, ": cannot read '", path, "'");
  return s.str();
}

}  // namespace tmm::io
