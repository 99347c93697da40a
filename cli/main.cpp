// dtsim: thin main. Every user error becomes one line on stderr and exit code 2.
#include <cstdlib>
#include <exception>
#include <iostream>
#include <new>

#include "cli/cli.hpp"
#include "traces/error.hpp"

namespace {
/// Exit code 3 without running the exit handlers: a simulation that broke an invariant may leave SimGrid's engine
/// mid-run, and its own exit handlers would then crash (SIGSEGV) after dtsim's message.
int internal_exit() {
  std::cout.flush();
  std::cerr.flush();
  std::_Exit(3);
}
}  // namespace

int main(int argc, char** argv) {
  try {
    return dtsim::cli::run(argc, argv, std::cout);
  } catch (const dtsim::Error& e) {
    std::cerr << "dtsim: error: " << e.what() << "\n";
    return 2;
  } catch (const std::bad_alloc&) {
    // The run outgrew this machine's memory although its estimate was under --max-memory (simulate checks it first).
    std::cerr
        << "dtsim: error: out of memory (std::bad_alloc): this run needs more memory than the machine could give; "
           "simulate fewer ranks or micro-batches, or set --max-memory below the free memory to refuse such "
           "runs before they start\n";
    return 2;
  } catch (const dtsim::InternalError& e) {
    std::cerr << "dtsim: " << e.what() << "\n";
    return internal_exit();
  } catch (const std::exception& e) {
    std::cerr << "dtsim: internal error: " << e.what() << "\n";
    return internal_exit();
  }
}
