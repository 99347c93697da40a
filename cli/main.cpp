// dtsim: thin main. Every user error becomes one line on stderr and exit code 2.
#include <exception>
#include <iostream>

#include "cli/cli.hpp"
#include "traces/error.hpp"

int main(int argc, char** argv) {
  try {
    return dtsim::cli::run(argc, argv, std::cout);
  } catch (const dtsim::Error& e) {
    std::cerr << "dtsim: error: " << e.what() << "\n";
    return 2;
  } catch (const dtsim::InternalError& e) {
    std::cerr << "dtsim: " << e.what() << "\n";
    return 3;
  } catch (const std::exception& e) {
    std::cerr << "dtsim: internal error: " << e.what() << "\n";
    return 3;
  }
}
