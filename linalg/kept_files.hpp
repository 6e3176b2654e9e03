#pragma once
// Files dfmp2 keeps for a user between runs (the backend calibration, the device models' compile cache) and the
// locks beside them. They live in folders that other programs, and with a shared XDG_CACHE_HOME other users, can
// also write, so every such file is opened as an attacker could have left it:
//   - never through a symbolic link (O_NOFOLLOW; a link planted at a cache path would make a write land in a file of
//     the user's, or a lock create a file outside the folder);
//   - only regular files of this user's are read, and never more than a valid file can hold (a FIFO would block the
//     read forever, a device or a 1 GiB file would be read whole);
//   - written under a new, unpredictable name created exclusively in the same folder, then renamed into place (a
//     reader sees the old file or the new one, and a name guessed in advance cannot redirect the write);
//   - a lock is waited for a bounded time (a run suspended with Ctrl-Z while holding it must not stop every later
//     run of that user).
// A folder writable by other users (by everyone, even with the sticky bit, or by a group other than the user's own) or
// owned by another user is not used at all: anything in it could be replaced between two calls.
#include <optional>
#include <string>

namespace dfmp2::linalg {

// dfmp2's folder in the user's cache: $XDG_CACHE_HOME/dfmp2, else ~/.cache/dfmp2; "" when neither variable is set.
std::string user_cache_folder();

// Makes `folder` (and its parents) when missing, mode 0700. Returns "" when kept files may live there, else why not
// ("'/x' is not a folder", "'/x' belongs to another user", "'/x' is writable by other users").
std::string prepare_kept_folder(const std::string& folder);

// What read_kept_file found.
struct KeptText {
  std::optional<std::string> text;  // the contents, when the file is there and fit to read
  std::string refused;              // why an existing entry was not read ("" when read or missing)
};
// `folder/name` when it is a regular file of this user's of at most `max_bytes`. Missing: no text, nothing refused.
// A link, FIFO, device, folder, another user's file or a larger file: no text, and `refused` says which. Never blocks
// and never reads more than max_bytes + 1 bytes.
KeptText read_kept_file(const std::string& folder, const std::string& name, std::size_t max_bytes);

// Replaces `folder/name` with `text`, whole or not at all: written to a new file of unpredictable name created
// exclusively in `folder` (mode 0600), closed, then renamed over `name` (a link or FIFO there is replaced, not
// followed). Throws std::runtime_error with the reason; no temporary is left behind.
void write_kept_file(const std::string& folder, const std::string& name, const std::string& text);

// An exclusive advisory lock (flock) on the regular file `folder/name`, created when missing, waited for at most
// `patience_seconds`. Not held when the lock could not be had: why_not() says why (another process held it all
// that time; the entry is a link, a FIFO or a folder; the folder cannot be written). Released when destroyed.
class KeptLock {
 public:
  KeptLock(const std::string& folder, const std::string& name, double patience_seconds);
  ~KeptLock();
  KeptLock(const KeptLock&) = delete;
  KeptLock& operator=(const KeptLock&) = delete;
  bool held() const { return fd_ >= 0; }
  const std::string& why_not() const { return why_not_; }

 private:
  int fd_ = -1;
  std::string why_not_;
};

// A name no other process will choose: `prefix` followed by 16 random hexadecimal digits (getrandom).
std::string unpredictable_name(const std::string& prefix);

}  // namespace dfmp2::linalg
