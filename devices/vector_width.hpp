#pragma once
// What a CPU backend's double-precision GEMM kernel can do per cycle and vector unit: its vector width in doubles
// and whether it fuses multiply and add. The default backend is chosen from these at run time
// (devices::default_backend_choice).
#include <string>

namespace dfmp2::devices {

struct VectorWidth {
  int doubles = 2;   // 2: SSE2, 4: AVX/AVX2, 8: AVX-512
  bool fma = false;  // fused multiply-add (FMA3)
  std::string name;  // "AVX-512 + FMA", "AVX2 + FMA", "AVX", "SSE2"
  // Double-precision flops per cycle per vector unit.
  int flops_per_cycle() const { return doubles * (fma ? 2 : 1); }
};

}  // namespace dfmp2::devices
