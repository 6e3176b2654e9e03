#include "linalg/comm.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace dfmp2::linalg {

CommTraffic& CommTraffic::operator+=(const CommTraffic& o) {
  bytes_sent += o.bytes_sent;
  bytes_received += o.bytes_received;
  messages_sent += o.messages_sent;
  messages_received += o.messages_received;
  wait_seconds += o.wait_seconds;
  return *this;
}

FailureReport failure_report(std::exception_ptr error) {
  FailureReport r;
  try {
    std::rethrow_exception(error);
  } catch (const RankFailure& e) {
    r = e.report();
  } catch (const Error& e) {
    r.exit_code = e.exit_code();
    r.message = e.what();
  } catch (const std::bad_alloc&) {
    r.exit_code = ResourceError("").exit_code();
    r.message = "out of memory; lower 'memory' or use a machine with more";
  } catch (const std::exception& e) {
    r.exit_code = 70;
    r.prefix = "internal error: ";
    r.message = e.what();
    r.suffix = " (this is a bug; please report it)";
  } catch (...) {
    r.exit_code = 70;
    r.prefix = "internal error: ";
    r.message = "unknown exception";
    r.suffix = " (this is a bug; please report it)";
  }
  return r;
}

DenseGrid& Comm::dense_grid(const DenseOptions&) {
  throw UnsupportedError("distributed factorisations need MPI ranks: this process runs as one rank");
}

void Comm::set_phase(const std::string& phase) {
  std::lock_guard lock(mutex_);
  phase_ = phase;
}

std::string Comm::phase() const {
  std::lock_guard lock(mutex_);
  return phase_;
}

std::map<std::string, CommTraffic> Comm::traffic() const {
  std::lock_guard lock(mutex_);
  return traffic_;
}

void Comm::count(double sent, double received, long long messages_sent, long long messages_received, double wait) {
  std::lock_guard lock(mutex_);
  CommTraffic& t = traffic_[phase_];
  t.bytes_sent += sent;
  t.bytes_received += received;
  t.messages_sent += messages_sent;
  t.messages_received += messages_received;
  t.wait_seconds += wait;
}

std::vector<std::vector<PhaseStats>> Comm::gather(const std::vector<PhaseStats>& mine) {
  static_assert(sizeof(PhaseStats) == 6 * sizeof(double), "PhaseStats travels as doubles");
  std::vector<std::vector<PhaseStats>> out(static_cast<std::size_t>(size()), mine);
  std::vector<PhaseStats> all(mine.size() * static_cast<std::size_t>(size()));
  if (!mine.empty()) allgather(mine.data(), mine.size() * sizeof(PhaseStats), all.data());
  for (int r = 0; r < size(); ++r)
    out[static_cast<std::size_t>(r)].assign(all.begin() + r * mine.size(), all.begin() + (r + 1) * mine.size());
  return out;
}

void copy_block(const StridedBlock& from, const StridedBlock& to) {
  if (from.rows != to.rows || from.cols != to.cols || from.element_bytes != to.element_bytes) {
    throw std::logic_error(fmt::format("copy_block: shapes {}x{} and {}x{} differ", from.rows, from.cols, to.rows,
                                       to.cols));
  }
  const std::size_t column = from.rows * from.element_bytes;
  for (std::size_t j = 0; j < from.cols; ++j) {
    std::memcpy(static_cast<char*>(to.data) + j * to.ld * to.element_bytes,
                static_cast<const char*>(from.data) + j * from.ld * from.element_bytes, column);
  }
}

void SerialComm::allgather(const void* in, std::size_t bytes, void* out) {
  if (bytes > 0) std::memcpy(out, in, bytes);
}

void SerialComm::exchange(const std::vector<StridedBlock>& sends, const std::vector<StridedBlock>& receives) {
  if (sends.size() != receives.size()) throw std::logic_error("SerialComm::exchange: sends and receives differ");
  for (std::size_t i = 0; i < sends.size(); ++i) copy_block(sends[i], receives[i]);
}

namespace {
class NoLender final : public BlockLender {
 public:
  std::unique_ptr<Fetch> fetch(int owner, long long id, void*, std::size_t) override {
    throw std::logic_error(fmt::format("one rank: block {} of rank {} fetched, but every block is local", id, owner));
  }
  void finish() override {}
};
}  // namespace

std::unique_ptr<BlockLender> SerialComm::lend(BlockProvider) { return std::make_unique<NoLender>(); }

void SerialComm::agree(const FailureReport* failed) {
  if (failed != nullptr) throw RankFailure(*failed, 0, 1, true);
}


// ---- the process's communicator ----

#ifdef DFMP2_HAVE_MPI
namespace detail {
std::unique_ptr<Comm> make_mpi_comm(int* argc, char*** argv);
void mpi_finalize();
void mpi_abort(int exit_code);
std::string mpi_version();
}  // namespace detail
#endif

namespace {
std::unique_ptr<Comm>& world_slot() {
  static std::unique_ptr<Comm> comm;
  return comm;
}
[[maybe_unused]] bool mpi_started = false;  // set (and read) only in a build with MPI

// Whether an MPI launcher started this process (Open MPI's mpirun, or a PMI launcher such as MPICH's Hydra or
// Slurm's srun). Without one the program runs as one rank and does not initialise MPI at all: a singleton MPI start
// costs about 0.4 s, which every plain run (and the test corpus's hundreds of them) would pay for nothing.
bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK"})
    if (std::getenv(v) != nullptr) return true;
  return false;
}

// The launcher's rank and size for this process (0 and 1 when it cannot tell): what a build without MPI can know.
[[maybe_unused]] std::pair<int, int> launcher_rank_and_size() {
  auto number = [](std::initializer_list<const char*> names, int fallback) {
    for (const char* n : names)
      if (const char* v = std::getenv(n)) return std::atoi(v);
    return fallback;
  };
  return {number({"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}, 0),
          number({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}, 1)};
}
}  // namespace

Comm& world() {
  auto& slot = world_slot();
  if (!slot) slot = std::make_unique<SerialComm>(mpi_library().empty() ? "built without MPI" : "started without mpirun");
  return *slot;
}

void init_world(int* argc, char*** argv) {
#ifdef DFMP2_HAVE_MPI
  if (launched_by_mpi()) {
    mpi_started = true;
    world_slot() = detail::make_mpi_comm(argc, argv);
    return;
  }
#else
  (void)argc;
  (void)argv;
  // Started as several ranks by a build that cannot talk to them: each would run the whole calculation alone. Say
  // so (from the launcher's rank 0 only) and stop, rather than run N copies.
  if (launched_by_mpi()) {
    const auto [rank, size] = launcher_rank_and_size();
    if (size > 1) {
      throw RankFailure({UnsupportedError("").exit_code(), "error: ",
                         fmt::format("this dfmp2 was built without MPI (DFMP2_MPI=OFF) but started as {} ranks by an "
                                     "MPI launcher; rebuild with -DDFMP2_MPI=ON, or run it without mpirun",
                                     size),
                         ""},
                        0, 1, rank == 0);
    }
  }
#endif
  world();
}

void finalize_world() {
  world_slot().reset();
#ifdef DFMP2_HAVE_MPI
  if (mpi_started) detail::mpi_finalize();
#endif
}

void abort_world(int exit_code) {
#ifdef DFMP2_HAVE_MPI
  if (mpi_started) detail::mpi_abort(exit_code);
#endif
  std::_Exit(exit_code);
}

std::string mpi_library() {
#ifdef DFMP2_HAVE_MPI
  return detail::mpi_version();
#else
  return "";
#endif
}

}  // namespace dfmp2::linalg
