#include "devices/neuron/native_pipeline.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "devices/neuron/timing_model.hpp"

namespace dfmp2::devices::neuron {
namespace {

using linalg::MatmulMode;

constexpr double kFloat = 4;  // bytes of an fp32 element: operands live in HBM in fp32, cast on chip

// Vector Engine cycles per element (per lane) of the on-chip cast of an fp32 operand tile: bf16 one copy-cast;
// bf16x3 the cast and a two-input subtract for the low part (README "Device precisions").
double cast_cycles(const NeuronParams& p, MatmulMode mode) {
  return mode == MatmulMode::fp32 ? 0.0 : mode == MatmulMode::bf16 ? 1.0 : 1.0 + p.vector_two_input_factor;
}

// Vector Engine cycles per element of a pair block (ia|jb) to its energy, fp32: evacuate the block and its transpose
// (made by the Tensor Engine) from PSUM, 2 (ia|jb) - (ib|ja), times (ia|jb), times 1/D with the sum accumulated:
// two one-input and three two-input instructions (the denominators e_i + e_j - e_a - e_b as one one-input
// instruction from a resident e_a + e_b).
double pair_reduction_cycles(const NeuronParams& p) { return 3.0 + 3.0 * p.vector_two_input_factor; }

// Host <-> HBM traffic of `bytes` copied as `blocks` tensors of equal size.
double link_seconds(const NeuronParams& p, double bytes, double blocks,
                    CopyDirection direction = CopyDirection::to_device) {
  if (bytes <= 0) return 0;
  blocks = std::max(1.0, blocks);
  return blocks * copy_seconds(p, direction, bytes / blocks);
}

void finish(const NeuronParams& p, NativeStep& s, double hbm_dma_bytes, double vector_cycles) {
  s.hbm = hbm_dma_bytes / (p.hbm_gbps * 1e9);
  s.dma = hbm_dma_bytes / p.dma_bytes_per_second();
  s.vector = vector_cycles / (p.engine_lanes * p.vector_clock_ghz * 1e9);
  s.tensor = s.flops / p.peak_flops(s.mode);
  s.launch = double(s.launches) * p.dispatch_seconds(3);  // each launch with three tensors, as a GEMM launch's
  const std::pair<const char*, double> parts[] = {{"Tensor Engine", s.tensor}, {"Vector Engine", s.vector},
                                                  {"DMA queues", s.dma},       {"HBM", s.hbm},
                                                  {"host link", s.link},       {"host", s.host},
                                                  {"launches", s.launch}};
  const double concurrent = std::max({s.tensor, s.vector, s.dma, s.hbm, s.link});
  s.seconds = concurrent + s.host + s.launch;
  const auto* largest = std::max_element(std::begin(parts), std::end(parts),
                                         [](const auto& a, const auto& b) { return a.second < b.second; });
  s.bottleneck = s.seconds > 0 ? largest->first : "-";  // a step with nothing to do (MO input streamed later)
  s.peak_share = s.seconds > 0 ? s.flops / (s.seconds * p.peak_flops(s.mode)) : 0;
}

}  // namespace

double NativePipeline::seconds() const {
  double t = 0;
  for (const auto& s : steps) t += s.seconds;
  return t;
}

NativePipeline native_dfmp2(const NeuronParams& p, const Mp2Shape& shape, const std::vector<MatmulMode>& modes) {
  std::map<std::string, MatmulMode> by_step;
  for (std::size_t i = 0; i < modes.size() && i < native_steps().size(); ++i) by_step[native_steps()[i]] = modes[i];
  return native_dfmp2(p, shape, by_step);
}

std::string why_no_native_prediction(const NativeRunKind& run) {
  if (!run.device_model) return "";
  if (run.ranks > 1) return "made for one rank only (the whole problem on one NeuronCore)";
  if (run.open_shell) return "made for closed shells only";
  if (run.systems > 1) return "made for one system only, not a counterpoise run's complex and fragments";
  if (!run.device_arithmetic) return "the device has no " + run.precision + " arithmetic";
  return "";
}

NativePipeline native_dfmp2(const NeuronParams& p, const Mp2Shape& shape,
                            const std::map<std::string, MatmulMode>& modes) {
  const double n = double(shape.nbf), o = double(shape.nocc), v = double(shape.nvir), q = double(shape.naux);
  const double sbuf = p.sbuf_partition_kib * 1024 * p.pe_rows;
  const double a_bytes = q * o * v * kFloat;  // (P|ia), and B = L^-1 (P|ia) of the same size
  const double l_bytes = q * q * kFloat;
  NativePipeline out;
  // Resident from the fitting on: L^-1 and B, with A beside them while the fitting runs.
  out.resident_bytes = l_bytes + 2 * a_bytes;
  out.resident = out.resident_bytes <= p.hbm_bytes();
  const double stream_blocks = out.resident ? 1.0 : std::ceil(out.resident_bytes / p.hbm_bytes());
  auto mode_of = [&](const char* step) {
    const auto it = modes.find(step);
    return it != modes.end() ? it->second : MatmulMode::fp32;
  };

  {  // The metric: J's Cholesky and L^-1 on the host (the device has no factorisation), L^-1 copied in once.
    NativeStep s{.step = "metric", .mode = mode_of("metric")};
    s.host = 2 * p.host_cholesky_seconds(q);  // potrf, then trtri of the same flops
    s.link = link_seconds(p, l_bytes, 1);
    finish(p, s, 0, 0);
    out.steps.push_back(s);
  }
  {  // The transformation, streamed: each block of (P|mn) (at most 1 GiB, or a quarter of a smaller HBM) crosses the
     // link once and is turned into (P|ia) on chip; (P|ia) goes back to the host when B will not stay resident.
    NativeStep s{.step = "transform", .mode = mode_of("transform")};
    if (shape.nbf > 0) {
      const double ao_bytes = q * n * n * kFloat;
      const double blocks = std::max(1.0, std::ceil(ao_bytes / std::min(p.hbm_bytes() / 4, 1024.0 * 1024 * 1024)));
      s.flops = 2 * q * n * n * o + 2 * q * n * o * v;
      s.link = link_seconds(p, ao_bytes, blocks);
      if (!out.resident) s.link += link_seconds(p, a_bytes, blocks, CopyDirection::to_host);
      s.launches = long(blocks);
      // HBM: (P|mn) read, the half-transformed (P|in) written and read back, (P|ia) written.
      const double bytes = ao_bytes + 2 * q * n * o * kFloat + a_bytes;
      const double evacuated = q * n * o + q * o * v;
      const double cast = (q * n * n + q * n * o) * cast_cycles(p, s.mode);
      finish(p, s, bytes, evacuated + cast);
    } else {  // MO-form input: (P|ia) copied in (when it will not stay resident, the fitting streams it instead)
      s.link = out.resident ? link_seconds(p, a_bytes, 1) : 0.0;
      s.launches = 0;
      finish(p, s, 0, 0);
    }
    out.steps.push_back(s);
  }
  {  // The fitting B = L^-1 A as one triangular product (the zero half skipped); L^-1 read once when half of SBUF
     // holds its triangle, else once per 512-column tile of A.
    NativeStep s{.step = "fitting", .mode = mode_of("fitting")};
    s.flops = q * q * o * v;
    s.launches = long(stream_blocks);
    const double l_reads = l_bytes / 2 <= sbuf / 2 ? 1.0 : std::ceil(o * v / p.moving_free_max);
    const double bytes = 2 * a_bytes + l_reads * l_bytes / 2;
    const double cast = (q * o * v + l_reads * q * q / 2) * cast_cycles(p, s.mode);
    if (!out.resident) {  // A in from the host and B back, block by block
      s.link = link_seconds(p, a_bytes, stream_blocks) +
               link_seconds(p, a_bytes, stream_blocks, CopyDirection::to_host);
    }
    finish(p, s, bytes, q * o * v + cast);
    out.steps.push_back(s);
  }
  {  // The pair energies: block pairs (I <= J) of occupied orbitals, B_I held in SBUF while every B_J streams by;
     // the energy reduced on chip, only the sums leave.
    NativeStep s{.step = "pair_energy", .mode = mode_of("pair_energy")};
    const double pairs = o * (o + 1) / 2;
    s.flops = 2 * q * v * v * pairs;
    const double block = std::max(1.0, std::floor(sbuf / 2 / (q * v * kFloat)));  // occupied orbitals in SBUF
    const double nb = std::ceil(o / block);
    const double streamed = a_bytes * (1 + (nb + 1) / 2);
    s.launches = out.resident ? 1 : long(nb * (nb + 1) / 2);
    if (!out.resident) s.link = link_seconds(p, streamed, double(s.launches));
    const double cast = streamed / kFloat * cast_cycles(p, s.mode);
    finish(p, s, streamed, pairs * v * v * pair_reduction_cycles(p) + cast);
    out.steps.push_back(s);
  }
  return out;
}

}  // namespace dfmp2::devices::neuron
