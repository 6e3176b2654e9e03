// The MPI communicator (built with DFMP2_MPI). See linalg/comm.hpp for what each operation is for.
#include <mpi.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstring>
#include <map>
#include <memory>
#include <thread>
#include <tuple>

#include "linalg/comm.hpp"
#include "linalg/dense_grid.hpp"
#include "linalg/kernel_log.hpp"

namespace dfmp2::linalg::detail {

namespace {

// MPI counts are ints: large buffers go in pieces of at most this many bytes.
constexpr std::size_t kMaxMessage = std::size_t(256) << 20;

// Tags of the block lender's messages (on a communicator of its own).
constexpr int kRequestTag = 1, kHeaderTag = 2, kDataTag = 3;
constexpr int kExchangeTag = 11;
// An exchange's pieces between two ranks are tagged kExchangeTag + k mod kTagSpan (MPI guarantees tags to 32767).
constexpr int kTagSpan = 30000;
// Strided pieces staged at once per peer and direction, and the staging they may hold together on one rank.
constexpr std::size_t kStagedPerPeer = 4;
constexpr std::size_t kStagingBytes = std::size_t(32) << 20;

// Waiting threads poll with short sleeps instead of spinning in MPI's progress loop: a rank's lender thread, its
// prefetch thread and its computing threads share its cores, and a spinning waiter would take them from the work.
void nap() { std::this_thread::sleep_for(std::chrono::microseconds(50)); }

void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) {
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(rc, text, &length);
    throw std::runtime_error(fmt::format("MPI: {} failed: {}", what, std::string(text, std::size_t(length))));
  }
}

void wait_polling(std::vector<MPI_Request>& requests) {
  if (requests.empty()) return;
  int done = 0;
  for (;;) {
    check(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE), "MPI_Testall");
    if (done) return;
    nap();
  }
}

// The failure report as it travels: exit code, then the three strings, each cut to fit.
struct WireReport {
  int exit_code = 0;
  char prefix[32] = {};
  char message[2048] = {};
  char suffix[64] = {};
};

WireReport to_wire(const FailureReport& r) {
  WireReport w;
  w.exit_code = r.exit_code;
  std::strncpy(w.prefix, r.prefix.c_str(), sizeof w.prefix - 1);
  std::strncpy(w.message, r.message.c_str(), sizeof w.message - 1);
  std::strncpy(w.suffix, r.suffix.c_str(), sizeof w.suffix - 1);
  return w;
}

FailureReport from_wire(const WireReport& w) {
  return {w.exit_code, w.prefix, w.message, w.suffix};
}

struct RequestMessage {
  long long id = 0;
  long long bytes = 0;
};

class MpiFetch final : public Fetch {
 public:
  MpiFetch(Comm& counter, MPI_Comm comm, int owner, long long id, void* into, std::size_t bytes)
      : counter_(counter), owner_(owner), id_(id), bytes_(bytes) {
    request_ = {id, static_cast<long long>(bytes)};
    requests_.resize(2);
    check(MPI_Irecv(&header_, sizeof header_, MPI_BYTE, owner, kHeaderTag, comm, &requests_[0]), "MPI_Irecv");
    check(MPI_Isend(&request_, sizeof request_, MPI_BYTE, owner, kRequestTag, comm, &requests_[1]), "MPI_Isend");
    for (std::size_t offset = 0; offset < bytes; offset += kMaxMessage) {
      const int n = static_cast<int>(std::min(kMaxMessage, bytes - offset));
      data_.emplace_back();
      check(MPI_Irecv(static_cast<char*>(into) + offset, n, MPI_BYTE, owner, kDataTag, comm, &data_.back()),
            "MPI_Irecv");
    }
  }
  ~MpiFetch() override {
    try {
      if (!waited_) wait();
    } catch (...) {
    }
  }

  void wait() override {
    if (waited_) return;
    waited_ = true;
    Stopwatch clock;
    wait_polling(requests_);
    if (header_.exit_code != 0) {
      for (auto& r : data_) {  // nothing will come: the owner sent its error instead
        MPI_Cancel(&r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
      }
      counter_.count(double(sizeof request_), double(sizeof header_), 1, 1, clock.seconds());
      throw PeerError(header_.exit_code, fmt::format("rank {} could not send block {}: {}", owner_, id_,
                                                     header_.message));
    }
    wait_polling(data_);
    counter_.count(double(sizeof request_), double(bytes_ + sizeof header_), 1,
                   1 + static_cast<long long>(data_.size()), clock.seconds());
  }

 private:
  Comm& counter_;
  int owner_;
  long long id_;
  std::size_t bytes_;
  RequestMessage request_;
  WireReport header_;
  std::vector<MPI_Request> requests_, data_;
  bool waited_ = false;
};

class MpiLender final : public BlockLender {
 public:
  MpiLender(Comm& counter, MPI_Comm comm, BlockProvider provide)
      : counter_(counter), comm_(comm), provide_(std::move(provide)) {
    server_ = std::thread([this] { serve(); });
  }
  ~MpiLender() override {
    try {
      finish();
    } catch (...) {
    }
  }

  std::unique_ptr<Fetch> fetch(int owner, long long id, void* into, std::size_t bytes) override {
    return std::make_unique<MpiFetch>(counter_, comm_, owner, id, into, bytes);
  }

  void finish() override {
    if (finished_) return;
    finished_ = true;
    // Every rank arrives here once it has all its blocks, so when the barrier completes nobody asks any more. Until
    // then this rank's thread keeps answering the others.
    Stopwatch clock;
    MPI_Request barrier;
    check(MPI_Ibarrier(comm_, &barrier), "MPI_Ibarrier");
    std::vector<MPI_Request> one{barrier};
    wait_polling(one);
    stop_ = true;
    server_.join();
    counter_.count(0, 0, 0, 0, clock.seconds());
  }

 private:
  void serve() {
    std::vector<std::byte> buffer;
    // Idle, the thread sleeps twice as long each time, up to kLongestNap: polling every 50 us took 12 % of a core
    // from the rank's own work (the gradient's amplitude pass, whose fetches come one per row, 20 ms to 1 s apart);
    // the first request after a quiet spell waits at most kLongestNap more, against transfers of tens of ms.
    constexpr std::chrono::microseconds kShortestNap{50}, kLongestNap{2000};
    std::chrono::microseconds idle = kShortestNap;
    while (!stop_.load()) {
      int flag = 0;
      MPI_Status status;
      if (MPI_Iprobe(MPI_ANY_SOURCE, kRequestTag, comm_, &flag, &status) != MPI_SUCCESS || !flag) {
        std::this_thread::sleep_for(idle);
        idle = std::min(2 * idle, kLongestNap);
        continue;
      }
      idle = kShortestNap;
      RequestMessage request;
      MPI_Recv(&request, sizeof request, MPI_BYTE, status.MPI_SOURCE, kRequestTag, comm_, MPI_STATUS_IGNORE);
      const std::size_t bytes = static_cast<std::size_t>(request.bytes);
      WireReport header;
      const void* data = nullptr;
      try {
        data = provide_(request.id, bytes, buffer);
      } catch (...) {
        header = to_wire(failure_report(std::current_exception()));
        if (header.exit_code == 0) header.exit_code = 70;
      }
      MPI_Send(&header, sizeof header, MPI_BYTE, status.MPI_SOURCE, kHeaderTag, comm_);
      long long messages = 1;
      if (header.exit_code == 0) {
        for (std::size_t offset = 0; offset < bytes; offset += kMaxMessage, ++messages) {
          const int n = static_cast<int>(std::min(kMaxMessage, bytes - offset));
          MPI_Send(static_cast<const char*>(data) + offset, n, MPI_BYTE, status.MPI_SOURCE, kDataTag, comm_);
        }
      }
      counter_.count(double(sizeof header) + (header.exit_code == 0 ? double(bytes) : 0.0), double(sizeof request),
                     messages, 1, 0);
    }
  }

  Comm& counter_;
  MPI_Comm comm_;
  BlockProvider provide_;
  std::atomic<bool> stop_{false};
  bool finished_ = false;
  std::thread server_;
};

class MpiComm final : public Comm {
 public:
  MpiComm() {
    check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    check(MPI_Comm_dup(MPI_COMM_WORLD, &lend_comm_), "MPI_Comm_dup");
    check(MPI_Comm_dup(MPI_COMM_WORLD, &fail_comm_), "MPI_Comm_dup");
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Comm node;
    check(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
    MPI_Comm_size(node, &node_ranks_);
    MPI_Comm_free(&node);
  }
  ~MpiComm() override {
    grids_.clear();  // their BLACS contexts use comm_
    MPI_Comm_free(&fail_comm_);
    MPI_Comm_free(&lend_comm_);
    MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int node_ranks() const override { return node_ranks_; }
  std::string description() const override { return library_version(); }
  const void* mpi_handle() const override { return &comm_; }
  DenseGrid& dense_grid(const DenseOptions& options) override {
    auto& grid = grids_[{int(options.cholesky), int(options.eigh), options.block}];
    if (!grid) grid = make_dense_grid(*this, options);
    return *grid;
  }

  void sum(double* data, std::size_t count) override { reduce_broadcast(data, count, MPI_DOUBLE, sizeof(double)); }
  void sum(float* data, std::size_t count) override { reduce_broadcast(data, count, MPI_FLOAT, sizeof(float)); }

  void broadcast(void* data, std::size_t bytes, int root) override {
    Stopwatch clock;
    for (std::size_t offset = 0; offset < bytes; offset += kMaxMessage) {
      const int n = static_cast<int>(std::min(kMaxMessage, bytes - offset));
      check(MPI_Bcast(static_cast<char*>(data) + offset, n, MPI_BYTE, root, comm_), "MPI_Bcast");
    }
    const double b = double(bytes);
    count(rank_ == root ? b : 0, rank_ == root ? 0 : b, rank_ == root, rank_ != root, clock.seconds());
  }

  void allgather(const void* in, std::size_t bytes, void* out) override {
    if (bytes > kMaxMessage) throw std::logic_error("MpiComm::allgather: more than one message per rank");
    Stopwatch clock;
    check(MPI_Allgather(in, static_cast<int>(bytes), MPI_BYTE, out, static_cast<int>(bytes), MPI_BYTE, comm_),
          "MPI_Allgather");
    count(double(bytes) * (size_ - 1), double(bytes) * (size_ - 1), size_ - 1, size_ - 1, clock.seconds());
  }

  double min(double value) override {
    double out = value;
    check(MPI_Allreduce(&value, &out, 1, MPI_DOUBLE, MPI_MIN, comm_), "MPI_Allreduce");
    return out;
  }
  double max(double value) override {
    double out = value;
    check(MPI_Allreduce(&value, &out, 1, MPI_DOUBLE, MPI_MAX, comm_), "MPI_Allreduce");
    return out;
  }

  // Each block goes in pieces of whole columns. A contiguous piece (columns `ld` = `rows` apart, or one column) goes
  // as it lies, all at once. A strided one is packed into a staging buffer (sends) or unpacked from one (receives),
  // at most kStagedPerPeer pieces per peer and direction in flight, so the staging stays within kStagingBytes
  // however large the exchange: MPI's own strided datatypes moved the DF-J/K fitting's row shares at 1.9 GB/s here
  // against 5-7 GB/s for contiguous blocks (bench_exchange, bench/README.md). Both sides cut a block of the same
  // shape into the same pieces, and the k-th piece between two ranks carries tag kExchangeTag + k, so a piece posted
  // late (staged) still meets its partner.
  void exchange(const std::vector<StridedBlock>& sends, const std::vector<StridedBlock>& receives) override {
    Stopwatch clock;
    std::vector<const StridedBlock*> self_sends, self_receives;
    const int peers = std::max(1, size_ - 1);
    const std::size_t piece_bytes = std::clamp<std::size_t>(kStagingBytes / (2 * kStagedPerPeer * std::size_t(peers)),
                                                            std::size_t(64) << 10, std::size_t(8) << 20);
    struct Piece {
      const StridedBlock* block;
      std::size_t j0, nc;
      int tag;
      bool send;
      std::size_t bytes() const { return nc * block->rows * block->element_bytes; }
      char* start() const { return static_cast<char*>(block->data) + j0 * block->ld * block->element_bytes; }
      bool contiguous() const { return nc == 1 || block->ld == block->rows; }
    };
    std::vector<int> next_tag_to(static_cast<std::size_t>(size_), 0), next_tag_from(static_cast<std::size_t>(size_), 0);
    std::vector<Piece> contiguous;
    std::vector<std::vector<Piece>> staged_sends(static_cast<std::size_t>(size_)), staged_receives(static_cast<std::size_t>(size_));
    double sent = 0, received = 0;
    long long n_sent = 0, n_received = 0;
    auto cut = [&](const StridedBlock& b, bool send) {
      if (b.rows == 0 || b.cols == 0) return;
      const std::size_t column = b.rows * b.element_bytes;
      if (column > kMaxMessage) throw std::logic_error("MpiComm::exchange: a column over 256 MiB");
      // (A column larger than a piece is a piece alone.)
      // Pieces of the staging size, contiguous or not: the two sides of a block may differ in stride, never in
      // shape, so they cut it alike.
      const std::size_t per = std::max<std::size_t>(1, piece_bytes / column);
      auto& tags = send ? next_tag_to : next_tag_from;
      for (std::size_t j0 = 0; j0 < b.cols; j0 += per) {
        const Piece piece{&b, j0, std::min(per, b.cols - j0), kExchangeTag + tags[std::size_t(b.peer)]++ % kTagSpan, send};
        if (piece.contiguous()) contiguous.push_back(piece);
        else (send ? staged_sends : staged_receives)[std::size_t(b.peer)].push_back(piece);
        (send ? sent : received) += double(piece.bytes());
        ++(send ? n_sent : n_received);
      }
    };
    for (const auto& r : receives) {
      if (r.peer == rank_) self_receives.push_back(&r);
      else cut(r, false);
    }
    for (const auto& s : sends) {
      if (s.peer == rank_) self_sends.push_back(&s);
      else cut(s, true);
    }
    if (self_sends.size() != self_receives.size()) {
      throw std::logic_error("MpiComm::exchange: blocks to this rank and from it differ in number");
    }
    // The requests in flight; a staged one keeps its buffer and piece until it completes.
    std::vector<MPI_Request> requests;
    struct Staged {
      Piece piece;
      std::vector<char> buffer;
    };
    std::vector<std::unique_ptr<Staged>> staging;  // parallel to requests (null for a contiguous piece)
    auto post = [&](const Piece& piece, void* data) {
      requests.emplace_back();
      const int n = static_cast<int>(piece.bytes());
      if (piece.send) check(MPI_Isend(data, n, MPI_BYTE, piece.block->peer, piece.tag, comm_, &requests.back()), "MPI_Isend");
      else check(MPI_Irecv(data, n, MPI_BYTE, piece.block->peer, piece.tag, comm_, &requests.back()), "MPI_Irecv");
    };
    std::vector<std::size_t> next_send(static_cast<std::size_t>(size_), 0), next_receive(static_cast<std::size_t>(size_), 0);
    // Stages the next strided piece to or from `peer`, if there is one.
    auto stage_next = [&](int peer, bool send) {
      auto& queue = (send ? staged_sends : staged_receives)[std::size_t(peer)];
      auto& next = (send ? next_send : next_receive)[std::size_t(peer)];
      if (next >= queue.size()) return;
      auto s = std::make_unique<Staged>(Staged{queue[next++], {}});
      s->buffer.resize(s->piece.bytes());
      const StridedBlock& b = *s->piece.block;
      const std::size_t column = b.rows * b.element_bytes;
      if (send) pack(s->buffer.data(), s->piece.start(), column, b.ld * b.element_bytes, s->piece.nc, true);
      post(s->piece, s->buffer.data());
      staging.push_back(std::move(s));
    };
    for (const Piece& piece : contiguous) {
      post(piece, piece.start());
      staging.emplace_back();
    }
    for (int peer = 0; peer < size_; ++peer)
      for (std::size_t k = 0; k < kStagedPerPeer; ++k) {
        stage_next(peer, false);
        stage_next(peer, true);
      }
    for (std::size_t i = 0; i < self_sends.size(); ++i) copy_block(*self_sends[i], *self_receives[i]);
    // Every rank is here at once, with nothing else to do: wait in MPI's own progress loop, unpack each staged
    // receive as it completes, and put the next piece of that peer and direction in its place.
    std::vector<int> done;
    while (true) {
      int count = 0;
      done.resize(std::max<std::size_t>(requests.size(), 1));
      check(MPI_Waitsome(static_cast<int>(requests.size()), requests.data(), &count, done.data(), MPI_STATUSES_IGNORE),
            "MPI_Waitsome");
      if (count == MPI_UNDEFINED) break;
      for (int k = 0; k < count; ++k) {
        std::unique_ptr<Staged> s = std::move(staging[static_cast<std::size_t>(done[std::size_t(k)])]);
        if (!s) continue;
        const StridedBlock& b = *s->piece.block;
        const std::size_t column = b.rows * b.element_bytes;
        if (!s->piece.send) pack(s->buffer.data(), s->piece.start(), column, b.ld * b.element_bytes, s->piece.nc, false);
        stage_next(b.peer, s->piece.send);
      }
    }
    count(sent, received, n_sent, n_received, clock.seconds());
  }

  // Copies `columns` columns of `column` bytes between a contiguous buffer and strided memory (`stride` bytes
  // apart): packing (into the buffer) or unpacking, over the rank's threads.
  static void pack(char* buffer, char* strided, std::size_t column, std::size_t stride, std::size_t columns,
                   bool into_buffer) {
#pragma omp parallel for schedule(static) if (columns * column > (std::size_t(1) << 20))
    for (std::size_t j = 0; j < columns; ++j) {
      if (into_buffer) std::memcpy(buffer + j * column, strided + j * stride, column);
      else std::memcpy(strided + j * stride, buffer + j * column, column);
    }
  }

  std::unique_ptr<BlockLender> lend(BlockProvider provide) override {
    return std::make_unique<MpiLender>(*this, lend_comm_, std::move(provide));
  }

  void agree(const FailureReport* failed) override {
    Stopwatch clock;
    int mine = failed != nullptr ? rank_ : size_, lowest = size_;
    check(MPI_Allreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, comm_), "MPI_Allreduce");
    if (lowest == size_) {
      count(0, 0, 0, 0, clock.seconds());
      return;
    }
    WireReport wire = failed != nullptr && lowest == rank_ ? to_wire(*failed) : WireReport{};
    check(MPI_Bcast(&wire, sizeof wire, MPI_BYTE, lowest, comm_), "MPI_Bcast");
    throw RankFailure(from_wire(wire), lowest, size_, lowest == rank_);
  }

  bool all_arrive_within(double seconds) override {
    MPI_Request barrier;
    if (MPI_Ibarrier(fail_comm_, &barrier) != MPI_SUCCESS) return false;
    Stopwatch clock;
    int done = 0;
    while (clock.seconds() < seconds) {
      MPI_Test(&barrier, &done, MPI_STATUS_IGNORE);
      if (done) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;  // the request is left pending: the process is about to abort
  }

  static std::string library_version() {
    char text[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    MPI_Get_library_version(text, &length);
    std::string v(text, std::size_t(length));
    return v.substr(0, std::min(v.find(','), v.find('\n')));
  }

 private:
  void reduce_broadcast(void* data, std::size_t count_, MPI_Datatype type, std::size_t element) {
    // Reduced at rank 0 and broadcast, rather than MPI_Allreduce: MPI does not promise that every rank of an
    // allreduce gets the same bits, and every rank must see the same J and K (see linalg/comm.hpp).
    Stopwatch clock;
    const std::size_t per = kMaxMessage / element;
    for (std::size_t offset = 0; offset < count_; offset += per) {
      const int n = static_cast<int>(std::min(per, count_ - offset));
      char* p = static_cast<char*>(data) + offset * element;
      check(MPI_Reduce(rank_ == 0 ? MPI_IN_PLACE : p, rank_ == 0 ? p : nullptr, n, type, MPI_SUM, 0, comm_),
            "MPI_Reduce");
      check(MPI_Bcast(p, n, type, 0, comm_), "MPI_Bcast");
    }
    const double b = double(count_ * element);
    // A tree's worth on average: each rank sends its part once and receives the result once.
    count(b * (rank_ == 0 ? double(size_ - 1) : 1.0), b * (rank_ == 0 ? double(size_ - 1) : 1.0), rank_ == 0 ? size_ - 1 : 1,
          rank_ == 0 ? size_ - 1 : 1, clock.seconds());
  }

  MPI_Comm comm_ = MPI_COMM_NULL, lend_comm_ = MPI_COMM_NULL, fail_comm_ = MPI_COMM_NULL;
  std::map<std::tuple<int, int, Index>, std::unique_ptr<DenseGrid>> grids_;  // dense_grid(), by options
  int rank_ = 0, size_ = 1, node_ranks_ = 1;
};

}  // namespace

std::unique_ptr<Comm> make_mpi_comm(int* argc, char*** argv) {
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    MPI_Finalize();
    throw UnsupportedError(fmt::format("MPI: the library ({}) gives thread level {}; dfmp2 needs MPI_THREAD_MULTIPLE "
                                       "(a thread of each rank lends its blocks to the others)",
                                       MpiComm::library_version(), provided));
  }
  return std::make_unique<MpiComm>();
}

void mpi_finalize() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void mpi_abort(int exit_code) { MPI_Abort(MPI_COMM_WORLD, exit_code); }

std::string mpi_version() { return MpiComm::library_version(); }

}  // namespace dfmp2::linalg::detail
