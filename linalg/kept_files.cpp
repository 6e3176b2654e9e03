#include "linalg/kept_files.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <thread>

namespace dfmp2::linalg {
namespace {

// A descriptor closed when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a regular file";
}

// Why the open of an entry failed, in words.
std::string open_failure(const std::string& path, int error) {
  if (error == ELOOP) return fmt::format("'{}' is a symbolic link", path);
  if (error == EISDIR) return fmt::format("'{}' is a folder", path);
  return fmt::format("'{}': {}", path, std::strerror(error));
}

// Why an opened entry is not a regular file of this user's ("" when it is).
std::string unfit(const std::string& path, const struct stat& st) {
  if (!S_ISREG(st.st_mode)) return fmt::format("'{}' is {}", path, kind_of(st.st_mode));
  if (st.st_uid != ::geteuid()) return fmt::format("'{}' belongs to another user (uid {})", path, st.st_uid);
  return {};
}

// The folder, opened for the *at calls (the folder itself may be reached through a link: ~/.cache often is one).
int open_folder(const std::string& folder) { return ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); }

}  // namespace

std::string unpredictable_name(const std::string& prefix) {
  std::uint64_t bits = 0;
  if (::getrandom(&bits, sizeof bits, 0) != static_cast<ssize_t>(sizeof bits)) {
    std::random_device device;  // getrandom is missing only on very old kernels
    bits = (std::uint64_t(device()) << 32) ^ device();
  }
  return fmt::format("{}{:016x}", prefix, bits);
}

std::string user_cache_folder() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') return std::string(xdg) + "/dfmp2";
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') return std::string(home) + "/.cache/dfmp2";
  return {};
}

std::string prepare_kept_folder(const std::string& folder) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path path(folder);
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
  if (::mkdir(folder.c_str(), 0700) != 0 && errno != EEXIST) {
    return fmt::format("'{}' cannot be created: {}", folder, std::strerror(errno));
  }
  struct stat st {};
  if (::stat(folder.c_str(), &st) != 0) return fmt::format("'{}': {}", folder, std::strerror(errno));
  if (!S_ISDIR(st.st_mode)) return fmt::format("'{}' is not a folder", folder);
  if (st.st_uid != ::geteuid()) return fmt::format("'{}' belongs to another user (uid {})", folder, st.st_uid);
  // Writable by everyone, or by a group other than the user's own (a user-private group, umask 002, is the user):
  // as sshd's StrictModes judges a home folder.
  if ((st.st_mode & S_IWOTH) != 0 || ((st.st_mode & S_IWGRP) != 0 && st.st_gid != ::getegid())) {
    return fmt::format("'{}' is writable by other users (mode {:04o})", folder, st.st_mode & 07777);
  }
  if (::access(folder.c_str(), W_OK | X_OK) != 0) return fmt::format("'{}' is not writable", folder);
  return {};
}

KeptText read_kept_file(const std::string& folder, const std::string& name, std::size_t max_bytes) {
  const std::string path = folder + "/" + name;
  KeptText out;
  const Fd dir(open_folder(folder));
  if (dir.get() < 0) {
    if (errno != ENOENT) out.refused = open_failure(folder, errno);
    return out;
  }
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever.
  const Fd fd(::openat(dir.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno != ENOENT) out.refused = open_failure(path, errno);
    return out;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    out.refused = open_failure(path, errno);
    return out;
  }
  if (out.refused = unfit(path, st); !out.refused.empty()) return out;
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    out.refused = fmt::format("'{}' holds {} bytes, more than the {} a valid one can", path, st.st_size, max_bytes);
    return out;
  }
  std::string text(max_bytes + 1, '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd.get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      out.refused = open_failure(path, errno);
      return out;
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got > max_bytes) {  // it grew after the fstat
    out.refused = fmt::format("'{}' holds more than the {} bytes a valid one can", path, max_bytes);
    return out;
  }
  text.resize(got);
  out.text = std::move(text);
  return out;
}

void write_kept_file(const std::string& folder, const std::string& name, const std::string& text) {
  const Fd dir(open_folder(folder));
  if (dir.get() < 0) throw std::runtime_error(open_failure(folder, errno));
  const std::string temporary = unpredictable_name("." + name + ".") + ".tmp";
  const std::string shown = folder + "/" + temporary;
  // O_EXCL: a new file, never one that was there (nor the target of a link that was there).
  Fd fd(::openat(dir.get(), temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (fd.get() < 0) throw std::runtime_error("cannot create " + open_failure(shown, errno));
  std::string failure;
  for (std::size_t done = 0; done < text.size() && failure.empty();) {
    const ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) failure = fmt::format("cannot write '{}': {}", shown, std::strerror(n < 0 ? errno : ENOSPC));
    else done += static_cast<std::size_t>(n);
  }
  // A full disk can show at the close as much as at the write.
  if (::close(fd.release()) != 0 && failure.empty()) {
    failure = fmt::format("cannot write '{}': {}", shown, std::strerror(errno));
  }
  if (failure.empty() && ::renameat(dir.get(), temporary.c_str(), dir.get(), name.c_str()) != 0) {
    failure = fmt::format("cannot rename '{}' to '{}/{}': {}", shown, folder, name, std::strerror(errno));
  }
  if (!failure.empty()) {
    ::unlinkat(dir.get(), temporary.c_str(), 0);
    throw std::runtime_error(failure);
  }
}

KeptLock::KeptLock(const std::string& folder, const std::string& name, double patience_seconds) {
  const std::string path = folder + "/" + name;
  const Fd dir(open_folder(folder));
  if (dir.get() < 0) {
    why_not_ = open_failure(folder, errno);
    return;
  }
  Fd fd(::openat(dir.get(), name.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0600));
  if (fd.get() < 0) {
    why_not_ = open_failure(path, errno);
    return;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    why_not_ = open_failure(path, errno);
    return;
  }
  if (why_not_ = unfit(path, st); !why_not_.empty()) return;
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration<double>(patience_seconds);
  while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      why_not_ = open_failure(path, errno);
      return;
    }
    if (Clock::now() >= deadline) {
      why_not_ = fmt::format("'{}' was held by another process for {:g} s", path, patience_seconds);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  fd_ = fd.release();
}

KeptLock::~KeptLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

}  // namespace dfmp2::linalg
