#include "traces/nccl_tests.hpp"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "traces/error.hpp"

namespace dtsim {

NcclTestsRun parse_nccl_tests(const std::string& text, const std::string& ctx) {
  NcclTestsRun run;
  std::istringstream in(text);
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos) continue;
    if (line[first] == '#') {
      // "# Collective test starting: all_reduce_perf", "#  Rank  0 Group  0 Pid ... device  0 [...]"
      for (const char* name :
           {"all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv"}) {
        if (run.op.empty() && line.find(std::string(name) + "_perf") != std::string::npos) {
          run.op = name;
          for (auto& c : run.op)
            if (c == '_') c = '-';
          if (run.op == "alltoall") run.op = "all-to-all";
        }
      }
      std::istringstream ls(line.substr(first + 1));
      std::string word;
      if (ls >> word && word == "Rank") ++run.ranks;
      continue;
    }
    // size count type redop root time algbw busbw #wrong time algbw busbw #wrong
    std::istringstream ls(line);
    std::vector<std::string> f;
    std::string w;
    while (ls >> w) f.push_back(w);
    const std::string where = ctx + ": line " + std::to_string(lineno);
    if (f.size() == 1 && f[0].rfind("Avg", 0) == 0) continue;
    if (f.size() < 8) {
      if (line.find("Out of bounds") != std::string::npos || line.find("Avg bus bandwidth") != std::string::npos)
        continue;
      throw FormatError(where + ": expected 'size count type redop root time algbw busbw ...', got '" + line + "'");
    }
    auto num = [&](const std::string& s, const char* what) {
      char* end = nullptr;
      double v = std::strtod(s.c_str(), &end);
      if (s.empty() || *end != '\0') throw FormatError(where + ": " + what + " '" + s + "' is not a number");
      return v;
    };
    NcclTestsRow r;
    r.bytes = num(f[0], "size");
    r.time_us = num(f[5], "time");
    r.algbw_GBps = num(f[6], "algbw");
    r.busbw_GBps = num(f[7], "busbw");
    if (!(r.bytes > 0) || !(r.time_us > 0)) throw FormatError(where + ": size and time must be positive");
    run.rows.push_back(r);
  }
  if (run.rows.empty()) throw FormatError(ctx + ": no result rows (is this nccl-tests output?)");
  return run;
}

namespace {
std::string op_from_program(const std::string& program) {
  for (const char* name : {"all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv"})
    if (program.find(std::string(name) + "_perf") != std::string::npos) {
      std::string op = name;
      for (auto& c : op)
        if (c == '_') c = '-';
      return op == "alltoall" ? "all-to-all" : op;
    }
  return "";
}
}  // namespace

NcclTestsRun parse_nccl_tests_json(const std::string& text, const std::string& ctx) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range.406 for a number like 1e400
    throw FormatError(ctx + ": not valid JSON: " + std::string(e.what()).substr(std::string(e.what()).find(' ') + 1));
  }
  NcclTestsRun run;
  auto number = [&](const nlohmann::json& v, const std::string& what) {
    if (!v.is_number()) throw FormatError(ctx + ": " + what + " is not a number");
    return v.get<double>();
  };
  if (!j.is_object() || !j.contains("results") || !j["results"].is_array())
    throw FormatError(ctx + ": no 'results' list (is this nccl-tests -J output?)");
  if (j.contains("args") && j["args"].is_array() && !j["args"].empty() && j["args"][0].is_string())
    run.op = op_from_program(j["args"][0].get<std::string>());
  if (j.contains("config") && j["config"].is_object() && j["config"].contains("devices") &&
      j["config"]["devices"].is_array())
    run.ranks = static_cast<int>(j["config"]["devices"].size());
  for (std::size_t i = 0; i < j["results"].size(); ++i) {
    const auto& r = j["results"][i];
    const std::string where = "results[" + std::to_string(i) + "]";
    if (!r.is_object() || !r.contains("size")) throw FormatError(ctx + ": " + where + " has no 'size'");
    const nlohmann::json* body = nullptr;
    for (const char* key : {"out_of_place", "in_place"})
      if (!body && r.contains(key) && r[key].is_object()) body = &r[key];
    if (!body) throw FormatError(ctx + ": " + where + " has neither out_of_place nor in_place results");
    const char* tkey = body->contains("time") ? "time" : "cpu_time";
    if (!body->contains(tkey)) throw FormatError(ctx + ": " + where + " has no time");
    NcclTestsRow row;
    row.bytes = number(r["size"], where + ".size");
    row.time_us = number((*body)[tkey], where + ".time");
    row.algbw_GBps = body->contains("alg_bw") ? number((*body)["alg_bw"], where + ".alg_bw") : 0;
    row.busbw_GBps = body->contains("bus_bw") ? number((*body)["bus_bw"], where + ".bus_bw") : 0;
    if (!(row.bytes > 0) || !(row.time_us > 0))
      throw FormatError(ctx + ": " + where + ": size and time must be positive");
    run.rows.push_back(row);
  }
  if (run.rows.empty()) throw FormatError(ctx + ": no result rows");
  return run;
}

NcclTestsRun load_nccl_tests(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError("cannot open '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const auto first = text.find_first_not_of(" \t\r\n");
  const std::string ctx = "nccl-tests output '" + path + "'";
  return first != std::string::npos && text[first] == '{' ? parse_nccl_tests_json(text, ctx)
                                                          : parse_nccl_tests(text, ctx);
}

}  // namespace dtsim
