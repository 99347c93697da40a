// Text formatting shared by the reports and fit summaries: one number through a printf format.
#pragma once

#include <cstdio>
#include <string>

namespace dtsim {

/// `v` formatted by the printf conversion `printf_format` (one double conversion, e.g. "%.2f"); at most 63 characters.
inline std::string format_number(const char* printf_format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, printf_format, v);
  return buf;
}

}  // namespace dtsim
