// Writing outputs without leaving partial files: every file goes to a temporary name and is renamed.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace dtsim {

/// Writes all (relative name, content) pairs into `dir`, creating it if needed. Each file is written to
/// "<name>.tmp-<pid>" first; only when all are written are they renamed into place (previous files moved aside
/// and restored if any rename fails), so a failure leaves the
/// previous contents of `dir` untouched. Throws ConfigError if the directory cannot be used.
void write_outputs(const std::string& dir, const std::vector<std::pair<std::string, std::string>>& files);

}  // namespace dtsim
