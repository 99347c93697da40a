// The documented finite range of every number a user can give (issue Guard): one table, checked where each value
// is read, listed by `dtsim presets --limits` and in docs/errors.md. A value outside its range is a ConfigError that
// names the field, the value and the range on one line.
//
// The ranges are wide on purpose: they exclude what cannot be physical (a 1e308 s kernel launch, a negative
// bandwidth) and what would overflow the arithmetic downstream (times past 1e9 s, byte counts past 2^63), never a
// value some real system has. Sources for the upper ends: NVIDIA GB300 (15 PFLOP/s dense FP4, 288 GB HBM3e,
// 8 TB/s) and NVLink 5 (1.8 TB/s per GPU) datasheets, with three orders of magnitude of headroom.
#pragma once
#include <initializer_list>
#include <string>
#include <vector>

namespace dtsim::limits {

/// GPUs in one cluster: far beyond any cluster, and keeps every GPU index an int.
inline constexpr long long kMaxGpus = 1LL << 20;

/// A closed interval [lo, hi] of finite values, with its unit and what it bounds.
struct Range {
  double lo = 0, hi = 0;
  const char* unit = "";  ///< "s", "B", "B/s", "FLOP/s", "" (dimensionless)
};

// Quantities of hardware.
inline constexpr Range kPeakFlops{1e9, 1e19, "FLOP/s"};  ///< a GPU's peak at one precision (0 allowed: none)
inline constexpr Range kBandwidth{1e6, 1e16, "B/s"};     ///< a link, NIC or memory bandwidth
inline constexpr Range kDeviceMemory{1e6, 1e15, "B"};    ///< a GPU's memory
inline constexpr Range kBoardPower{10, 1e5, "W"};        ///< a GPU's board power limit (0 allowed: not stated)
inline constexpr Range kSmCount{1, 4096, ""};            ///< a GPU's streaming multiprocessors (0 allowed: not stated)
inline constexpr Range kLatency{0, 1, "s"};              ///< one hop or one link
inline constexpr Range kOversubscription{1, 1024, ""};   ///< a fat-tree tier's down:up ratio
// Software overheads and calibration factors.
inline constexpr Range kOverhead{0, 1, "s"};              ///< per kernel, per collective step, per message
inline constexpr Range kIterationOverhead{0, 3600, "s"};  ///< once per iteration (optimizer step, logging)
inline constexpr Range kFlopScale{0, 1e18, "FLOP"};       ///< a GEMM size such as the half-efficiency point
inline constexpr Range kBytesPerParam{0, 1024, "B"};      ///< optimizer bytes per parameter
inline constexpr Range kReservedBytes{0, 1e15, "B"};      ///< memory set aside per GPU
inline constexpr Range kMessageBytes{1, 1e300, "B"};  ///< a message-size boundary (1e300: the catch-all last segment)
inline constexpr Range kFactor{0, 1e3, ""};           ///< a latency or bandwidth multiplier
inline constexpr Range kEfficiency{1e-6, 1, ""};      ///< a fraction of a peak (GEMM, memory, link efficiency)
// Plans and workloads.
inline constexpr Range kBucketBytes{1, 1e15, "B"};            ///< a DP gradient bucket
inline constexpr Range kBucketParams{0, 1e15, "parameters"};  ///< a stack's DP gradient bucket rule (0: none)
inline constexpr long long kMaxGlobalBatch = 1LL << 24;  ///< samples per iteration (16,777,216; 2026 runs use < 65,536)
inline constexpr Range kRoutingLoad{0, 1e12, ""};        ///< one expert's relative load (loads are normalised)
inline constexpr Range kRoutingSkew{0, 8, ""};           ///< Zipf exponent over the experts
inline constexpr Range kCapacityFactor{0.01, 1024, ""};  ///< Megatron-Core's moe_expert_capacity_factor
// Measured runs (published-data rows, calibration inputs).
inline constexpr Range kMeasuredTime{1e-6, 1e6, "s"};  ///< one measured iteration
inline constexpr Range kMeasuredMemory{0, 1e15, "B"};  ///< one measured peak
inline constexpr Range kMfu{0, 1, ""};                 ///< a measured or reported MFU (fraction)

/// Throws ConfigError "<ctx>: <field> = <value> is outside [lo, hi] <unit>" unless lo <= v <= hi (NaN and
/// infinities fail).
void check(double v, const Range& r, const std::string& ctx, const std::string& field);
/// check() that also accepts exactly 0 (an optional quantity: "none").
void check_or_zero(double v, const Range& r, const std::string& ctx, const std::string& field);
/// A number as the messages print it (printf "%.6g").
std::string number(double v);
/// "[lo, hi] unit" as the messages and the table print it.
std::string describe(const Range& r);

/// Integer products that cannot overflow: a*b (and a*b*c) of non-negative counts, or ConfigError naming `what`
/// when the product passes `max` (default 2^62).
long long checked_product(std::initializer_list<long long> factors, const std::string& ctx, const std::string& what,
                          long long max = 1LL << 62);

/// One row of the documented table: the input, where it is read, its range.
struct Entry {
  std::string input, fields;
  Range range;
};
/// Every range above with the inputs that use it (the `dtsim presets --limits` table; docs/errors.md includes it).
const std::vector<Entry>& table();

}  // namespace dtsim::limits
