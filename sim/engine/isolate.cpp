#include "sim/engine/isolate.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>

namespace dtsim::sim {

std::vector<double> run_isolated(const std::function<std::vector<double>()>& fn, std::size_t expected_values) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("run_isolated: pipe() failed");
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("run_isolated: fork() failed");
  if (pid == 0) {
    close(fds[0]);
    std::vector<double> v;
    try {
      v = fn();
    } catch (...) {
      v.clear();
    }
    const auto bytes = static_cast<ssize_t>(v.size() * sizeof(double));
    const bool ok = v.size() == expected_values && write(fds[1], v.data(), v.size() * sizeof(double)) == bytes;
    _exit(ok ? 0 : 1);
  }
  close(fds[1]);
  std::vector<double> v(expected_values);
  const auto want = static_cast<ssize_t>(expected_values * sizeof(double));
  ssize_t got = 0;
  while (got < want) {
    const ssize_t r = read(fds[0], reinterpret_cast<char*>(v.data()) + got, static_cast<std::size_t>(want - got));
    if (r <= 0) break;
    got += r;
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (got != want || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw std::runtime_error("run_isolated: the child simulation failed");
  return v;
}

}  // namespace dtsim::sim
