#include "studies/sweep/sweep_mpi.hpp"

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "traces/error.hpp"

#ifdef DTSIM_HAVE_MPI
#include <dlfcn.h>
#include <mpi.h>
#endif

namespace dtsim::sim::sweep::mpi {

int launched_size() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* v = std::getenv(var)) return std::atoi(v);
  return 0;
}

int launched_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMI_RANK"})
    if (const char* v = std::getenv(var)) return std::atoi(v);
  return 0;
}

#ifdef DTSIM_HAVE_MPI
bool available() { return true; }

Session::Session() {
  // libsimgrid exports MPI_* too (SMPI); if the link order let it win, MPI_Init would start SMPI and abort.
  Dl_info info{};
  const void* init = ::dlsym(RTLD_DEFAULT, "MPI_Init_thread");
  if (init && ::dladdr(init, &info) && info.dli_fname &&
      std::string(info.dli_fname).find("simgrid") != std::string::npos)
    throw ConfigError(std::string("sweep: MPI_Init_thread resolves to ") + info.dli_fname +
                      " (SimGrid's SMPI), not to the MPI library: link MPI before SimGrid (sim/CMakeLists.txt)");
  // Workers are forked after MPI_Init; they never call MPI, so Open MPI's fork warning is noise.
  ::setenv("OMPI_MCA_mpi_warn_on_fork", "0", 0);
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS)
    throw ConfigError("sweep: MPI_Init failed");
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

Session::~Session() { MPI_Finalize(); }

std::vector<std::string> Session::gather(const std::string& mine) const {
  if (mine.size() > static_cast<std::size_t>(INT32_MAX)) throw ConfigError("sweep: a rank's rows exceed 2 GiB");
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<std::size_t>(size_)), offsets(static_cast<std::size_t>(size_));
  MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  long total = 0;
  for (int r = 0; r < size_ && rank_ == 0; ++r) {
    offsets[static_cast<std::size_t>(r)] = static_cast<int>(total);
    total += lens[static_cast<std::size_t>(r)];
  }
  if (total > INT32_MAX) throw ConfigError("sweep: the gathered rows exceed 2 GiB");
  std::string all(static_cast<std::size_t>(total), '\0');
  MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
  std::vector<std::string> out;
  for (int r = 0; r < size_ && rank_ == 0; ++r)
    out.push_back(all.substr(static_cast<std::size_t>(offsets[static_cast<std::size_t>(r)]),
                             static_cast<std::size_t>(lens[static_cast<std::size_t>(r)])));
  return out;
}

void Session::abort(int code) const {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();
}
#else
bool available() { return false; }
Session::Session() {
  throw ConfigError(
      "sweep: this dtsim was built without MPI, so it cannot shard a sweep over mpirun's ranks "
      "(install libopenmpi-dev and rebuild, or run without mpirun and use -j)");
}
Session::~Session() = default;
std::vector<std::string> Session::gather(const std::string&) const { return {}; }
void Session::abort(int) const { std::abort(); }
#endif

}  // namespace dtsim::sim::sweep::mpi
