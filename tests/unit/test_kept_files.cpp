// Files kept for the user between runs (linalg/kept_files.hpp), opened as an attacker could have left them: links,
// FIFOs, folders, other users' files, huge files, folders others can write, locks held by a stopped process.
#include "linalg/kept_files.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "../support/test_support.hpp"

namespace fs = std::filesystem;
using dfmp2::linalg::KeptLock;
using dfmp2::linalg::prepare_kept_folder;
using dfmp2::linalg::read_kept_file;
using dfmp2::linalg::write_kept_file;

namespace {

std::string contents(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::set<std::string> entries(const fs::path& folder) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(folder)) out.insert(e.path().filename().string());
  return out;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Another user's uid for chown: only root can give a file away, so the cases that need one skip otherwise.
constexpr uid_t kNobody = 65534;

}  // namespace

TEST(KeptFiles, ReadsARegularFileAndNothingForAMissingOne) {
  dfmp2::testing::TempDir dir;
  dir.file("cache.txt", "figures\n");
  const auto kept = read_kept_file(dir.path().string(), "cache.txt", 100);
  ASSERT_TRUE(kept.text);
  EXPECT_EQ(*kept.text, "figures\n");
  EXPECT_TRUE(kept.refused.empty());
  const auto missing = read_kept_file(dir.path().string(), "absent.txt", 100);
  EXPECT_FALSE(missing.text);
  EXPECT_TRUE(missing.refused.empty()) << missing.refused;
  const auto no_folder = read_kept_file((dir.path() / "none").string(), "absent.txt", 100);
  EXPECT_FALSE(no_folder.text);
  EXPECT_TRUE(no_folder.refused.empty()) << no_folder.refused;
}

TEST(KeptFiles, NeverReadsThroughALinkAFifoOrAFolder) {
  dfmp2::testing::TempDir dir;
  const std::string target = dir.file("users-file", "secret\n");
  fs::create_symlink(target, dir.path() / "link.txt");
  ASSERT_EQ(::mkfifo((dir.path() / "fifo.txt").c_str(), 0600), 0);
  fs::create_directory(dir.path() / "folder.txt");
  const auto start = std::chrono::steady_clock::now();
  for (const auto& [name, why] : {std::pair{"link.txt", "symbolic link"}, {"fifo.txt", "a FIFO"}, {"folder.txt", "a folder"}}) {
    const auto kept = read_kept_file(dir.path().string(), name, 100);
    EXPECT_FALSE(kept.text) << name;
    EXPECT_NE(kept.refused.find(why), std::string::npos) << name << ": " << kept.refused;
  }
  EXPECT_LT(seconds_since(start), 5.0);  // the FIFO was not waited on
}

TEST(KeptFiles, ReadsNoMoreThanAValidFileHolds) {
  dfmp2::testing::TempDir dir;
  {  // a sparse file of 1 GiB: read whole, it would take 1 GiB of memory
    std::ofstream big(dir.path() / "big.txt");
  }
  fs::resize_file(dir.path() / "big.txt", std::uintmax_t(1) << 30);
  struct rusage before {};
  ::getrusage(RUSAGE_SELF, &before);
  const auto kept = read_kept_file(dir.path().string(), "big.txt", 4096);
  struct rusage after {};
  ::getrusage(RUSAGE_SELF, &after);
  EXPECT_FALSE(kept.text);
  EXPECT_NE(kept.refused.find("more than the 4096"), std::string::npos) << kept.refused;
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 64 * 1024);  // KiB: nothing near the file's size was allocated
  dir.file("exact.txt", std::string(4096, 'x'));
  EXPECT_TRUE(read_kept_file(dir.path().string(), "exact.txt", 4096).text);
}

TEST(KeptFiles, IgnoresAnotherUsersFile) {
  if (::geteuid() != 0) GTEST_SKIP() << "only root can give a file to another user";
  dfmp2::testing::TempDir dir;
  const std::string file = dir.file("theirs.txt", "figures\n");
  ASSERT_EQ(::chown(file.c_str(), kNobody, kNobody), 0);
  const auto kept = read_kept_file(dir.path().string(), "theirs.txt", 100);
  EXPECT_FALSE(kept.text);
  EXPECT_NE(kept.refused.find("another user"), std::string::npos) << kept.refused;
}

TEST(KeptFiles, WritesReplaceALinkOrFifoWithoutFollowingIt) {
  dfmp2::testing::TempDir dir;
  const std::string target = dir.file("users-file", "precious\n");
  const fs::path folder = dir.path() / "cache";
  fs::create_directory(folder);
  fs::create_symlink(target, folder / "link.txt");
  fs::create_symlink(dir.path() / "nowhere", folder / "dangling.txt");
  ASSERT_EQ(::mkfifo((folder / "fifo.txt").c_str(), 0600), 0);
  for (const char* name : {"link.txt", "dangling.txt", "fifo.txt"}) {
    write_kept_file(folder.string(), name, "new\n");
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(folder / name))) << name;
    EXPECT_EQ(contents(folder / name), "new\n") << name;
  }
  EXPECT_EQ(contents(target), "precious\n");
  EXPECT_FALSE(fs::exists(dir.path() / "nowhere"));
  EXPECT_EQ(entries(folder), (std::set<std::string>{"link.txt", "dangling.txt", "fifo.txt"}));  // no temporaries
  struct stat st {};
  ASSERT_EQ(::stat((folder / "link.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(KeptFiles, AFailedWriteLeavesNothingBehind) {
  dfmp2::testing::TempDir dir;
  fs::create_directory(dir.path() / "cache");
  fs::create_directory(dir.path() / "cache" / "taken.txt");
  fs::create_directory(dir.path() / "cache" / "taken.txt" / "inside");  // a non-empty folder cannot be renamed over
  EXPECT_THROW(write_kept_file((dir.path() / "cache").string(), "taken.txt", "new\n"), std::runtime_error);
  EXPECT_EQ(entries(dir.path() / "cache"), (std::set<std::string>{"taken.txt"}));
  EXPECT_THROW(write_kept_file((dir.path() / "missing").string(), "x.txt", "new\n"), std::runtime_error);
}

TEST(KeptFiles, NamesAreUnpredictable) {
  std::set<std::string> names;
  for (int i = 0; i < 100; ++i) names.insert(dfmp2::linalg::unpredictable_name("x."));
  EXPECT_EQ(names.size(), 100u);
  EXPECT_EQ(names.begin()->size(), 2u + 16u);
}

TEST(KeptFiles, FolderMadePrivateAndRefusedWhenOthersCanWrite) {
  dfmp2::testing::TempDir dir;
  const fs::path made = dir.path() / "a" / "b" / "dfmp2";
  EXPECT_EQ(prepare_kept_folder(made.string()), "");
  struct stat st {};
  ASSERT_EQ(::stat(made.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  const fs::path open = dir.path() / "open";
  fs::create_directory(open);
  ASSERT_EQ(::chmod(open.c_str(), 01777), 0);  // even with the sticky bit: names can be taken in advance
  EXPECT_NE(prepare_kept_folder(open.string()).find("writable by other users"), std::string::npos);

  // Group-writable: refused for another group, taken for the user's own (a user-private group, umask 002).
  const fs::path grouped = dir.path() / "grouped";
  fs::create_directory(grouped);
  ASSERT_EQ(::chmod(grouped.c_str(), 0770), 0);
  EXPECT_EQ(prepare_kept_folder(grouped.string()), "") << "the user's own group";
  if (::geteuid() == 0) {
    ASSERT_EQ(::chown(grouped.c_str(), ::geteuid(), kNobody), 0);
    EXPECT_NE(prepare_kept_folder(grouped.string()).find("writable by other users (mode 0770)"), std::string::npos);
  }

  const std::string file = dir.file("plain", "x");
  EXPECT_NE(prepare_kept_folder(file).find("is not a folder"), std::string::npos);
  EXPECT_NE(prepare_kept_folder(file + "/under").find("cannot be created"), std::string::npos);

  if (::geteuid() == 0) {
    const fs::path theirs = dir.path() / "theirs";
    fs::create_directory(theirs);
    ASSERT_EQ(::chmod(theirs.c_str(), 0700), 0);
    ASSERT_EQ(::chown(theirs.c_str(), kNobody, kNobody), 0);
    EXPECT_NE(prepare_kept_folder(theirs.string()).find("belongs to another user"), std::string::npos);
  }
}

TEST(KeptFiles, LockIsExclusiveAndWaitedForABoundedTime) {
  dfmp2::testing::TempDir dir;
  const std::string folder = dir.path().string();
  KeptLock first(folder, "x.lock", 1.0);
  ASSERT_TRUE(first.held()) << first.why_not();
  const auto start = std::chrono::steady_clock::now();
  KeptLock second(folder, "x.lock", 0.3);  // a second open file description: flock makes it wait
  const double waited = seconds_since(start);
  EXPECT_FALSE(second.held());
  EXPECT_NE(second.why_not().find("held by another process"), std::string::npos) << second.why_not();
  EXPECT_GE(waited, 0.29);
  EXPECT_LT(waited, 3.0);
}

TEST(KeptFiles, LockNeverFollowsALinkNorWaitsOnAFifo) {
  dfmp2::testing::TempDir dir;
  const fs::path folder = dir.path() / "cache";
  fs::create_directory(folder);
  fs::create_symlink(dir.path() / "outside.lock", folder / "dangling.lock");
  ASSERT_EQ(::mkfifo((folder / "fifo.lock").c_str(), 0600), 0);
  fs::create_directory(folder / "folder.lock");
  const auto start = std::chrono::steady_clock::now();
  for (const auto& [name, why] : {std::pair{"dangling.lock", "symbolic link"}, {"fifo.lock", "a FIFO"}, {"folder.lock", "folder"}}) {
    KeptLock lock(folder.string(), name, 10.0);
    EXPECT_FALSE(lock.held()) << name;
    EXPECT_NE(lock.why_not().find(why), std::string::npos) << name << ": " << lock.why_not();
  }
  EXPECT_LT(seconds_since(start), 5.0);
  EXPECT_FALSE(fs::exists(fs::symlink_status(dir.path() / "outside.lock")));  // no file made outside the folder
}
