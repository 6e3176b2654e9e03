#include "chem/io/temporary_files.hpp"

#include <fmt/format.h>
#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <csignal>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "linalg/errors.hpp"
#include "linalg/kept_files.hpp"

namespace dfmp2::chem {
namespace {

// The handler may only call async-signal-safe functions (unlink, signal, raise), so the live temporaries are kept
// in a fixed table of C strings rather than in a std::set behind a mutex.
constexpr int kSlots = 64;
constexpr std::size_t kPathMax = 4096;
struct Slot {
  std::atomic<bool> claimed{false};  // owned by a TemporaryFile
  std::atomic<bool> live{false};     // path is complete: the handler may unlink it
  char path[kPathMax] = {};
};
std::array<Slot, kSlots> slots;

int claim(const std::string& path) {
  if (path.size() >= kPathMax) return -1;
  for (int i = 0; i < kSlots; ++i) {
    Slot& s = slots[static_cast<std::size_t>(i)];
    if (s.claimed.exchange(true)) continue;
    // The path is written before the slot is marked live, so a handler sees either nothing or the whole path.
    std::memcpy(s.path, path.c_str(), path.size() + 1);
    s.live.store(true);
    return i;
  }
  return -1;
}

void release(int slot) {
  if (slot < 0) return;
  slots[static_cast<std::size_t>(slot)].live.store(false);
  slots[static_cast<std::size_t>(slot)].claimed.store(false);
}

extern "C" void on_fatal_signal(int sig) {
  for (auto& s : slots) {
    if (s.live.load()) ::unlink(s.path);
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);  // the process ends by the signal, so the shell sees 128 + sig as it expects
}

}  // namespace

TemporaryFile::TemporaryFile(std::string final_path)
    : final_(std::move(final_path)), temporary_(linalg::unpredictable_name(final_ + ".tmp.")) {
  // The handler learns the name before the file exists: a signal that arrives between the two (on any thread:
  // masking this one would not stop the others from taking it) then unlinks a name nobody holds, instead of
  // missing a file that already exists.
  slot_ = claim(temporary_);
  // Created here, exclusively: a file or link that someone placed at the name in advance cannot receive the write.
  const int fd = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd < 0) {
    const std::string why = std::strerror(errno);
    release(slot_);
    slot_ = -1;
    temporary_.clear();
    throw OutputError(fmt::format("cannot create a file beside '{}': {}", final_, why));
  }
  ::close(fd);
}

TemporaryFile::~TemporaryFile() {
  if (!temporary_.empty()) ::unlink(temporary_.c_str());
  release(slot_);
}

std::string TemporaryFile::commit() {
  std::error_code ec;
  std::filesystem::rename(temporary_, final_, ec);
  if (ec) return ec.message();  // the destructor removes the temporary
  release(slot_);
  slot_ = -1;
  temporary_.clear();
  return {};
}

void remove_temporary_files_on_signals() {
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, on_fatal_signal);
}

}  // namespace dfmp2::chem
