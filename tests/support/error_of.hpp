// Test helpers for user-error checks: the message of an expected exception, substring search.
#pragma once
#include <gtest/gtest.h>

#include <exception>
#include <string>

namespace dtsim::testing {

/// Runs `fn`, expects it to throw E (or a subclass) and returns the message; a wrong type or no throw is a failure.
template <typename E, typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw the wrong exception type: " << e.what();
    return {};
  }
  ADD_FAILURE() << "did not throw";
  return {};
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace dtsim::testing
