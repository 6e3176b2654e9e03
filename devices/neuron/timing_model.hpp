#pragma once
// The timing model of a NeuronCore: pure functions of the shapes and the parameters, separate from the
// arithmetic (neuron_backend.cpp). One backend call makes one or more device kernel launches, each costing
//   dispatch   per-launch host overhead plus a cost per tensor argument;
//   transfer   the launch's inputs copied host -> HBM and outputs HBM -> host over the host link;
//   device     HBM <-> SBUF DMA of the tiles overlapped with the engines (Tensor Engine matmuls, Scalar/Vector
//              PSUM evacuation and alpha/beta scaling), plus the pipeline fill of the first tile;
//   compile    on the first sight of a shape signature: a compile, or a load from the persistent cache;
// and host work around the launches (diagonal-block solves, the SYRK mirror, the SpMM densify). CallTimeline
// replays them with an asynchronous launch queue to give the caller's wait.
#include <string>
#include <vector>

#include "devices/neuron/neuron_params.hpp"
#include "linalg/backend.hpp"

namespace dfmp2::devices::neuron {

using linalg::Index;

// One device kernel launch. GEMM: `count` problems (gemm_batched is one launch looping on the device) of
// C (m x n) = op(A) (m x k) op(B) (k x n), tiled as NKI does: stationary K<=128 x M<=128, moving K<=128 x N<=512,
// accumulation over K in one PSUM bank. SYRK: the lower triangle of C (n x n) = A A^T, A n x k, in 128 x 128
// output tiles (only tiles touching the triangle), A loaded once and transposed on chip.
struct Launch {
  enum class Kind { gemm, syrk };
  Kind kind = Kind::gemm;
  Index m = 0, n = 0, k = 0;
  Index count = 1;
  bool beta_nonzero = false;      // C is read (loaded from HBM, scaled on the Vector Engine)
  // Operand format on the Tensor Engine. Operands arrive in HBM as fp32 (the host holds fp32) and are DMA'd as
  // fp32; bf16 casts each loaded tile on chip (one Vector Engine copy), bf16x3 splits it into hi and lo parts (a
  // cast, then a two-input subtract with a bf16 result) and issues three bf16 matmuls per tile.
  linalg::MatmulMode mode = linalg::MatmulMode::fp32;
  int tensors = 0;                // tensor arguments of the framework call
  std::vector<double> copies_in;  // bytes copied host -> HBM, one entry per tensor
  std::vector<double> copies_out; // bytes copied HBM -> host
};

struct LaunchCost {
  double dispatch = 0;    // s, host
  double transfer = 0;    // s, host link (both directions)
  double dma = 0;         // s, HBM <-> SBUF tile traffic
  double compute = 0;     // s, engines' critical path (the busiest of PE, Scalar, Vector)
  double fill = 0;        // s, pipeline fill: first tile's DMA, matmul and evacuation
  double device = 0;      // s, fill + max(dma, compute)
  double flops = 0;       // Tensor Engine flops, padding to 128 in K and M included
  long instructions = 0;  // matmuls + DMAs + evacuations of the unrolled kernel (compile cost)
};

// Cost of one launch. Throws ResourceError when the working tiles do not fit SBUF or PSUM.
LaunchCost launch_cost(const NeuronParams& p, const Launch& launch);
// Which way a host <-> HBM copy goes.
enum class CopyDirection { to_device, to_host };
// Seconds to copy one pageable host tensor of `bytes` to HBM or back, as the framework copies it: a fixed cost, the
// first *_knee_mib at the small-copy rate and the rest at the large-copy rate (the measured rate falls from about
// 10 GB/s to 4.3 GB/s as copies outgrow the runtime's staging, to device; it rises to host).
double copy_seconds(const NeuronParams& p, CopyDirection direction, double bytes);
// Seconds to compile a kernel of that many instructions.
double compile_seconds(const NeuronParams& p, long instructions);

// How a launch found its kernel.
enum class CompileOutcome { resident, loaded, compiled };

// The host/device timeline of one backend call. Host steps run in order on the host; launches run in order on
// the device. A launch first waits until fewer than queue_depth launches are in flight, then costs its dispatch
// (and compile or cache load) on the host, then runs transfer + device on the device once the device is free.
// A host step may wait for a launch whose result it reads.
class CallTimeline {
 public:
  explicit CallTimeline(const NeuronParams& p) : depth_(static_cast<long>(p.queue_depth)) {}
  // Host work of `seconds`, starting after launch `wait_for` (index returned by launch(), -1: none) completes.
  void host(double seconds, long wait_for = -1);
  // Returns the launch's index.
  long launch(const LaunchCost& cost, CompileOutcome outcome, double compile_or_load_seconds);
  long launches() const { return static_cast<long>(done_.size()); }
  // The call's breakdown; total = the caller's wait (everything finished).
  linalg::ModelledTime finish() const;

 private:
  long depth_;
  double host_t_ = 0;
  double device_free_ = 0;
  std::vector<double> done_;
  linalg::ModelledTime sum_;
};

}  // namespace dfmp2::devices::neuron
