// MPI for sharded sweeps (`mpirun -np N dtsim sweep ...`): scenario i runs on rank i % N and rank 0 gathers every
// rank's rows. MPI is initialised only when the process was started by an MPI launcher (its environment says so),
// and only the driver process uses it: forked sweep workers never call MPI. Built with MPI where CMake finds it
// (DTSIM_HAVE_MPI); without it, a launch under mpirun with several ranks is refused instead of running N copies.
#pragma once
#include <string>
#include <vector>

namespace dtsim::sim::sweep::mpi {

/// World size announced by an MPI launcher (OMPI_COMM_WORLD_SIZE, PMI_SIZE), 0 when not started by one.
int launched_size();
/// Rank announced by an MPI launcher (OMPI_COMM_WORLD_RANK, PMI_RANK), 0 when not started by one.
int launched_rank();
/// True when this dtsim was built with MPI.
bool available();

/// MPI_Init / MPI_Finalize around a sharded sweep. Throws ConfigError when built without MPI.
class Session {
public:
  Session();
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }
  /// Every rank's `mine`, in rank order, at rank 0; empty elsewhere. Collective.
  std::vector<std::string> gather(const std::string& mine) const;
  /// Ends every rank (after a fatal error on one, so the others do not wait in gather forever).
  [[noreturn]] void abort(int code) const;

private:
  int rank_ = 0, size_ = 1;
};

}  // namespace dtsim::sim::sweep::mpi
