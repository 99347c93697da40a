// Error policy: one root type for user errors (dtsim::Error), DTSIM_ASSERT for broken invariants.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace dtsim {

/// Root of every error caused by user input (bad file, inconsistent degrees, unknown preset...).
/// main() catches it, prints "dtsim: error: <what>" on one line and exits with code 2.
class Error : public std::runtime_error {
public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

/// A configuration (model, cluster, plan, calibration, command line) that cannot be used.
class ConfigError : public Error {
public:
  using Error::Error;
};

/// A file whose syntax or structure cannot be read (JSON syntax, wrong types).
class FormatError : public Error {
public:
  using Error::Error;
};

/// A broken internal invariant: a bug in dtsim, never reachable from user input.
class InternalError : public std::logic_error {
public:
  using std::logic_error::logic_error;
};

namespace detail {
[[noreturn]] void assertion_failed(const char* expr, const char* file, int line, const std::string& message);
}  // namespace detail

}  // namespace dtsim

/// Always-on invariant check; the message should give the context needed to debug the failure.
#define DTSIM_ASSERT(cond, msg)                                                                \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      std::ostringstream dtsim_assert_os_;                                                     \
      dtsim_assert_os_ << msg; /* NOLINT(bugprone-macro-parentheses): msg is a stream chain */ \
      ::dtsim::detail::assertion_failed(#cond, __FILE__, __LINE__, dtsim_assert_os_.str());    \
    }                                                                                          \
  } while (false)
