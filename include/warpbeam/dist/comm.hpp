#pragma once
// The processes of one warpbeam run: one in a plain run, N under `mpirun -n N` (MPI_COMM_WORLD of
// OpenMPI or any MPI-3 library found at configure time; WARPBEAM_HAVE_MPI).
//
// MPI is started only when the process was launched by an MPI launcher (the environment holds
// OMPI_COMM_WORLD_SIZE, PMIX_RANK or PMI_SIZE), so a plain `warpbeam search FILE` never touches
// MPI, and a build without MPI runs as one process. A build without MPI launched as one of
// several processes refuses to run (every rank would write the whole product).
//
// Every collective below must be called by every rank in the same order. Errors: a rank that
// fails passes its exception to agree(); every rank then throws the same AgreedError (the error
// of the lowest failing rank), so that all ranks stop together and rank 0 alone reports it.

#include <exception>
#include <string>
#include <vector>

#include "warpbeam/core.hpp"

namespace warpbeam::dist {

/// An error every rank of the run has agreed on (Comm::agree): each rank throws it; rank 0
/// reports it, the others exit quietly with the same exit code (run_collective).
class AgreedError : public Error {
 public:
  AgreedError(ErrorCategory category, const std::string& message) : Error(category, message) {}
};

class Comm {
 public:
  /// The world of this process: MPI_COMM_WORLD when launched by mpirun (MPI_Init_thread with
  /// MPI_THREAD_FUNNELED on the first call; MPI_Finalize at exit), else a world of one.
  /// Throws unsupported when launched as one of several processes by a build without MPI.
  static const Comm& world();

  /// A world of one process (tests; what world() is in a plain run).
  Comm() = default;

  int rank() const { return rank_; }
  int size() const { return size_; }
  /// Rank among the processes of this node (MPI_COMM_TYPE_SHARED) and their number: a rank
  /// picks its GPU as local_rank() mod the node's GPUs.
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  bool is_root() const { return rank_ == 0; }
  /// True when MPI carries this world (launched by mpirun, even with -n 1).
  bool uses_mpi() const { return mpi_; }

  /// Collective. `error` is what this rank caught (null: it succeeded). Returns when no rank
  /// failed; otherwise every rank throws AgreedError with the category and message of the lowest
  /// failing rank (" (rank R of N)" appended when N > 1 and R > 0). An error that is not a
  /// warpbeam::Error keeps its what() and gets category io.
  void agree(const std::exception_ptr& error) const;

  /// Collective. Every rank's bytes, in rank order, on rank 0 (other ranks get an empty list).
  std::vector<std::string> gather(const std::string& mine) const;
  /// Collective. Every rank's bytes, in rank order, on every rank.
  std::vector<std::string> allgather(const std::string& mine) const;
  /// Collective. `to_each[r]` goes to rank r; element r of the result came from rank r (each
  /// message below 2 GiB). Throws invalid_argument when to_each.size() != size().
  std::vector<std::string> alltoall(const std::vector<std::string>& to_each) const;
  /// Collective. Rank 0's bytes on every rank.
  std::string broadcast(const std::string& root_bytes) const;
  /// Collective.
  void barrier() const;

  /// Ends the whole run at once (MPI_Abort with `code`; std::exit in a world of one). For an
  /// error that only this rank saw, where waiting for the others could hang.
  [[noreturn]] void abort(int code) const;

 private:
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  bool mpi_ = false;
  friend struct CommAccess;
};

/// Runs `body` (a subcommand) on every rank with the CLI's error rules: an AgreedError is
/// rethrown on rank 0 (main prints it: one line) and ends the other ranks quietly with the
/// same exit code (2 for invalid_argument, else 1); any other error in a run of several ranks
/// is printed by the rank that saw it and aborts the run (MPI_Abort), since the other ranks may
/// be waiting for it in a collective. In a world of one, errors pass through unchanged.
template <class F>
void run_collective(const Comm& comm, F&& body);

/// True when this build has MPI (WARPBEAM_HAVE_MPI at configure time).
bool mpi_built();

namespace detail {
[[noreturn]] void quiet_exit(const Comm& comm, const Error& e);
[[noreturn]] void abort_unagreed(const Comm& comm, const std::exception& e);
}  // namespace detail

template <class F>
void run_collective(const Comm& comm, F&& body) {
  try {
    body();
  } catch (const AgreedError& e) {
    if (!comm.is_root()) detail::quiet_exit(comm, e);
    throw;
  } catch (const std::exception& e) {
    if (comm.size() > 1) detail::abort_unagreed(comm, e);
    throw;
  }
}

}  // namespace warpbeam::dist
