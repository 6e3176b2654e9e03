#pragma once
// The linear-algebra backend interface. Every backend (devices/<name>/) implements it; chemistry code never
// sees a backend's own headers, only this interface through linalg::Kernels, which refuses unsupported ops,
// counts flops and times each call. What each op computes, its shape check and its cost are in its descriptor
// (linalg/ops/<op>.hpp); OpCall (linalg/op_call.hpp) is the one value a backend receives.
//
// A backend derives from BackendOf<Impl> and writes, for each op it has, one template
//     template <class T> void exec(const Gemm<T>& call, MatmulMode mode);     // (or returning ModelledTime)
// (or only the element type it has). BackendOf routes each OpCall to it, and derives supports() from which
// exec overloads exist, so an op a backend lacks needs no code in it and no code in the test fakes.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <optional>
#include <type_traits>
#include <variant>

#include <fmt/format.h>

#include "linalg/errors.hpp"
#include "linalg/name_table.hpp"
#include "linalg/matrix_view.hpp"
#include "linalg/op_call.hpp"

namespace dfmp2::linalg {

// How a device multiplies fp32 matrices on its Tensor Engine (linalg::Kernels chooses it per step):
//   fp32    fp32 operands, at the engine's fp32 rate;
//   bf16    operands rounded to bfloat16 (nearest even), products accumulated in fp32;
//   bf16x3  each operand split into a bf16 high part and a bf16 low part (x = hi + lo + O(2^-17 |x|)), three bf16
//           products hi*hi + hi*lo + lo*hi accumulated in fp32 (lo*lo, below fp32's rounding, is left out).
// CPU backends have fp32 only.
enum class MatmulMode { fp32, bf16, bf16x3 };
constexpr const char* matmul_mode_name(MatmulMode mode) {
  return mode == MatmulMode::fp32 ? "fp32" : mode == MatmulMode::bf16 ? "bf16" : "bf16x3";
}
// The name table (for parsers): every mode with its name.
inline const NameTable<MatmulMode>& matmul_mode_names() {
  static const NameTable<MatmulMode> t = {
      {MatmulMode::fp32, "fp32"}, {MatmulMode::bf16, "bf16"}, {MatmulMode::bf16x3, "bf16x3"}};
  return t;
}

// What one call would have cost on a modelled device, in seconds, by component. Device models (devices/neuron/)
// fill it in for every call; CPU backends have none. `total` is what the caller waits after the overlaps the
// model allows (DMA behind compute, host work behind queued device work), so it is not the sum of the parts.
struct ModelledTime {
  double dispatch = 0;  // host-side launch: framework dispatch and per-tensor argument handling
  double transfer = 0;  // host <-> device copies of the call's inputs and outputs
  double dma = 0;       // HBM <-> SBUF traffic not hidden behind compute
  double compute = 0;   // Tensor, Vector, Scalar and GpSimd engine time on the critical path
  double host = 0;      // host-side parts: diagonal blocks of TRSM and Cholesky, SYRK mirror, SpMM densify
  double compile = 0;   // first sight of a shape signature: compile, or load from the persistent cache
  double total = 0;     // the caller's wait, after overlaps
  double device_flops = 0;  // flops the Tensor Engine executed (its padding to tiles included)
  long launches = 0;        // device kernel launches the call made
  long compiles = 0;        // of which compiled (cold, not in the cache)
  long cache_loads = 0;     // of which loaded from the persistent compile cache

  ModelledTime& operator+=(const ModelledTime& o) {
    dispatch += o.dispatch;
    transfer += o.transfer;
    dma += o.dma;
    compute += o.compute;
    host += o.host;
    compile += o.compile;
    total += o.total;
    device_flops += o.device_flops;
    launches += o.launches;
    compiles += o.compiles;
    cache_loads += o.cache_loads;
    return *this;
  }
};

// What a call reports beyond its result: the device-only facet. Device models fill in the modelled cost of the
// call; CPU backends leave it empty.
struct CallFacet {
  std::optional<ModelledTime> modelled;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;
  // (optional) What the backend runs on, for the report: library version, kernel set, threads.
  virtual std::string details() const { return {}; }
  // What the backend can do, asked before a call rather than discovered by a failure deep inside it.
  virtual bool supports(Op op, DType dtype) const = 0;
  // (optional) Why an op is not supported, for the error message ("" when there is nothing to add).
  virtual std::string unsupported_reason(Op op, DType dtype) const {
    (void)op, (void)dtype;
    return {};
  }
  // Threads the backend may use for one call; 0 leaves the library's own default.
  virtual void set_threads(int threads) = 0;
  // (optional) Whether the backend's calls run on OpenMP's threads, so that the caller's own parallel regions between
  // them reuse those threads instead of competing with the backend's (OpenBLAS's pthreads spin for a while after each
  // call). false: the caller keeps its work between calls on its own thread.
  virtual bool openmp_threads() const { return false; }
  // (optional) Lets go of idle resources such as spinning worker threads, so that whatever runs next (another
  // backend) has the cores to itself. The backend takes them up again on its next call.
  virtual void release() {}
  // (optional) Peak Tensor Engine rate in flop/s for an operand format, for "achieved vs peak"; 0 for a CPU.
  virtual double peak_flops(MatmulMode mode) const {
    (void)mode;
    return 0;
  }
  // (optional) Host memory a call allocates beyond its operands and result, in copies of the arrays it touches: the
  // device models emulate the device on the host with a copy of each operand part (bf16: one, bf16x3: two) and an
  // fp32 accumulator or working copy (TRSM and Cholesky copy their matrices). The DF-MP2 memory plan counts it.
  // 0: the backend works in place (BLAS).
  virtual double working_copies(MatmulMode mode) const {
    (void)mode;
    return 0;
  }
  // (optional) The operand formats the backend has for fp32 ops (MatmulMode). CPU backends: fp32 only.
  virtual bool supports_matmul_mode(MatmulMode mode) const { return mode == MatmulMode::fp32; }

  // Runs one op: checks its shapes (the descriptor's check(): std::logic_error on a mismatch) and the operand
  // format (`mode` applies to fp32 calls; UnsupportedError when the backend lacks it), then hands it to the
  // backend. UnsupportedError for an op the backend does not support.
  CallFacet run(const OpCall& call, MatmulMode mode = MatmulMode::fp32) {
    std::visit([](const auto& args) { args.check(); }, call);
    if (mode != MatmulMode::fp32 && (dtype_of(call) != DType::fp32 || !supports_matmul_mode(mode))) {
      throw UnsupportedError(fmt::format("backend '{}' has no {} arithmetic for {} {} (bf16 and bf16x3 are fp32 "
                                         "operand formats of the device models trn1 and trn2)",
                                         name(), matmul_mode_name(mode), dtype_name(dtype_of(call)),
                                         op_name(op_of(call))));
    }
    return execute(call, mode);
  }

 protected:
  // The call, already checked.
  virtual CallFacet execute(const OpCall& call, MatmulMode mode) = 0;
};

// The message of an op a backend does not support (one wording for Kernels and BackendOf).
inline std::string unsupported_message(const Backend& backend, Op op, DType dtype, const std::string& precision) {
  const std::string reason = backend.unsupported_reason(op, dtype);
  return fmt::format("backend '{}' does not support {} in {}{}", backend.name(), op_name(op), precision,
                     reason.empty() ? "" : " (" + reason + ")");
}

// Whether Impl has an exec overload for the argument type Args.
template <class Impl, class Args>
concept Executes = requires(Impl& impl, const Args& args, MatmulMode mode) { impl.exec(args, mode); };

// The base of every real backend: routes each OpCall to Impl's exec overloads and derives supports() from them.
template <class Impl>
class BackendOf : public Backend {
 public:
  bool supports(Op op, DType dtype) const override {
    bool found = false;
    for_each_op_type([&](auto type) {
      using Args = typename decltype(type)::type;
      if (Args::op == op && dtype_of<typename Args::value_type>() == dtype && Executes<Impl, Args>) found = true;
    });
    return found;
  }

 protected:
  CallFacet execute(const OpCall& call, MatmulMode mode) override {
    return std::visit(
        [&](const auto& args) -> CallFacet {
          using Args = std::decay_t<decltype(args)>;
          if constexpr (!Executes<Impl, Args>) {
            throw UnsupportedError(unsupported_message(*this, Args::op, dtype_of<typename Args::value_type>(),
                                                       std::string(dtype_name(dtype_of<typename Args::value_type>()))));
          } else if constexpr (std::is_void_v<decltype(impl().exec(args, mode))>) {
            impl().exec(args, mode);
            return {};
          } else {
            return CallFacet{impl().exec(args, mode)};
          }
        },
        call);
  }

 private:
  Impl& impl() { return static_cast<Impl&>(*this); }
};

}  // namespace dfmp2::linalg
