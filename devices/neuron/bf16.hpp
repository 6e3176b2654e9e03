#pragma once
// bfloat16 as the Tensor Engine sees it: the top 16 bits of an fp32, rounded to nearest with ties to even.
#include <bit>
#include <cstdint>

namespace dfmp2::devices::neuron {

inline float round_to_bf16(float x) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  if ((u & 0x7f800000u) == 0x7f800000u) {               // inf or NaN: no rounding carry into the exponent
    if (u & 0x007fffffu) u |= 0x00400000u;              // NaN stays NaN (quiet) even if its payload is in the low bits
    return std::bit_cast<float>(u & 0xffff0000u);
  }
  u += 0x7fffu + ((u >> 16) & 1u);  // round half to even on the 16 dropped bits (may carry up to inf: correct)
  return std::bit_cast<float>(u & 0xffff0000u);
}

}  // namespace dfmp2::devices::neuron
