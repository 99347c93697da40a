// Public API, what every section shares (included by dtsim/dtsim.hpp and each section header): the output files of
// a call and how to write them.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace dtsim {

/// Output files of a call: (file name, content), written by write_files().
using Files = std::vector<std::pair<std::string, std::string>>;
/// Writes every file into `dir` (created if needed), all or nothing (traces/output.hpp).
void write_files(const std::string& dir, const Files& files);

}  // namespace dtsim
