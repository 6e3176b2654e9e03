#pragma once
// Sizes in messages and reports: "512 B", "1.5 KiB", "3.21 GiB". One place, so that "memory: 1 KB is too small"
// never prints as "0.00 GiB".
#include <fmt/format.h>

#include <cmath>
#include <string>

namespace dfmp2::linalg {

inline std::string format_bytes(double bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (!std::isfinite(bytes)) return fmt::format("{} B", bytes);
  int unit = 0;
  double value = bytes;
  while (std::abs(value) >= 1024.0 && unit < 6) {
    value /= 1024.0;
    ++unit;
  }
  if (unit == 0) return fmt::format("{:.0f} B", value);
  // Three significant digits: 1.50 KiB, 15.0 MiB, 150 GiB.
  const int decimals = std::abs(value) < 10 ? 2 : std::abs(value) < 100 ? 1 : 0;
  return fmt::format("{:.{}f} {}", value, decimals, kUnits[unit]);
}

}  // namespace dfmp2::linalg
