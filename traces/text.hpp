// Text helpers shared by the reports, fit summaries and importers: one number through a printf format; substring test.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace dtsim {

/// `v` formatted by the printf conversion `printf_format` (one double conversion, e.g. "%.2f"); at most 63 characters.
inline std::string format_number(const char* printf_format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, printf_format, v);
  return buf;
}

/// Whether `s` contains `part` (std::string_view::contains is C++23).
inline bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

}  // namespace dtsim
