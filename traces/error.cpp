#include "traces/error.hpp"

namespace dtsim::detail {
void assertion_failed(const char* expr, const char* file, int line, const std::string& message) {
  throw InternalError(std::string("internal error: ") + file + ":" + std::to_string(line) + ": assertion '" + expr +
                      "' failed: " + message);
}
}  // namespace dtsim::detail
