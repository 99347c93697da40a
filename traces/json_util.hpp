// Strict JSON field access: every failure names the file/context, the field and what was expected.
#pragma once
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "traces/error.hpp"

namespace dtsim::json_util {
using nlohmann::json;

/// Parses a JSON document from a file; errors name the file.
json read_file(const std::string& path);

/// Required field of type T; throws ConfigError "<ctx>: missing field 'name'" or a type error.
template <typename T>
T get(const json& j, const std::string& ctx, const std::string& name) {
  if (!j.is_object()) throw ConfigError(ctx + ": expected a JSON object");
  auto it = j.find(name);
  if (it == j.end()) throw ConfigError(ctx + ": missing field '" + name + "'");
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
