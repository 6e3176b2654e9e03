#pragma once
// The ranks of a run and what passes between them (README "MPI").
//
// `dfmp2` runs as one rank, or as N ranks under `mpirun` (Open MPI, or any MPI with a PMI launcher). Every phase
// that is distributed talks through this interface only, so the same code runs on one rank (SerialComm: every
// operation is a local copy or nothing) and on many (MpiComm, linalg/comm_mpi.cpp, built with DFMP2_MPI).
//
// What the DF-SCF and DF-MP2 need, and no more:
//   sum          element-wise sum over the ranks, the same bits on every rank (the SCF's J and K: every rank then
//                diagonalises the same Fock matrix and takes the same convergence decision, so no rank can leave a
//                loop that another stays in)
//   broadcast, allgather, min
//   exchange     a set of strided blocks sent and received at once, one message per peer and block (the
//                redistributions of a tensor from auxiliary columns to occupied rows, and back)
//   lend         blocks this rank lends to the others during one phase (the pair loop's B_J): a thread of this
//                rank answers the others' requests while this rank computes, from memory or from its scratch file
//   checked      runs a local piece of work; if it throws on any rank, every rank throws, so no rank waits in a
//                collective for one that has failed (README "MPI": failures)
//
// Traffic is counted per phase (set_phase): bytes and messages sent and received, and the seconds spent waiting,
// for the report's per-rank table and the scaling model (bench/mpi_model.py).
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "linalg/errors.hpp"

namespace dfmp2::linalg {

class DenseGrid;
struct DenseOptions;

// Work items 0, 1, 2, ... dealt to `size` ranks in turn: rank `rank` does those with k % size == rank (one
// process alone: all of them).
struct Share {
  int rank = 0, size = 1;
  bool mine(long long k) const { return k % size == rank; }
};

struct CommTraffic {
  double bytes_sent = 0, bytes_received = 0;
  long long messages_sent = 0, messages_received = 0;
  double wait_seconds = 0;  // blocked in a collective, an exchange or a fetch
  CommTraffic& operator+=(const CommTraffic& o);
};

// What one rank did in one phase: its wall time there, the flops of its kernels, its traffic (README "MPI").
struct PhaseStats {
  double seconds = 0, flops = 0;
  double bytes_sent = 0, bytes_received = 0, messages = 0, wait_seconds = 0;
};

// One block of a strided matrix in an exchange: `cols` columns of `rows` elements of `element_bytes` each, columns
// `ld` elements apart, at `data`. The sender's and the receiver's blocks have the same rows and cols.
struct StridedBlock {
  int peer = 0;
  void* data = nullptr;
  std::size_t rows = 0, cols = 0, ld = 0, element_bytes = 8;
  std::size_t bytes() const { return rows * cols * element_bytes; }
};

// A block being fetched from another rank (BlockLender::fetch): wait() returns when it is in place, and throws the
// owner's error when the owner could not provide it.
class Fetch {
 public:
  virtual ~Fetch() = default;
  virtual void wait() = 0;
};

// Serves this rank's blocks to the other ranks for one phase. `provide(id, buffer)` returns where the block's bytes
// are: in place in memory, or read into `buffer` (a scratch file); it may throw (the requester gets the message).
using BlockProvider = std::function<const void*(long long id, std::size_t bytes, std::vector<std::byte>& buffer)>;
class BlockLender {
 public:
  virtual ~BlockLender() = default;
  // Starts fetching block `id` (`bytes` long) of rank `owner` into `into`.
  virtual std::unique_ptr<Fetch> fetch(int owner, long long id, void* into, std::size_t bytes) = 0;
  // Collective: returns when every rank has called it (all fetches are then answered), and stops serving.
  virtual void finish() = 0;
};

// An error another rank sent with a block it could not provide: its class's exit code and its message.
class PeerError : public Error {
 public:
  PeerError(int exit_code, const std::string& message) : Error(message), exit_code_(exit_code) {}
  int exit_code() const override { return exit_code_; }

 private:
  int exit_code_;
};

// What one failed rank reports: its exit code (README "Errors and exit codes") and the one line it prints.
struct FailureReport {
  int exit_code = 70;
  std::string prefix = "error: ";  // "error: " or "internal error: "
  std::string message;
  std::string suffix;  // " (this is a bug; please report it)" for internal errors
};
// The report of an exception caught by `catch (...)`: dfmp2::Error by its class, std::bad_alloc as a resource
// error, anything else as an internal error. The one mapping main() and Comm::checked share.
FailureReport failure_report(std::exception_ptr error);

// Thrown on every rank when `checked` work failed on some rank: the lowest failing rank's report. Only that rank
// prints it (reports()); the others end with its exit code silently, so a run prints one line however many ranks
// failed.
class RankFailure : public Error {
 public:
  RankFailure(FailureReport report, int failed_rank, int ranks, bool reports)
      : Error(report.message), report_(std::move(report)), failed_rank_(failed_rank), ranks_(ranks),
        reports_(reports) {}
  int exit_code() const override { return report_.exit_code; }
  const FailureReport& report() const { return report_; }
  int failed_rank() const { return failed_rank_; }
  int ranks() const { return ranks_; }
  bool reports() const { return reports_; }

 private:
  FailureReport report_;
  int failed_rank_, ranks_;
  bool reports_;
};

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Ranks on this rank's node (sharing its cores), for the default number of threads.
  virtual int node_ranks() const = 0;
  // "one rank (built without MPI)", "one rank (started without mpirun)", "Open MPI v4.1.4", ...
  virtual std::string description() const = 0;
  // The MPI communicator (an MPI_Comm*) for the distributed dense libraries (linalg/dense_grid.hpp); nullptr on one
  // rank without MPI.
  virtual const void* mpi_handle() const { return nullptr; }
  // Collective the first time for each `options`: the ranks' grid for distributed factorisations, made once and
  // kept until the communicator ends (before MPI does). Throws UnsupportedError without MPI ranks or ScaLAPACK.
  virtual DenseGrid& dense_grid(const DenseOptions& options);

  virtual void sum(double* data, std::size_t count) = 0;
  virtual void sum(float* data, std::size_t count) = 0;
  virtual void broadcast(void* data, std::size_t bytes, int root) = 0;
  // Each rank's `bytes` bytes, in rank order, into `out` (size() * bytes) on every rank.
  virtual void allgather(const void* in, std::size_t bytes, void* out) = 0;
  // Every rank's stats of the same phases, in rank order, on every rank.
  std::vector<std::vector<PhaseStats>> gather(const std::vector<PhaseStats>& mine);
  virtual double min(double value) = 0;
  virtual double max(double value) = 0;
  // Posts every send and receive, then waits for all of them. A block to or from this rank itself is copied.
  virtual void exchange(const std::vector<StridedBlock>& sends, const std::vector<StridedBlock>& receives) = 0;
  virtual std::unique_ptr<BlockLender> lend(BlockProvider provide) = 0;
  // Collective: every rank says whether it failed; if any did, every rank throws the lowest failing rank's
  // RankFailure.
  virtual void agree(const FailureReport* failed) = 0;

  // Whether every rank calls this within `seconds` (on a communicator of its own, so it never meets another
  // collective): how ranks that failed outside `checked` tell a failure they all share from one of their own.
  virtual bool all_arrive_within(double seconds) = 0;

  // Runs `work` (local, no communication inside it) and agrees on the outcome: see RankFailure.
  template <class Work>
  void checked(Work&& work) {
    if (size() == 1) {  // nobody to agree with: the error keeps its own type for the caller
      work();
      return;
    }
    try {
      work();
    } catch (const RankFailure&) {
      throw;  // already agreed inside
    } catch (...) {
      const FailureReport report = failure_report(std::current_exception());
      agree(&report);
    }
    agree(nullptr);
  }

  // Traffic accounting, under the phase named last (thread-safe: the lender's thread counts too).
  void set_phase(const std::string& phase);
  std::string phase() const;
  std::map<std::string, CommTraffic> traffic() const;
  void count(double sent, double received, long long messages_sent, long long messages_received, double wait);

 private:
  mutable std::mutex mutex_;
  std::string phase_ = "setup";
  std::map<std::string, CommTraffic> traffic_;
};

// One rank: no peers, no traffic.
class SerialComm final : public Comm {
 public:
  explicit SerialComm(std::string why = "built without MPI") : why_(std::move(why)) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int node_ranks() const override { return 1; }
  std::string description() const override { return "one rank (" + why_ + ")"; }
  void sum(double*, std::size_t) override {}
  void sum(float*, std::size_t) override {}
  void broadcast(void*, std::size_t, int) override {}
  void allgather(const void* in, std::size_t bytes, void* out) override;
  double min(double value) override { return value; }
  double max(double value) override { return value; }
  void exchange(const std::vector<StridedBlock>& sends, const std::vector<StridedBlock>& receives) override;
  std::unique_ptr<BlockLender> lend(BlockProvider provide) override;
  void agree(const FailureReport* failed) override;
  bool all_arrive_within(double) override { return true; }

 private:
  std::string why_;
};

// Copies a strided block into another of the same shape (the local part of an exchange).
void copy_block(const StridedBlock& from, const StridedBlock& to);

// The process's communicator: made once by init_world() at the start of main() (MPI when the process was started by
// an MPI launcher and the build has MPI, else one rank), torn down by finalize_world().
Comm& world();
void init_world(int* argc, char*** argv);
void finalize_world();
// Ends every rank at once with `exit_code` (MPI_Abort), for a failure the ranks could not agree on in time.
[[noreturn]] void abort_world(int exit_code);
// Whether this build has MPI ("" when it has none, else the library's version line).
std::string mpi_library();

}  // namespace dfmp2::linalg
