#include "devices/neuron/timing_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "linalg/errors.hpp"

namespace dfmp2::devices::neuron {
namespace {

Index ceil_div(Index a, Index b) { return (a + b - 1) / b; }

struct Engines {
  double pe_cycles = 0;      // Tensor Engine
  double scalar_cycles = 0;  // Scalar Engine: PSUM -> SBUF evacuation with the alpha scale fused in
  double vector_cycles = 0;  // Vector Engine: beta C added to the evacuated tile; on-chip transpose copies; casts
  double vector_psum_cycles = 0;  // the part of vector_cycles that reads PSUM (transpose evacuations)
  double dma_bytes = 0;
  double dma_count = 0;
  double flops = 0;
  long matmuls = 0;
  long evacuations = 0;
};

using linalg::MatmulMode;

// Tensor Engine cycles of one tile product in `mode`: one matmul instruction, fp32_cost_factor times slower in fp32,
// three bf16 instructions (hi*hi, hi*lo, lo*hi) in bf16x3.
double matmul_cycles(const NeuronParams& p, MatmulMode mode, Index m_stationary, Index n_moving) {
  const double c = std::max(std::min(p.matmul_min_cycles, double(m_stationary)), double(n_moving));
  return mode == MatmulMode::fp32 ? c * p.fp32_cost_factor : mode == MatmulMode::bf16 ? c : 3 * c;
}

// Bytes per element of an operand held in SBUF for the matmuls: fp32, bf16, or bf16 hi and lo.
double sbuf_operand_bytes(MatmulMode mode) { return mode == MatmulMode::bf16 ? 2.0 : 4.0; }

// Cycles of one Vector or Scalar instruction over a rows x cols tile (rows on partitions, one lane per partition,
// one element per lane per cycle), at least the instruction floor MIN_II.
double lane_cycles(const NeuronParams& p, Index rows, Index cols) {
  return std::max(p.engine_min_cycles, std::ceil(double(rows) * double(cols) / std::min(p.engine_lanes, double(rows))));
}

// Vector Engine cycles to bring `elements` loaded fp32 operand elements into the mode's format, one instruction
// per loaded tile of `tile_free` elements per partition: nothing for fp32; a cast (one input) for bf16; for bf16x3
// the cast to hi, then lo = x - hi as a two-input instruction with a bf16 result.
double operand_format_cycles(const NeuronParams& p, MatmulMode mode, double elements, double tile_free) {
  if (mode == MatmulMode::fp32 || elements <= 0) return 0;
  const double tiles = std::ceil(elements / (p.engine_lanes * tile_free));
  const double cast = tiles * std::max(p.engine_min_cycles, tile_free);
  if (mode == MatmulMode::bf16) return cast;
  return cast + tiles * std::max(p.engine_min_cycles, tile_free * p.vector_two_input_factor);
}

void check_tiles(const NeuronParams& p, const Launch& l, double sbuf_per_partition, double psum_per_partition) {
  const double sbuf = p.sbuf_partition_kib * 1024.0, psum = p.psum_partition_kib * 1024.0;
  if (sbuf_per_partition > sbuf || psum_per_partition > psum)
    throw ResourceError(fmt::format(
        "{}: {} launch ({} x {} x {}) needs {:.1f} KiB of SBUF and {:.1f} KiB of PSUM per partition for its working "
        "tiles; the NeuronCore has {} KiB and {} KiB",
        p.device, l.kind == Launch::Kind::gemm ? "gemm" : "syrk", l.m, l.n, l.k, sbuf_per_partition / 1024.0,
        psum_per_partition / 1024.0, p.sbuf_partition_kib, p.psum_partition_kib));
}

Engines gemm_engines(const NeuronParams& p, const Launch& l) {
  const Index tm = static_cast<Index>(p.pe_rows), tn = static_cast<Index>(p.moving_free_max), tk = tm;
  const double eb = sbuf_operand_bytes(l.mode);
  const double staging = l.mode == MatmulMode::fp32 ? 0.0 : 4.0;  // the fp32 tile a cast or split reads
  // Working tiles, double-buffered: stationary tk x tm and moving tk x tn operands (and their fp32 staging when
  // cast on chip), the evacuated tm x tn fp32 result (and the C tile when beta != 0); one PSUM bank of tn fp32 per
  // partition per accumulation, two in flight.
  check_tiles(p, l, 2.0 * ((tm + tn) * (eb + staging) + tn * 4.0 * (l.beta_nonzero ? 2 : 1)), 2.0 * tn * 4.0);
  Engines e;
  const Index mt = ceil_div(l.m, tm), nt = ceil_div(l.n, tn), kt = ceil_div(l.k, tk);
  for (Index i = 0; i < mt; ++i) {
    const Index mi = std::min(tm, l.m - i * tm);
    for (Index j = 0; j < nt; ++j) {
      const Index nj = std::min(tn, l.n - j * tn);
      e.pe_cycles += double(kt) * matmul_cycles(p, l.mode, mi, nj);
      e.flops += 2.0 * double(kt * tk) * double(tm) * double(nj);
      e.scalar_cycles += lane_cycles(p, mi, nj);
      if (l.beta_nonzero) e.vector_cycles += lane_cycles(p, mi, nj);
    }
  }
  e.matmuls = mt * nt * kt * (l.mode == MatmulMode::bf16x3 ? 3 : 1);
  e.evacuations = mt * nt;
  // A row strip (tm x K) stays in SBUF across the N tiles when it fits in a quarter of a partition; B is loaded
  // once when all of it fits in half of SBUF, else once per M tile.
  const double sbuf = p.sbuf_partition_kib * 1024.0;
  const bool a_strip_fits = double(l.k) * eb <= sbuf / 4;
  const bool b_fits = double(l.k) * double(l.n) * eb / p.pe_rows <= sbuf / 2;
  const double a_loads = a_strip_fits ? 1 : double(nt), b_loads = b_fits ? 1 : double(mt);
  // Operands arrive in HBM as fp32 and are brought into the mode's format on chip once, on their first load; an
  // operand loaded again (it does not stay in SBUF) has its converted parts written back to HBM once and reloaded
  // in that format (bf16: 2 bytes, bf16x3: hi and lo, 4 bytes per element).
  const double a_elems = double(l.m) * double(l.k), b_elems = double(l.k) * double(l.n);
  e.vector_cycles += operand_format_cycles(p, l.mode, a_elems, double(tm)) +
                     operand_format_cycles(p, l.mode, b_elems, double(std::min(tn, std::max<Index>(l.n, 1))));
  auto operand_bytes = [&](double elems, double loads) {
    if (loads <= 1) return elems * 4.0;
    if (l.mode == MatmulMode::fp32) return elems * 4.0 * loads;
    return elems * 4.0 + elems * eb + elems * eb * (loads - 1);
  };
  e.dma_bytes = operand_bytes(a_elems, a_loads) + operand_bytes(b_elems, b_loads) +
                double(l.m) * double(l.n) * 4.0 * (l.beta_nonzero ? 2 : 1);
  e.dma_count = double(mt * kt) * a_loads + double(kt * nt) * b_loads + double(mt * nt) * (l.beta_nonzero ? 2 : 1);
  const double c = double(l.count);
  e.pe_cycles *= c, e.scalar_cycles *= c, e.vector_cycles *= c, e.dma_bytes *= c, e.dma_count *= c, e.flops *= c;
  e.matmuls *= l.count, e.evacuations *= l.count;
  return e;
}

Engines syrk_engines(const NeuronParams& p, const Launch& l) {
  const Index t = static_cast<Index>(p.pe_rows);
  const double eb = sbuf_operand_bytes(l.mode);
  const Index mt = ceil_div(l.n, t), kt = ceil_div(l.k, t);
  // A and its on-chip transpose stay resident when they fit in half of SBUF; otherwise each output tile streams
  // its two row strips of A again.
  const double resident = 2.0 * double(l.n) * double(l.k) * eb / p.pe_rows;
  const bool fits = resident <= p.sbuf_partition_kib * 1024.0 / 2;
  const double staging = l.mode == MatmulMode::fp32 ? 0.0 : 4.0;
  check_tiles(p, l, 2.0 * (2.0 * t * (eb + staging) + t * 4.0 * (l.beta_nonzero ? 2 : 1)), 2.0 * t * 4.0);
  Engines e;
  const Index tiles = mt * (mt + 1) / 2;  // 128 x 128 output tiles on and below the diagonal
  for (Index i = 0; i < mt; ++i) {
    const Index mi = std::min(t, l.n - i * t);
    for (Index j = 0; j <= i; ++j) {
      const Index nj = std::min(t, l.n - j * t);
      e.pe_cycles += double(kt) * matmul_cycles(p, l.mode, mi, nj);
      e.flops += 2.0 * double(kt * t) * double(t) * double(nj);
      e.scalar_cycles += lane_cycles(p, mi, nj);
      if (l.beta_nonzero) e.vector_cycles += lane_cycles(p, mi, nj);
    }
  }
  // On-chip transposes: one identity matmul per 128 x 128 tile of each operand part (bf16x3: hi and lo, each an
  // exact bf16 transpose), evacuated by the Vector Engine.
  const Index parts = l.mode == MatmulMode::bf16x3 ? 2 : 1;
  const Index transposes = mt * kt * parts;
  const MatmulMode transpose_mode = l.mode == MatmulMode::fp32 ? MatmulMode::fp32 : MatmulMode::bf16;
  e.pe_cycles += double(transposes) * matmul_cycles(p, transpose_mode, t, t);
  e.vector_cycles += double(transposes) * lane_cycles(p, t, t);
  e.vector_psum_cycles += double(transposes) * lane_cycles(p, t, t);
  e.matmuls = tiles * kt * (l.mode == MatmulMode::bf16x3 ? 3 : 1) + transposes;
  e.evacuations = tiles + transposes;
  const double a_loads = fits ? 1.0 : double(mt);
  const double loaded = double(l.n) * double(l.k) * a_loads;  // fp32 from HBM, cast or split on chip per load
  e.vector_cycles += operand_format_cycles(p, l.mode, loaded, double(t));
  e.dma_bytes = loaded * 4.0 + double(tiles) * double(t * t) * 4.0 * (l.beta_nonzero ? 2 : 1);
  e.dma_count = double(mt * kt) * a_loads + double(tiles) * (l.beta_nonzero ? 2 : 1);
  return e;
}

}  // namespace

LaunchCost launch_cost(const NeuronParams& p, const Launch& l) {
  const Engines e = l.kind == Launch::Kind::gemm ? gemm_engines(p, l) : syrk_engines(p, l);
  LaunchCost c;
  c.dispatch = p.dispatch_seconds(double(l.tensors));
  for (double b : l.copies_in) c.transfer += copy_seconds(p, CopyDirection::to_device, b);
  for (double b : l.copies_out) c.transfer += copy_seconds(p, CopyDirection::to_host, b);
  // Tile DMAs spread over the DMA queues; their aggregate rate is capped by the HBM.
  const double dma_rate = std::min(p.dma_bytes_per_second(), p.hbm_gbps * 1e9);
  c.dma = e.dma_bytes / dma_rate + e.dma_count * p.dma_fixed_us * 1e-6 / p.dma_engines;
  const double scalar_s = e.scalar_cycles / (p.scalar_clock_ghz * 1e9);
  const double vector_s = e.vector_cycles / (p.vector_clock_ghz * 1e9);
  // On NeuronCore-v2 the Scalar Engine's PSUM evacuations and the Vector Engine's PSUM reads take turns.
  const double psum_s = p.psum_vector_scalar_serial > 0 ? scalar_s + e.vector_psum_cycles / (p.vector_clock_ghz * 1e9) : 0;
  c.compute = std::max({e.pe_cycles / (p.pe_clock_ghz * 1e9), scalar_s, vector_s, psum_s});
  const bool any_work = e.matmuls > 0;
  if (any_work) {
    const double t = p.pe_rows;
    const double first_elements = t * t + t * std::min(p.moving_free_max, double(std::max<Index>(l.n, 1)));
    c.fill = p.dma_fixed_us * 1e-6 + first_elements * 4.0 / (p.dma_engine_gbps * 1e9) +
             operand_format_cycles(p, l.mode, first_elements, t) / (p.vector_clock_ghz * 1e9) +
             matmul_cycles(p, l.mode, static_cast<Index>(t), static_cast<Index>(p.moving_free_max)) /
                 (p.pe_clock_ghz * 1e9) +
             p.moving_free_max / (p.scalar_clock_ghz * 1e9);
  }
  c.device = c.fill + std::max(c.dma, c.compute);
  c.flops = e.flops * (l.mode == MatmulMode::bf16x3 ? 3.0 : 1.0);  // three products per tile in bf16x3
  c.instructions = e.matmuls + static_cast<long>(e.dma_count) + e.evacuations;
  return c;
}

double copy_seconds(const NeuronParams& p, CopyDirection direction, double bytes) {
  const bool in = direction == CopyDirection::to_device;
  const double knee = (in ? p.h2d_knee_mib : p.d2h_knee_mib) * 1048576.0;
  const double small_rate = (in ? p.h2d_small_gbps : p.d2h_small_gbps) * 1e9;
  const double large_rate = (in ? p.h2d_large_gbps : p.d2h_large_gbps) * 1e9;
  const double fixed = (in ? p.h2d_fixed_us : p.d2h_fixed_us) * 1e-6;
  return fixed + std::min(bytes, knee) / small_rate + std::max(0.0, bytes - knee) / large_rate;
}

double compile_seconds(const NeuronParams& p, long instructions) {
  // Up to compile_unrolled_max instructions are scheduled one by one; a kernel beyond that keeps its loops rolled
  // and costs the compiler little per further instruction.
  const double scheduled = std::min(double(instructions), p.compile_unrolled_max);
  const double rolled = std::max(0.0, double(instructions) - p.compile_unrolled_max);
  return p.compile_base_s +
         (scheduled * p.compile_ms_per_instruction + rolled * p.compile_ms_per_rolled_instruction) * 1e-3;
}

void CallTimeline::host(double seconds, long wait_for) {
  if (wait_for >= 0) host_t_ = std::max(host_t_, done_.at(static_cast<size_t>(wait_for)));
  host_t_ += seconds;
  sum_.host += seconds;
}

long CallTimeline::launch(const LaunchCost& c, CompileOutcome outcome, double compile_or_load_seconds) {
  const long index = launches();
  if (index >= depth_) host_t_ = std::max(host_t_, done_[static_cast<size_t>(index - depth_)]);
  const double compile = outcome == CompileOutcome::resident ? 0.0 : compile_or_load_seconds;
  host_t_ += c.dispatch + compile;
  const double start = std::max(host_t_, device_free_);
  device_free_ = start + c.transfer + c.device;
  done_.push_back(device_free_);
  sum_.dispatch += c.dispatch;
  sum_.transfer += c.transfer;
  sum_.dma += std::max(0.0, c.dma - c.compute);
  sum_.compute += c.fill + c.compute;
  sum_.compile += compile;
  sum_.device_flops += c.flops;
  sum_.launches += 1;
  if (outcome == CompileOutcome::compiled) sum_.compiles += 1;
  if (outcome == CompileOutcome::loaded) sum_.cache_loads += 1;
  return index;
}

linalg::ModelledTime CallTimeline::finish() const {
  linalg::ModelledTime t = sum_;
  t.total = std::max(host_t_, device_free_);
  return t;
}

}  // namespace dfmp2::devices::neuron
