// Option parsing shared by every subcommand file (cli/options.hpp).
#include "cli/options.hpp"

#include <cmath>
#include <cstdlib>
#include <sstream>

#include "traces/error.hpp"
#include "traces/units.hpp"

namespace dtsim::cli {

/// The items of a comma-separated list (empty items kept, so callers can reject them).
std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

std::vector<int> parse_int_list(const std::string& s, const std::string& what) {
  std::vector<int> out;
  for (const std::string& item : split_list(s)) {
    char* end = nullptr;
    long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0')
      throw ConfigError(what + " '" + s + "' is not a comma-separated list of integers");
    out.push_back(static_cast<int>(v));
  }
  return out;
}

po::variables_map parse(const po::options_description& desc, int argc, char** argv) {
  po::variables_map vm;
  try {
    // argv[0] is the subcommand; every other word must belong to an option ("--sequence-parallel false"
    // would otherwise switch the flag on and drop "false" silently).
    auto parsed = po::command_line_parser(argc, argv).options(desc).allow_unregistered().run();
    for (const auto& o : parsed.options)
      if (o.unregistered || o.position_key >= 0) {
        const std::string word = o.original_tokens.empty() ? o.string_key : o.original_tokens.front();
        if (o.unregistered) throw ConfigError(std::string(argv[0]) + ": unrecognised option '" + word + "'");
        throw ConfigError(std::string(argv[0]) + ": unexpected argument '" + word + "'");
      }
    po::store(parsed, vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw ConfigError(std::string(argv[0]) + ": " + e.what());
  }
  return vm;
}

double parse_max_memory(const po::variables_map& vm, const std::string& command) {
  if (!vm.count("max-memory")) return 0;
  const std::string mm = vm["max-memory"].as<std::string>();
  return mm == "none" ? -1 : parse_bytes(mm, command + ": --max-memory");
}

double parse_bytes(const std::string& s, const std::string& what) {
  std::size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(s, &pos);
  } catch (const std::exception&) {
    throw ConfigError(what + " '" + s + "' is not a size such as 1048576, 64KiB, 1MiB or 1GiB");
  }
  const std::string unit = s.substr(pos);
  if (unit == "KiB") v *= 1024.0;
  else if (unit == "MiB") v *= units::kMiB;
  else if (unit == "GiB") v *= units::kGiB;
  else if (unit == "KB") v *= 1e3;
  else if (unit == "MB") v *= 1e6;
  else if (unit == "GB") v *= 1e9;
  else if (!unit.empty() && unit != "B") throw ConfigError(what + " '" + s + "' has an unknown unit '" + unit + "'");
  if (!(v > 0) || !std::isfinite(v)) throw ConfigError(what + " '" + s + "' must be positive");
  return v;
}

std::string value_or(const po::variables_map& vm, const std::string& key, const std::string& fallback) {
  return vm.count(key) ? vm[key].as<std::string>() : fallback;
}

po::variables_map parse_positional(const po::options_description& desc, const char* positional, int argc, char** argv) {
  po::positional_options_description pos;
  pos.add(positional, 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(desc).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw ConfigError(std::string(argv[0]) + ": " + e.what());
  }
  return vm;
}

}  // namespace dtsim::cli
