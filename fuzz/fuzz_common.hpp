// Shared by the libFuzzer targets: a dtsim::Error is the expected outcome of bad input; anything else escaping
// the target (another exception, a crash, a sanitizer report, an InternalError from DTSIM_ASSERT) is a finding.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "traces/error.hpp"

namespace dtsim::fuzz {

inline std::string text_of(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

/// Runs `body`; swallows dtsim::Error (bad input reported properly) and lets everything else through, so that
/// libFuzzer sees an uncaught exception (std::terminate -> abort) as a crash.
template <typename F>
int only_errors(F&& body) {
  try {
    body();
  } catch (const dtsim::Error&) {}
  return 0;
}

}  // namespace dtsim::fuzz
