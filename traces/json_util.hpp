// Strict JSON field access: every failure names the file/context, the field and what was expected.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <type_traits>
#include <utility>

#include "traces/error.hpp"

namespace dtsim::json_util {
using nlohmann::json;

namespace detail {
/// Throws ConfigError when `v` is a number that an integral T cannot hold exactly (nlohmann would wrap it, or
/// convert a double out of range, which is undefined behaviour): 4294967297 for an int, 1e10, 2.5.
template <typename T>
void check_integral(const json& v, const std::string& ctx, const std::string& name) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (!v.is_number()) return;  // the type error comes from get<T>()
    constexpr auto lo = std::numeric_limits<T>::min();
    constexpr auto hi = std::numeric_limits<T>::max();
    bool ok = false;
    if (v.is_number_unsigned()) ok = v.get<std::uint64_t>() <= static_cast<std::uint64_t>(hi);
    else if (v.is_number_integer()) ok = std::in_range<T>(v.get<std::int64_t>());
    else {
      const double d = v.get<double>();
      ok = d == std::trunc(d) && d >= static_cast<double>(lo) && d < static_cast<double>(hi) + 1.0;
    }
    if (!ok)
      throw ConfigError(ctx + ": field '" + name + "' = " + v.dump() + " is not an integer from " + std::to_string(lo) +
                        " to " + std::to_string(hi));
  } else if constexpr (requires { typename T::value_type; } && !std::is_same_v<T, std::string> &&
                       !std::is_same_v<T, json>) {
    if (v.is_array())
      for (const auto& e : v) check_integral<typename T::value_type>(e, ctx, name);
  }
}
}  // namespace detail

/// Parses a JSON document from a file; errors name the file.
json read_file(const std::string& path);
/// Parses JSON text (what read_file does after reading); FormatError "'<name>' is not valid JSON: ...".
json parse_text(const std::string& text, const std::string& name);

/// Required field of type T; throws ConfigError "<ctx>: missing field 'name'" or a type error.
template <typename T>
T get(const json& j, const std::string& ctx, const std::string& name) {
  if (!j.is_object()) throw ConfigError(ctx + ": expected a JSON object");
  auto it = j.find(name);
  if (it == j.end()) throw ConfigError(ctx + ": missing field '" + name + "'");
  detail::check_integral<T>(*it, ctx, name);
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    throw ConfigError(ctx + ": field '" + name + "' has the wrong type (" + it->type_name() + ")");
  }
}

/// Optional field with a default.
template <typename T>
T get_or(const json& j, const std::string& ctx, const std::string& name, T fallback) {
  if (!j.is_object()) throw ConfigError(ctx + ": expected a JSON object");
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) return fallback;
  detail::check_integral<T>(*it, ctx, name);
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    throw ConfigError(ctx + ": field '" + name + "' has the wrong type (" + it->type_name() + ")");
  }
}

/// Rejects fields that are not in `allowed` (catches typos such as "hiden").
void reject_unknown(const json& j, const std::string& ctx, const std::set<std::string>& allowed);

/// Checks the schema_version field if present (absent means the current version).
void check_schema_version(const json& j, const std::string& ctx, int supported);
}  // namespace dtsim::json_util
