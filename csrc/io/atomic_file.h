// Files that are either written completely or not at all: the data goes to
// a temporary file next to the destination, which is fsynced and renamed
// over it; the directory is fsynced so the rename survives a crash. A
// reader never sees a partial file, and a crash leaves the previous one.
#pragma once

#include <cstdint>
#include <string>

namespace tmm::io {

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);  // creates path.tmp.<pid>.<n>
  ~AtomicFile();                          // without commit(): removes the temporary
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, uint64_t size);
  void commit();  // fsync, rename over path, fsync the directory

 private:
  std::string path_, tmp_;
  int fd_ = -1;
  bool committed_ = false;
};

void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace tmm::io
