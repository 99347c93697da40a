#include "traces/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "traces/error.hpp"

namespace dtsim {

namespace {
/// Whether this thread runs inside a parallel_for: a nested one (a simulation's link sweep inside the harness's rows)
/// then runs in order on it, instead of multiplying the threads.
thread_local bool in_parallel_for = false;
}  // namespace

int worker_threads() {
  if (const char* v = std::getenv("DTSIM_THREADS"); v != nullptr && *v != '\0') {
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (end == v || *end != '\0' || n < 1 || n > 1024)
      throw ConfigError(std::string("DTSIM_THREADS='") + v + "' is not a whole number of threads in [1, 1024]");
    return static_cast<int>(n);
  }
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1U, 8U));
}

void parallel_for(std::size_t n, int threads, const std::function<void(std::size_t)>& fn) {
  const std::size_t workers = in_parallel_for ? 1 : std::min(n, static_cast<std::size_t>(std::max(threads, 1)));
  if (workers <= 1) {
    for (std::size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<std::size_t> next{0};
  std::exception_ptr first_error;
  std::mutex error_mu;
  auto work = [&] {
    in_parallel_for = true;
    for (std::size_t i = next++; i < n; i = next++) {
      try {
        fn(i);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(error_mu);
        if (!first_error) first_error = std::current_exception();
        next = n;
      }
    }
    in_parallel_for = false;
  };
  std::vector<std::thread> pool;
  pool.reserve(workers - 1);
  for (std::size_t w = 1; w < workers; ++w) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace dtsim
