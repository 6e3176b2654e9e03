#pragma once
// Parameters of the NeuronCore device models, read from devices/neuron/neuron_devices.yaml (embedded into the
// binary at build time) and overridden per run by DeviceOptions::overrides. Each field below is one entry of
// that file, in its unit; the file says where each value comes from (documentation, or a fit to the published
// trn1 measurements and its physical reason).
#include <string>
#include <vector>

#include "devices/device_options.hpp"
#include "linalg/backend.hpp"

namespace dfmp2::devices::neuron {

struct NeuronParams {
  std::string device;  // "trn1" or "trn2"
  // Tensor Engine and the other engines
  double pe_clock_ghz = 0;
  double pe_rows = 0;            // partitions, also the K and M limit of a matmul tile
  double moving_free_max = 0;    // N limit of the moving tile
  double matmul_min_cycles = 0;  // floor of one matmul instruction: max(min(this, N_stationary), N_moving)
  double fp32_cost_factor = 0;
  double vector_clock_ghz = 0;
  double scalar_clock_ghz = 0;
  double engine_lanes = 0;
  double engine_min_cycles = 0;        // floor of one Vector/Scalar instruction (MIN_II): max(this, elements per lane)
  double vector_two_input_factor = 0;  // a two-input (tensor_tensor) Vector instruction costs this x one input
  double psum_vector_scalar_serial = 0;  // 1: Vector and Scalar engines cannot read PSUM at the same time (v2)
  // On-chip memories
  double sbuf_partition_kib = 0;
  double psum_partition_kib = 0;
  // DMA and HBM
  double dma_engines = 0;
  double dma_engine_gbps = 0;
  double dma_fixed_us = 0;
  double hbm_gib = 0;
  double hbm_gbps = 0;
  // Host side: launches (calibrated), copies of pageable tensors (a curve per direction, calibrated), host CPU rates
  // (the host's published GEMM rate times fractions measured on a comparable CPU)
  double dispatch_ms = 0;
  double dispatch_tensor_ms = 0;
  double h2d_fixed_us = 0;       // host -> HBM: fixed cost per tensor,
  double h2d_small_gbps = 0;     //   rate of the first h2d_knee_mib,
  double h2d_knee_mib = 0;
  double h2d_large_gbps = 0;     //   rate of the rest
  double d2h_fixed_us = 0;       // HBM -> host, the same form
  double d2h_small_gbps = 0;
  double d2h_knee_mib = 0;
  double d2h_large_gbps = 0;
  // Host CPU rates as functions of the work's size, Hockney's (r_inf, n_1/2) form r(n) = r_inf n / (n + n_1/2):
  double host_gflops = 0;            // r_inf of a 128-row diagonal panel solve of the blocked TRSM ...
  double host_gflops_half_rhs = 0;   // ... and its n_1/2 in right-hand sides
  double host_lapack_gflops = 0;     // r_inf of the whole Cholesky factorisation on the host (LAPACK) ...
  double host_lapack_half_n = 0;     // ... and its n_1/2 in the matrix order
  double host_stream_gbps = 0;       // host passes (padding copies, contiguous copies, alpha * result, the TRSM's
                                     // subtraction) over tensors up to 32 MiB, bytes read plus written per second
  double host_stream_memory_gbps = 0;  // the same over larger tensors (from main memory)
  double host_first_touch_gbps = 0;  // first touch of a freshly mapped host tensor (page faults and zeroing)
  // The rate of a host panel solve against nrhs right-hand sides, and of the Cholesky of order n, in flop/s.
  double host_panel_solve_flops(double nrhs) const { return host_gflops * 1e9 * nrhs / (nrhs + host_gflops_half_rhs); }
  double host_cholesky_flops(double n) const { return host_lapack_gflops * 1e9 * n / (n + host_lapack_half_n); }
  double host_cholesky_seconds(double n) const { return n * n * n / 3.0 / host_cholesky_flops(n); }
  double syrk_mirror_gbps = 0;
  double densify_memset_gbps = 0;
  double densify_ns_per_nnz = 0;
  // Compiler and runtime
  double compile_base_s = 0;
  double compile_ms_per_instruction = 0;          // per instruction scheduled, up to ...
  double compile_unrolled_max = 0;                // ... this many instructions of a kernel, then
  double compile_ms_per_rolled_instruction = 0;   // per instruction beyond (loops kept rolled)
  double cache_load_ms = 0;
  double queue_depth = 0;
  // Composite operations
  double batched_gemm_launches = 0;  // 1: a batched GEMM is one launch; 0: one launch per problem

  // Derived quantities, in SI units.
  double hbm_bytes() const { return hbm_gib * 1024.0 * 1024.0 * 1024.0; }
  double dma_bytes_per_second() const { return dma_engines * dma_engine_gbps * 1e9; }  // all of a core's engines
  // Submitting one launch with `tensors` tensor arguments.
  double dispatch_seconds(double tensors) const { return (dispatch_ms + tensors * dispatch_tensor_ms) * 1e-3; }
  // Tensor Engine peak in flops of the product computed: one multiply-add per PE per cycle in bf16,
  // fp32_cost_factor times slower in fp32, three bf16 passes per product in bf16x3.
  double peak_flops(linalg::MatmulMode mode) const {
    const double passes = mode == linalg::MatmulMode::fp32 ? fp32_cost_factor : mode == linalg::MatmulMode::bf16 ? 1 : 3;
    return 2.0 * pe_rows * pe_rows * pe_clock_ghz * 1e9 / passes;
  }
};

// The device names the data file describes ("trn1", "trn2").
std::vector<std::string> neuron_devices();
// Parameter names, in the order of NeuronParams (the same for every device).
std::vector<std::string> neuron_parameter_names();
// The parameters of `device` from the embedded data file, with options.overrides[device] applied. An unknown
// device is an UnsupportedError; an unknown parameter name, or a value that is not positive (queue_depth: not a
// whole number >= 1), is an InputError naming it (and listing the known names). The caller prefixes the input
// file and key.
NeuronParams load_neuron_params(const std::string& device, const DeviceOptions& options = {});
// The embedded data file, as text.
const char* neuron_devices_yaml();

}  // namespace dfmp2::devices::neuron
