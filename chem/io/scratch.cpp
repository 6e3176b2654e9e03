#include "chem/io/scratch.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "linalg/errors.hpp"
#include "linalg/kept_files.hpp"

namespace dfmp2::chem {

double free_bytes(const std::string& folder) {
  struct statvfs s;
  if (::statvfs(folder.c_str(), &s) != 0) return -1;
  return double(s.f_bavail) * double(s.f_frsize);
}

void check_scratch_folder(const std::string& folder) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) {
    throw OutputError(fmt::format("scratch: folder '{}' does not exist (or is not a folder)", folder));
  }
  if (::access(folder.c_str(), W_OK | X_OK) != 0) {
    throw OutputError(fmt::format("scratch: folder '{}' is not writable", folder));
  }
}

ScratchFile::ScratchFile(const std::string& folder, const std::string& what)
    : label_((std::filesystem::path(folder) / ("dfmp2-" + what)).string()) {
  // Unnamed from the start (O_TMPFILE): the space goes back to the file system when the process ends, however it
  // ends. A signal handler cannot run on SIGKILL, which mpirun sends its ranks soon after SIGINT, and a named file
  // would then stay behind.
  fd_ = ::open(folder.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd_ < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
    // A file system without O_TMPFILE (some network and overlay file systems): a new name, unlinked at once.
    const std::string named = linalg::unpredictable_name(label_ + ".tmp.");
    fd_ = ::open(named.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd_ >= 0) ::unlink(named.c_str());
  }
  if (fd_ < 0) {
    throw OutputError(fmt::format("scratch: cannot create a file in '{}': {}", folder, std::strerror(errno)));
  }
}

ScratchFile::~ScratchFile() {
  if (fd_ >= 0) ::close(fd_);
}

void ScratchFile::write_bytes(const void* data, std::size_t bytes, std::size_t offset) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pwrite(fd_, p, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = n < 0 ? errno : ENOSPC;
      throw ResourceError(fmt::format("scratch: writing '{}' failed at byte {}: {} (free space in the scratch folder, "
                                      "or use a larger one with the key 'scratch')",
                                      label_, offset, std::strerror(e)));
    }
    p += n;
    bytes -= static_cast<std::size_t>(n);
    offset += static_cast<std::size_t>(n);
  }
}

void ScratchFile::read_bytes(void* data, std::size_t bytes, std::size_t offset) const {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd_, p, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      throw ResourceError(fmt::format("scratch: reading '{}' failed at byte {}: {}", label_, offset,
                                      n < 0 ? std::strerror(errno) : "the file is shorter than written"));
    }
    p += n;
    bytes -= static_cast<std::size_t>(n);
    offset += static_cast<std::size_t>(n);
  }
}

void ScratchFile::sync() { ::fdatasync(fd_); }

void ScratchFile::write(const double* data, std::size_t count, std::size_t offset) {
  write_bytes(data, count * sizeof(double), offset * sizeof(double));
}
void ScratchFile::read(double* data, std::size_t count, std::size_t offset) const {
  read_bytes(data, count * sizeof(double), offset * sizeof(double));
}
void ScratchFile::write(const float* data, std::size_t count, std::size_t offset) {
  write_bytes(data, count * sizeof(float), offset * sizeof(float));
}
void ScratchFile::read(float* data, std::size_t count, std::size_t offset) const {
  read_bytes(data, count * sizeof(float), offset * sizeof(float));
}

}  // namespace dfmp2::chem
