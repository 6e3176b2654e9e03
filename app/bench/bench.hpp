#pragma once
// `dfmp2 bench`: tables comparing backends (the device models included) per kernel and shape, DF-MP2 end to end on
// the synthetic shapes, and the cost of a user's sequence of kernel calls (a trace). bench/README.md, section
// "dfmp2 bench", documents the flags, the `bench:` section of a config file and the trace format.
//
//   mode         what runs                                                    rows
//   kernels      each op of --ops at each size of --sizes                      op x size (x density) x backend x precision
//   dfmp2        run_dfmp2 on the synthetic shapes of --dfmp2                  shape x backend x precision
//   trace        the calls of a trace file, in order                           entry x backend (and a total)
//   calibration  the device model against the published trn1 measurements   one per published measurement
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "linalg/backend.hpp"
#include "linalg/matrix_view.hpp"

namespace dfmp2::app::bench {

enum class Mode { kernels, dfmp2, trace, calibration };

struct BenchOptions {
  Mode mode = Mode::kernels;
  std::vector<std::string> ops;            // kernel names (kernel_names())
  std::vector<linalg::Index> sizes;        // kernels: the size n of each op (see kernel_names())
  std::vector<double> densities;           // spmm_csr / spmm_bsr
  std::vector<std::string> backends;       // backend names (devices::built_backends())
  std::vector<std::string> precisions;     // fp64, fp32, bf16, bf16x3 (dfmp2 mode also: mixed); empty: the default
  bool precisions_given = false;           // set by --precision or the config (a trace file's own does not override)
  std::vector<std::string> shapes;         // dfmp2 mode: small, medium, large
  std::string trace_path;                  // trace mode
  int warmup = 1;                          // untimed calls before the timed ones (the first is the cold call)
  int repeat = 5;                          // timed calls
  int threads = 0;                         // 0: all cores
  linalg::Index batch_count = 16;          // gemm_batched: problems per call
  linalg::Index bsr_block = 32;            // spmm_bsr: block rows = block cols
  std::uint64_t seed = 20240901;           // Philox seed of the operands
  double condition = 0;                    // --condition: SPD operand's condition number (0: R R^T/n + I, about 5)
  bool allow_fallback = false;             // unsupported cells are marked, not an error
  std::string compile_cache;               // device models: persistent compile cache (empty: a fresh temp folder)
  std::string csv, json, svg;              // output files (empty: none)
};

// The kernel names --ops takes, in the order the tables list them.
const std::vector<std::string>& kernel_names();

// One kernel call, as a trace entry or a kernel-table cell describes it.
struct CallSpec {
  std::string op;  // a kernel name (gemm, gemm_batched, syrk, trsm, trsm_left, cholesky, eigh, ...)
  linalg::Index m = 0, n = 0, k = 0;
  linalg::Index count = 1;          // gemm_batched: problems
  bool trans_a = false, trans_b = false;  // gemm, gemm_batched
  bool syrk_trans = false;          // syrk: C = A^T A (A k x n) instead of A A^T (A n x k)
  linalg::Side side = linalg::Side::right;  // trsm
  bool trsm_trans = true;           // trsm: op(A) = A^T
  double density = 0.1;             // spmm_*: stored fraction (CSR: entries; BSR: blocks)
  double condition = 0;             // cholesky, eigh, invsqrt_*: condition number of the SPD operand (0: R R^T/n + I)
  linalg::Index block = 32;         // spmm_bsr
  std::string shape_label() const;  // "m x n x k" etc., as the tables print it
};

// Whether a cell (kernel, DF-MP2 shape, trace entry) ran: ok; unsupported (reported instead of failing with
// --allow-fallback); failed (kernels mode: the op threw a NumericalError, e.g. Newton-Schulz did not converge on an
// ill-conditioned operand; the note says why). status_name() is what the tables, CSV and JSON print.
enum class CellStatus { ok, unsupported, failed };
inline const char* status_name(CellStatus s) {
  return s == CellStatus::ok ? "ok" : s == CellStatus::unsupported ? "unsupported" : "failed";
}

// Measured and (device models) modelled time of one kernel cell or trace entry.
struct Timing {
  CellStatus status = CellStatus::ok;
  std::string note;            // why it is unsupported
  int calls = 0;               // timed calls
  double median = 0, min = 0, max = 0;  // measured host seconds per call (or per pass of a trace entry)
  double flops = 0;            // per call
  double samples = 0;          // random: numbers per call
  bool modelled = false;       // a device model ran it
  linalg::ModelledTime cold;   // first call (compile or cache load)
  linalg::ModelledTime warm;   // median of the timed calls' totals, with the breakdown of that call
  double peak_flops = 0;       // Backend::peak_flops() in the cell's precision
};

// Parses the command line of `dfmp2 bench` (argv after "bench" is handled by main.cpp through CLI11; this runs the
// whole subcommand from the options it collected). Returns the exit code; errors are thrown as dfmp2::Error.
int run_bench(const BenchOptions& options);

// Reads the `bench:` section of a YAML config file into `options`, for every key the command line did not give
// (`given` lists the keys, with the flag names' underscores, that the command line set). InputError with
// file:line:column for an unknown key or a bad value.
void read_bench_config(const std::string& path, const std::vector<std::string>& given, BenchOptions& options);

// Splits and checks the list flags; `flag` names the flag in errors ("--sizes").
std::vector<std::string> split_list(const std::string& text);
std::vector<linalg::Index> parse_sizes(const std::string& flag, const std::vector<std::string>& items);
std::vector<double> parse_densities(const std::string& flag, const std::vector<std::string>& items);

// Checks names and values (InputError naming the flag, or UnsupportedError for an unknown backend).
void validate(BenchOptions& options);

}  // namespace dfmp2::app::bench
