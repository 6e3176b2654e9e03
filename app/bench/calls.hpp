#pragma once
// One benchmarked kernel call: its operands (random, from Philox streams), a reset of the operands it overwrites
// (untimed), the call itself through linalg::Kernels (timed), and its flop count from the op descriptor's cost()
// (linalg/ops/), or for a composite from what its kernels logged.
#include <functional>
#include <string>
#include <vector>

#include "app/bench/bench.hpp"
#include "linalg/kernels.hpp"

namespace dfmp2::app::bench {

// The step name every benchmarked call is logged under.
inline const std::string kBenchStep = "bench";

struct PreparedCall {
  std::function<void()> reset;                  // restores overwritten operands; not timed
  std::function<void(linalg::Kernels&)> run;    // the call
  double flops = 0;
  double samples = 0;  // random: numbers generated
  bool host_only = false;  // random: runs on the host, whatever the backend
};

// The backend ops a call needs (for the support check before anything runs).
std::vector<linalg::Op> ops_needed(const CallSpec& spec);
// Throws InputError (naming `where`) for a shape that cannot run: non-positive sizes, density outside (0, 1].
void check_call(const CallSpec& spec, const std::string& where);
// Operands in double (fp64) or float (fp32 and bf16).
PreparedCall prepare_call(const CallSpec& spec, bool fp64, std::uint64_t seed);

// Whether `backend` can run `spec` in `precision`; the reason when it cannot (empty when it can).
// The Tensor Engine operand format of a kernel precision: bf16 and bf16x3 name theirs, fp32 and fp64 run as fp32.
linalg::MatmulMode matmul_mode_of(const std::string& precision);
std::string unsupported_reason(linalg::Backend& backend, const CallSpec& spec, const std::string& precision);

// Runs `warmup` untimed calls and `repeat` timed calls of `call` on `kernels`, filling in the measured and modelled
// times. The first call made is the cold one.
Timing measure(linalg::Kernels& kernels, const PreparedCall& call, int warmup, int repeat);

double median(std::vector<double> v);

}  // namespace dfmp2::app::bench
