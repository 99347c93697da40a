// Small JSON text builders for the profile writer: exact integer-nanosecond to microsecond formatting, UTF-8-safe
// string escaping and an "args" object builder. Everything appends to a std::string; nothing allocates per call
// beyond the output itself.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace dtsim::profiler::json {

/// Appends `s` as a JSON string literal. Control characters are \u-escaped; bytes that are not valid UTF-8 are
/// replaced by U+FFFD, so the output always parses (NVTX names are arbitrary bytes).
void append_string(std::string& out, std::string_view s);
/// Appends a signed integer.
void append_int(std::string& out, std::int64_t v);
/// Appends an unsigned integer.
void append_uint(std::string& out, std::uint64_t v);
/// Appends the shortest round-trip decimal form of `v` ("null" if not finite).
void append_double(std::string& out, double v);
/// Appends nanoseconds as microseconds with exactly three decimals ("1234.567", "-0.005"): no rounding at all.
void append_us(std::string& out, std::int64_t ns);

/// Builds the members of one JSON object ("key":value,...), without the braces.
class Members {
public:
  Members& integer(std::string_view key, std::int64_t v);
  Members& uinteger(std::string_view key, std::uint64_t v);
  Members& real(std::string_view key, double v);
  Members& text(std::string_view key, std::string_view v);
  /// A value that is already JSON text (an array, an object).
  Members& raw(std::string_view key, std::string_view json_value);
  bool empty() const { return out_.empty(); }
  const std::string& str() const { return out_; }

private:
  void key(std::string_view k);
  std::string out_;
};

}  // namespace dtsim::profiler::json
