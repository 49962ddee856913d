#include "io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include <c10/util/Exception.h>

namespace tmm::io {
namespace {

std::string parent_dir(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  // The counter keeps two threads saving to one path off each other's temporary.
  static std::atomic<uint64_t> counter{0};
  tmp_ = path_ + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  TORCH_CHECK(fd_ >= 0, "cannot create the temporary file '", tmp_, "' for '", path_, "': ", std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

void AtomicFile::write(const void* data, uint64_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (size > 0) {
    const ssize_t r = ::write(fd_, p, std::min<uint64_t>(size, 1u << 30));
    if (r < 0 && errno == EINTR) continue;
    TORCH_CHECK(r > 0, "writing '", tmp_, "' failed: ", std::strerror(errno));
    p += r, size -= uint64_t(r);
  }
}

void AtomicFile::commit() {
  TORCH_CHECK(::fsync(fd_) == 0, "fsync of '", tmp_, "' failed: ", std::strerror(errno));
  const int fd = fd_;
  fd_ = -1;
  TORCH_CHECK(::close(fd) == 0, "closing '", tmp_, "' failed: ", std::strerror(errno));
  TORCH_CHECK(::rename(tmp_.c_str(), path_.c_str()) == 0, "cannot rename '", tmp_, "' to '", path_,
              "': ", std::strerror(errno));
  committed_ = true;
  // Make the rename durable; some file systems cannot fsync a directory.
  const int dir = ::open(parent_dir(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  TORCH_CHECK(dir >= 0, "cannot open the directory of '", path_, "' to fsync it: ", std::strerror(errno));
  const bool synced = ::fsync(dir) == 0 || errno == EINVAL || errno == ENOTSUP;
  const int err = errno;
  ::close(dir);
  TORCH_CHECK(synced, "fsync of the directory of '", path_, "' failed: ", std::strerror(err));
}

void write_file_atomically(const std::string& path, const std::string& text) {
  AtomicFile f(path);
  f.write(text.data(), text.size());
  f.commit();
}

}  // namespace tmm::io
