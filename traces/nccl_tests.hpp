// Reader of nccl-tests text output (NVIDIA/nccl-tests, e.g. all_reduce_perf -b 8 -e 1G -f 2): one row per size
// with out-of-place and in-place time (us), algbw and busbw (GB/s). The out-of-place columns are used.
#pragma once
#include <string>
#include <vector>

namespace dtsim {

struct NcclTestsRow {
  double bytes = 0;
  double time_us = 0;     ///< out-of-place
  double algbw_GBps = 0;  ///< out-of-place
  double busbw_GBps = 0;  ///< out-of-place
};

struct NcclTestsRun {
  std::string op;  ///< "all-reduce", "all-gather", "reduce-scatter", ... ("" if the log does not say)
  int ranks = 0;   ///< from the "#  Rank" lines (0 if absent)
  std::vector<NcclTestsRow> rows;
};

/// Parses the text; FormatError names the line that cannot be read. Rows with a time of 0 are rejected.
NcclTestsRun parse_nccl_tests(const std::string& text, const std::string& ctx);
/// Parses nccl-tests' JSON output (-J FILE, JSON_FILE_VERSION 2 in src/util.cu): "args" (the program name gives
/// the collective), "config"."devices" (the ranks), "results"[] with "size" and "out_of_place" {"time" or
/// "cpu_time", "alg_bw", "bus_bw"} (in_place when out_of_place is null).
NcclTestsRun parse_nccl_tests_json(const std::string& text, const std::string& ctx);
/// Text or JSON, by the first character of the file.
NcclTestsRun load_nccl_tests(const std::string& path);

}  // namespace dtsim
