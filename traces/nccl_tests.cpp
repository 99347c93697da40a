#include "traces/nccl_tests.hpp"

#include <fstream>
#include <sstream>

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
      for (const char* name : {"all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv"}) {
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
      if (line.find("Out of bounds") != std::string::npos || line.find("Avg bus bandwidth") != std::string::npos) continue;
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

NcclTestsRun load_nccl_tests(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError("cannot open '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_nccl_tests(ss.str(), "nccl-tests output '" + path + "'");
}

}  // namespace dtsim
