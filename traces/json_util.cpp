#include "traces/json_util.hpp"

#include <fstream>
#include <sstream>

namespace dtsim::json_util {

json read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError("cannot open '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_text(ss.str(), path);
}

json parse_text(const std::string& text, const std::string& name) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    // nlohmann's message is "[json.exception.parse_error.101] parse error at line 3, column 5: ..."
    auto pos = what.find("parse error");
    throw FormatError("'" + name + "' is not valid JSON: " + (pos == std::string::npos ? what : what.substr(pos)));
  } catch (const json::exception& e) {  // out_of_range.406: a number beyond double ("1e400")
    std::string what = e.what();
    auto pos = what.find("] ");
    throw FormatError("'" + name + "' is not valid JSON: " + (pos == std::string::npos ? what : what.substr(pos + 2)));
  }
}

void reject_unknown(const json& j, const std::string& ctx, const std::set<std::string>& allowed) {
  if (!j.is_object()) throw ConfigError(ctx + ": expected a JSON object");
  for (const auto& [key, value] : j.items()) {
    (void)value;
    if (allowed.count(key)) continue;
    std::string known;
    for (const auto& k : allowed) known += (known.empty() ? "" : ", ") + k;
    throw ConfigError(ctx + ": unknown field '" + key + "' (known: " + known + ")");
  }
}

void check_schema_version(const json& j, const std::string& ctx, int supported) {
  int v = get_or<int>(j, ctx, "schema_version", supported);
  if (v != supported)
    throw ConfigError(ctx + ": schema_version " + std::to_string(v) + " is not supported (this dtsim reads " +
                      std::to_string(supported) + ")");
}
}  // namespace dtsim::json_util
