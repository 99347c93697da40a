// Units and time conversions, in one place. Simulation time is double seconds; trace time is int64 ns.
#pragma once
#include <cmath>
#include <cstdint>

namespace dtsim::units {
inline constexpr double kGB = 1e9;            ///< decimal gigabyte, bytes
inline constexpr double kGiB = 1073741824.0;  ///< binary gibibyte, bytes
inline constexpr double kMiB = 1048576.0;     ///< binary mebibyte, bytes
inline constexpr double kTera = 1e12;
inline constexpr double kGbit_Bps = 1e9 / 8.0;  ///< one Gb/s in bytes per second

/// Seconds (simulation) to integer nanoseconds (traces). Rounds to nearest; the same everywhere.
inline std::int64_t s_to_ns(double seconds) { return static_cast<std::int64_t>(std::llround(seconds * 1e9)); }
/// Integer nanoseconds to Chrome-trace microseconds (exact decimal: ns / 1000 with three decimals).
inline double ns_to_us(std::int64_t ns) { return static_cast<double>(ns) / 1000.0; }
}  // namespace dtsim::units
