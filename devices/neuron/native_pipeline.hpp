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

// `modes`: the operand format of each step, in chem::matmul_steps() order (metric, transform, fitting, pair_energy).
NativePipeline native_dfmp2(const NeuronParams& p, const Mp2Shape& shape, const std::vector<linalg::MatmulMode>& modes);

}  // namespace dfmp2::devices::neuron
