#pragma once
// The Trainium device models `trn1` (NeuronCore-v2) and `trn2` (NeuronCore-v3): a linalg::Backend that computes
// each op on the host as the NeuronCore would (fp32 or bf16 operands, fp32 accumulation per 128-deep K tile,
// host-side diagonal blocks of TRSM and Cholesky, densified SpMM) and predicts what the call would cost on the
// device (timing_model.hpp), returned by each call (Backend::run: CallFacet::modelled). fp64 and eigh are not supported on the device.
#include <memory>
#include <string>

#include "devices/device_options.hpp"
#include "linalg/backend.hpp"

namespace dfmp2::devices {

// device: "trn1" or "trn2" (UnsupportedError otherwise). Parameter overrides come from options.overrides[device]
// (InputError for an unknown name); options.compile_cache is the persistent compile cache folder (created; empty:
// none).
std::unique_ptr<linalg::Backend> make_neuron_backend(const std::string& device, const DeviceOptions& options = {});

}  // namespace dfmp2::devices
