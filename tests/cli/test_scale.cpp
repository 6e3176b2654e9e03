// Scale on one machine (README "Memory plan"): every storage of the SCF's J/K and of DF-MP2 gives the same energies,
// `memory` bounds the peak resident memory, scratch files never outlive the run, and a write that fails mid-run
// ends it with one line.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include <csignal>
#include <sys/wait.h>
#include <unistd.h>

#include "../support/test_support.hpp"

namespace {

namespace fs = std::filesystem;
using dfmp2::testing::run_command;
using dfmp2::testing::TempDir;

// n waters on a 3 angstrom grid (3 per row), cc-pVDZ.
std::string waters(int n) {
  std::string xyz;
  for (int i = 0; i < n; ++i) {
    const double x = 3.0 * (i % 3), y = 3.0 * (i / 3);
    xyz += fmt::format("O {} {} 0.1178\\nH {} {} -0.4712\\nH {} {} -0.4712\\n", x, y, x, y + 0.7555, x, y - 0.7555);
  }
  return "molecule: {xyz: \"" + xyz + "\"}\nbasis: cc-pvdz\n";
}

nlohmann::json run_json(const TempDir& dir, const std::string& name, const std::string& yaml) {
  dir.file(name + ".yaml", yaml);
  const auto json = (dir.path() / (name + ".json")).string();
  const auto r = run_command(std::string(DFMP2_BINARY) + " " + (dir.path() / (name + ".yaml")).string() + " --json " + json, dir);
  EXPECT_EQ(r.exit_code, 0) << name << ": " << r.err;
  std::ifstream in(json);
  return r.exit_code == 0 ? nlohmann::json::parse(in) : nlohmann::json();
}

bool scratch_is_empty(const fs::path& folder) {
  return fs::is_empty(folder);
}

// Every storage of the DF-J/K (memory, scratch, recompute) and of DF-MP2 (memory, scratch), forced on two waters
// and on their cation (a radical, UHF and ROHF): the SCF and MP2 energies agree with the all-in-memory run within
// 1e-10 Eh, and no scratch file is left.
TEST(Scale, EveryStorageGivesTheSameEnergies) {
  TempDir dir;
  fs::create_directory(dir.path() / "scratch");
  std::string cation = waters(2);
  cation.replace(cation.find("\"}"), 2, "\", charge: 1, multiplicity: 2}");
  for (const auto& [name, molecule] : {std::pair{std::string("rhf"), waters(2)}, {std::string("uhf"), cation},
                                       {std::string("rohf"), cation + "reference: rohf\n"}}) {
    const std::string base = molecule + "scratch: scratch\n";
    const auto reference = run_json(dir, name + "_ref", base + "scf: {jk_storage: memory}\nmp2_storage: memory\n");
    ASSERT_FALSE(reference.is_null());
    EXPECT_EQ(reference["keywords"]["reference"], name);
    const double e_scf = reference["properties"]["scf_total_energy"];
    const double e_corr = reference["properties"]["mp2_correlation_energy"];
    for (const std::string jk : {"memory", "scratch", "recompute"}) {
      for (const std::string mp2 : {"memory", "scratch"}) {
        SCOPED_TRACE(name + ": " + jk + " / " + mp2);
        const auto r = run_json(dir, name + "_" + jk + "_" + mp2,
                                base + "scf: {jk_storage: " + jk + "}\nmp2_storage: " + mp2 + "\n");
        ASSERT_FALSE(r.is_null());
        EXPECT_NEAR(r["properties"]["scf_total_energy"].get<double>(), e_scf, 1e-10);
        EXPECT_NEAR(r["properties"]["mp2_correlation_energy"].get<double>(), e_corr, 1e-10);
        EXPECT_EQ(r["extras"]["dfmp2"]["problem"]["scf"]["jk_storage"], jk);
        const auto& phases = r["extras"]["dfmp2"]["memory_plan"]["phases"];
        bool mp2_seen = false;
        for (const auto& ph : phases) {
          if (ph["phase"] == "MP2 pair energies") {
            EXPECT_EQ(ph["storage"], mp2);
            mp2_seen = true;
          }
        }
        EXPECT_TRUE(mp2_seen);
        EXPECT_TRUE(scratch_is_empty(dir.path() / "scratch"));
      }
    }
  }
}

// Left to choose with too little memory for the J/K tensor and the fitted MP2 tensor, the run puts them out of
// memory, gives the energies of the ample run, and its measured peak resident memory stays within `memory`.
TEST(Scale, TightMemoryIsKeptAndChangesNoEnergy) {
  TempDir dir;
  fs::create_directory(dir.path() / "scratch");
  const std::string base = waters(6) + "scratch: scratch\n";
  const auto ample = run_json(dir, "ample", base + "memory: 2 GB\n");
  const auto tight = run_json(dir, "tight", base + "memory: 250 MB\n");
  ASSERT_FALSE(ample.is_null());
  ASSERT_FALSE(tight.is_null());
  EXPECT_EQ(ample["extras"]["dfmp2"]["problem"]["scf"]["jk_storage"], "memory");
  EXPECT_NE(tight["extras"]["dfmp2"]["problem"]["scf"]["jk_storage"], "memory");
  EXPECT_NEAR(tight["properties"]["scf_total_energy"].get<double>(),
              ample["properties"]["scf_total_energy"].get<double>(), 1e-10);
  EXPECT_NEAR(tight["properties"]["mp2_correlation_energy"].get<double>(),
              ample["properties"]["mp2_correlation_energy"].get<double>(), 1e-10);
  const auto& plan = tight["extras"]["dfmp2"]["memory_plan"];
  EXPECT_LE(plan["peak_resident_bytes"].get<double>(), 250e6);
  EXPECT_LE(plan["planned_peak_bytes"].get<double>(), 250e6);
  EXPECT_TRUE(scratch_is_empty(dir.path() / "scratch"));
}

// A scratch write that fails mid-run (here a file-size limit, as a full disk would) ends the run with one line
// (exit 6), no results file, and no scratch file left.
TEST(Scale, ScratchWriteFailureIsOneLineAndLeavesNothing) {
  TempDir dir;
  fs::create_directory(dir.path() / "scratch");
  dir.file("in.yaml", waters(2) + "scratch: scratch\nmp2_storage: scratch\nscf: {jk_storage: scratch}\n");
  const auto r = run_command("ulimit -f 64; " + std::string(DFMP2_BINARY) + " " + (dir.path() / "in.yaml").string() +
                                 " --json " + (dir.path() / "out.json").string(),
                             dir);
  EXPECT_EQ(r.exit_code, 6) << r.err;
  EXPECT_NE(r.err.find("scratch: writing '"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("File too large"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(fs::exists(dir.path() / "out.json"));
  EXPECT_TRUE(scratch_is_empty(dir.path() / "scratch"));
}

// The scratch files this process has open in `folder`, as /proc/<pid>/fd shows them ("<folder>/#123 (deleted)" for an
// unnamed file).
int open_scratch_files(pid_t pid, const fs::path& folder) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fmt::format("/proc/{}/fd", pid), ec)) {
    const auto target = fs::read_symlink(e.path(), ec).string();
    if (!ec && target.rfind(folder.string() + "/", 0) == 0) ++n;
  }
  return n;
}

// SIGKILL, which no program can catch (and which mpirun sends its ranks soon after a SIGINT), while the SCF's J/K
// tensor is on scratch: nothing is left in the folder, because the scratch files never had a name there.
TEST(Scale, ScratchLeavesNothingEvenAfterSigkill) {
  TempDir dir;
  const fs::path scratch = fs::canonical(dir.path()) / "scratch";
  fs::create_directory(scratch);
  dir.file("in.yaml", waters(4) + "scratch: " + scratch.string() + "\nscf: {jk_storage: scratch}\nmp2_storage: scratch\n");
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (chdir(dir.path().c_str()) != 0) _exit(99);
    std::freopen("/dev/null", "w", stdout);
    execl(DFMP2_BINARY, DFMP2_BINARY, "in.yaml", static_cast<char*>(nullptr));
    _exit(98);
  }
  bool seen = false;
  int status = 0;
  for (int i = 0; i < 120000 && !seen; ++i) {  // up to 120 s for the first scratch file
    if (open_scratch_files(pid, scratch) > 0) seen = true;
    else if (waitpid(pid, &status, WNOHANG) == pid) break;
    else usleep(1000);
  }
  if (seen) {
    kill(pid, SIGKILL);
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
  }
  ASSERT_TRUE(seen) << "the run ended before it opened a scratch file";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_TRUE(scratch_is_empty(scratch)) << "left behind in " << scratch;
}

// Nothing large is written unless asked: without save_integrals no integral file appears; with it, its size is
// said before it is written.
TEST(Scale, SaveIntegralsOnlyWhenAskedWithItsSizeFirst) {
  TempDir dir;
  dir.file("w.yaml", waters(1));
  auto r = run_command(std::string(DFMP2_BINARY) + " " + (dir.path() / "w.yaml").string(), dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(dir.path() / "w.h5"));
  dir.file("s.yaml", waters(1) + "save_integrals: true\n");
  r = run_command(std::string(DFMP2_BINARY) + " " + (dir.path() / "s.yaml").string(), dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir.path() / "s.h5"));
  const auto said = r.out.find("saving orbitals and integrals to ");
  ASSERT_NE(said, std::string::npos) << r.out;
  EXPECT_NE(r.out.find("before compression)", said), std::string::npos);
}

}  // namespace

namespace {
// An open-shell reference saved after its SCF (integral file format version 2: both spins' orbitals, ROHF's singles
// terms) and run again from the file gives the same energies, frozen core included (the file's metadata keeps the
// multiplicity).
TEST(Scale, OpenShellIntegralFileGivesTheSameEnergies) {
  TempDir dir;
  for (const std::string reference : {"uhf", "rohf"}) {
    SCOPED_TRACE(reference);
    const auto first = run_json(dir, reference + "_scf",
                                "molecule: {xyz: \"O 0 0 0\\nH 0 0 0.97\", multiplicity: 2}\nbasis: cc-pvdz\n"
                                "reference: " + reference + "\nfrozen_core: true\nsave_integrals: " + reference + ".h5\n");
    ASSERT_FALSE(first.is_null());
    const auto again = run_json(dir, reference + "_file", "integrals: " + reference + ".h5\nfrozen_core: true\n");
    ASSERT_FALSE(again.is_null());
    EXPECT_EQ(again["keywords"]["reference"], reference);
    EXPECT_EQ(again["properties"]["calcinfo_nbeta"], 4);
    for (const char* p : {"scf_total_energy", "mp2_correlation_energy", "mp2_singles_energy",
                          "mp2_same_spin_correlation_energy", "mp2_opposite_spin_correlation_energy"}) {
      EXPECT_NEAR(again["properties"][p].get<double>(), first["properties"][p].get<double>(), 1e-12) << p;
    }
    if (reference == "rohf") EXPECT_LT(first["properties"]["mp2_singles_energy"].get<double>(), -1e-3);
  }
}
}  // namespace

namespace {
// A ghost atom survives the integral file (the metadata molecule writes it as Gh(X)): the rerun's frozen core counts
// the real atoms only, its energies are the first run's, and the results file marks the ghost real: false.
TEST(Scale, GhostAtomKeptByTheIntegralFile) {
  TempDir dir;
  const auto first = run_json(dir, "ghost_scf",
                              "molecule: {xyz: \"O 0 0 0.117790\\nH 0 0.755453 -0.471161\\nH 0 -0.755453 -0.471161\\n"
                              "@Ne 0 0 3.0\"}\nbasis: cc-pvdz\nscf: {type: exact}\nfrozen_core: true\n"
                              "save_integrals: ghost.h5\n");
  ASSERT_FALSE(first.is_null());
  const auto again = run_json(dir, "ghost_file", "integrals: ghost.h5\nfrozen_core: true\n");
  ASSERT_FALSE(again.is_null());
  EXPECT_EQ(again["keywords"]["num_frozen_docc"], 1);
  EXPECT_EQ(again["molecule"]["real"], nlohmann::json({true, true, true, false}));
  EXPECT_EQ(again["molecule"]["symbols"][3], "Ne");
  EXPECT_NEAR(again["properties"]["mp2_correlation_energy"].get<double>(),
              first["properties"]["mp2_correlation_energy"].get<double>(), 1e-12);
}
}  // namespace
