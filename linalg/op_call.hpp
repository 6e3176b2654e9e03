#pragma once
// The list of ops: every descriptor of linalg/ops/ and OpCall, the one value a backend receives. An op is one
// descriptor file (its argument struct, shape check, cost and kernel name) plus its name in OpList below and its
// Op enumerator (linalg/ops.hpp). README "Layout" says what else a new op touches.
#include <cstddef>
#include <utility>
#include <variant>

#include "linalg/ops/check.hpp"
#include "linalg/ops/cholesky.hpp"
#include "linalg/ops/eigh.hpp"
#include "linalg/ops/gemm.hpp"
#include "linalg/ops/gemm_batched.hpp"
#include "linalg/ops/spmm.hpp"
#include "linalg/ops/syrk.hpp"
#include "linalg/ops/trsm.hpp"

namespace dfmp2::linalg {

template <template <class> class... Ops>
struct OpList {
  // One alternative per op and element type.
  using Call = std::variant<Ops<double>..., Ops<float>...>;
};
using AllOps = OpList<Gemm, GemmBatched, Syrk, Trsm, Cholesky, Eigh, SpmmCsr, SpmmBsr>;
using OpCall = AllOps::Call;

// Calls f(std::type_identity<Args>{}) for every alternative of OpCall (compile-time iteration for capability
// tables).
template <class F>
constexpr void for_each_op_type(F&& f) {
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (f(std::type_identity<std::variant_alternative_t<I, OpCall>>{}), ...);
  }(std::make_index_sequence<std::variant_size_v<OpCall>>{});
}

// The op and element type of a call.
inline Op op_of(const OpCall& call) {
  return std::visit([](const auto& args) { return std::decay_t<decltype(args)>::op; }, call);
}
inline DType dtype_of(const OpCall& call) {
  return std::visit([](const auto& args) { return dtype_of<typename std::decay_t<decltype(args)>::value_type>(); },
                    call);
}

}  // namespace dfmp2::linalg
