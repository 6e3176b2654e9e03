#pragma once
// The device-native DF-MP2 pipeline on one NeuronCore (README "Device models", "Two predictions"): what DF-MP2
// would cost written for the device rather than through the published library's calls. Tensors stay resident in
// HBM across the steps (within its capacity; blocked through the host link when not), each step is one fused kernel
// launched once per block, and only the AO integrals (or the MO ones) cross the host link, once. Each step's time is
// the largest of what its engines and links must do, the work running concurrently as a fused kernel's engines do:
//   Tensor Engine  its flops at the peak of the step's operand format (full 128 x 128 x 512 tiles),
//   Vector Engine  PSUM evacuations, on-chip operand casts (bf16, bf16x3) and the pair energies' reduction,
//   DMA queues     every HBM <-> SBUF byte over the core's DMA engines,
//   HBM            the same bytes at the HBM bandwidth,
//   host link      host -> HBM copies (copy_seconds, the published library's measured curve),
// plus what cannot overlap: host work (the metric's Cholesky and inverse) and one launch submission per block.
// The bottleneck named is the largest of these; the share of the Tensor Engine's peak is flops / (time x peak).
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "devices/neuron/neuron_params.hpp"
#include "linalg/backend.hpp"
#include "linalg/matrix_view.hpp"

namespace dfmp2::devices::neuron {

// A closed-shell DF-MP2 problem: nbf 0 when the integrals come in MO form, (P|ia), rather than as (P|mn).
struct Mp2Shape {
  linalg::Index nbf = 0, nocc = 0, nvir = 0, naux = 0;
};

struct NativeStep {
  std::string step;  // metric, transform, fitting, pair_energy (chem::matmul_steps())
  linalg::MatmulMode mode = linalg::MatmulMode::fp32;
  double seconds = 0;
  // The parts: concurrent engines and links, then the serial host work and launch submissions.
  double tensor = 0, vector = 0, dma = 0, hbm = 0, link = 0, host = 0, launch = 0;
  double flops = 0;     // of the Tensor Engine's products
  long launches = 0;
  std::string bottleneck;  // "Tensor Engine", "Vector Engine", "DMA queues", "HBM", "host link", "host", "launches"
  double peak_share = 0;   // flops / (seconds x the Tensor Engine's peak in `mode`)
};

struct NativePipeline {
  std::vector<NativeStep> steps;
  double resident_bytes = 0;  // L^-1 and B, kept in HBM from the step that makes them to the last that reads them
  bool resident = true;       // false: B did not fit beside L^-1 in HBM and is streamed through the host link
  double seconds() const;
};

// The pipeline's steps, by the names DF-MP2 gives them (chem::step_name).
inline const std::vector<std::string>& native_steps() {
  static const std::vector<std::string> steps = {"metric", "transform", "fitting", "pair_energy"};
  return steps;
}

// `modes`: the operand format of each step, by its name (a step not named runs in fp32).
NativePipeline native_dfmp2(const NeuronParams& p, const Mp2Shape& shape,
                            const std::map<std::string, linalg::MatmulMode>& modes);
// The same with the formats in the order of native_steps().
NativePipeline native_dfmp2(const NeuronParams& p, const Mp2Shape& shape, const std::vector<linalg::MatmulMode>& modes);

// What a DF-MP2 run is, as far as the device-native prediction cares.
struct NativeRunKind {
  bool device_model = false;      // the run's backend is a Neuron device model
  int ranks = 1;
  bool open_shell = false;
  std::size_t systems = 1;        // a counterpoise run's complex and fragments
  bool device_arithmetic = true;  // the run's precision is one the device has (fp32, bf16, bf16x3)
  std::string precision;          // its name, for the reason
};
// The device-native prediction is of the whole problem on one NeuronCore in the device's arithmetic, for one
// closed-shell system: why a run of another kind has none ("" when it has one, or is not on a device model).
std::string why_no_native_prediction(const NativeRunKind& run);

}  // namespace dfmp2::devices::neuron
