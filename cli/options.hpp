// Option parsing shared by every subcommand file: boost::program_options with one error line per mistake
// (ConfigError naming the subcommand), and the small value parsers of lists and sizes.
#pragma once
#include <boost/program_options.hpp>
#include <string>
#include <vector>

namespace dtsim::cli {
namespace po = boost::program_options;

/// The items of a comma-separated list (empty items kept, so callers can reject them).
std::vector<std::string> split_list(const std::string& s);
/// A comma-separated list of integers; ConfigError naming `what` otherwise.
std::vector<int> parse_int_list(const std::string& s, const std::string& what);
/// Parses argv (argv[0] is the subcommand); every word must belong to an option.
po::variables_map parse(const po::options_description& desc, int argc, char** argv);
/// A size such as 1048576, 64KiB, 1MiB, 1GiB, 1GB (positive).
double parse_bytes(const std::string& s, const std::string& what);
/// --max-memory SIZE | none into SimulateOptions::max_memory_bytes (none: -1, no limit; absent: 0, the default).
double parse_max_memory(const po::variables_map& vm, const std::string& command);
/// The string value of option `key`, or `fallback` when it was not given.
std::string value_or(const po::variables_map& vm, const std::string& key, const std::string& fallback = "");
/// Parses argv (argv[0] is the subcommand) with boost's own checks and messages, the first word that is not an
/// option being the value of option `positional` (sweep's SPEC, pareto's and report's RESULTS).
po::variables_map parse_positional(const po::options_description& desc, const char* positional, int argc, char** argv);
}  // namespace dtsim::cli
