// The redistributions' rate (linalg/comm.hpp exchange): every rank sends every other rank one block of its columns,
// contiguous (the DF-MP2 fitting's occupied blocks) and strided (the DF-J/K fitting's row shares of a column-major
// matrix: `rows / ranks` rows of each of its columns), and receives the same. Prints GB/s per rank (bytes sent and
// received by the rank over the exchange's wall time, median of the repeats) and checks every element arrived.
//
//   mpirun -np 2 build/bench/bench_exchange [MiB per rank, default 256] [repeats, default 5] [rows, default 100000]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "linalg/comm.hpp"

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  dfmp2::linalg::init_world(&argc, &argv);
  auto& comm = dfmp2::linalg::world();
  const double mib = argc > 1 ? std::atof(argv[1]) : 256.0;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
  const int ranks = comm.size(), me = comm.rank();
  // A column-major matrix of `rows` x `cols` doubles per rank, about `mib` MiB; each rank's share of the rows goes
  // to that rank (strided), or the whole matrix cut into column blocks (contiguous).
  const std::size_t rows = argc > 3 ? std::size_t(std::atol(argv[3])) : 100000, cols = std::max<std::size_t>(ranks, std::size_t(mib * 1048576.0 / 8.0 / rows));
  // Received: from each rank a share of rows or of columns, at most one more than an even share each.
  std::vector<double> mine(rows * cols), theirs(std::size_t(ranks) * (rows / ranks + 1) * (cols / ranks + 1) * ranks);
  for (std::size_t i = 0; i < mine.size(); ++i) mine[i] = double(me) * 1e9 + double(i);
  bool ok = true;
  for (const bool strided : {false, true}) {
    std::vector<double> seconds;
    for (int rep = 0; rep < repeats; ++rep) {
      std::vector<dfmp2::linalg::StridedBlock> sends, receives;
      for (int r = 0; r < ranks; ++r) {
        if (strided) {
          const std::size_t r0 = rows * r / ranks, nr = rows * (r + 1) / ranks - r0;
          sends.push_back({r, mine.data() + r0, nr, cols, rows, sizeof(double)});
          // From rank r: its rows of my share, all its columns, into a matrix of my rows x (cols per rank).
          const std::size_t m0 = rows * me / ranks, mr = rows * (me + 1) / ranks - m0;
          receives.push_back({r, theirs.data() + r * mr * cols, mr, cols, mr, sizeof(double)});
        } else {
          const std::size_t c0 = cols * r / ranks, nc = cols * (r + 1) / ranks - c0;
          sends.push_back({r, mine.data() + c0 * rows, rows, nc, rows, sizeof(double)});
          const std::size_t m0 = cols * me / ranks, mc = cols * (me + 1) / ranks - m0;
          receives.push_back({r, theirs.data() + r * mc * rows, rows, mc, rows, sizeof(double)});
        }
      }
      comm.min(0);
      const double t = now();
      comm.exchange(sends, receives);
      seconds.push_back(comm.max(now() - t));
      // Check: element (i, j) of my share from rank r is r's (m0 + i, j) (strided), or r's (i, c0 + j).
      for (int r = 0; r < ranks; ++r) {
        if (strided) {
          const std::size_t m0 = rows * me / ranks, mr = rows * (me + 1) / ranks - m0;
          for (std::size_t j = 0; j < cols; j += 7)
            ok = ok && theirs[r * mr * cols + j * mr] == double(r) * 1e9 + double(m0 + j * rows);
        } else {
          const std::size_t m0 = cols * me / ranks, mc = cols * (me + 1) / ranks - m0;
          for (std::size_t j = 0; j < mc; j += 3)
            ok = ok && theirs[r * mc * rows + j * rows] == double(r) * 1e9 + double((m0 + j) * rows);
        }
      }
    }
    std::sort(seconds.begin(), seconds.end());
    const double median = seconds[seconds.size() / 2];
    // Bytes this rank sends to the others and receives from them.
    const double bytes = 2.0 * 8.0 * double(rows * cols) * double(ranks - 1) / double(ranks);
    if (me == 0)
      std::printf("%d ranks, %s: %.1f MiB each way per rank, %.3f s, %.2f GB/s per rank\n", ranks,
                  strided ? "strided (row shares)" : "contiguous (column blocks)", bytes / 2 / 1048576.0, median,
                  bytes / median / 1e9);
  }
  ok = comm.min(ok ? 1.0 : 0.0) > 0.5;
  if (me == 0 && !ok) std::printf("FAIL: an element arrived wrong\n");
  dfmp2::linalg::finalize_world();
  return ok ? 0 : 1;
}
