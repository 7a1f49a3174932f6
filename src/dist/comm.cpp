// The world of processes of a run (see warpbeam/dist/comm.hpp): MPI when launched by mpirun and
// built with MPI, else one process. Only this file includes mpi.h.
#include "warpbeam/dist/comm.hpp"

#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "warpbeam/format.hpp"

#ifdef WARPBEAM_HAVE_MPI
#define OMPI_SKIP_MPICXX 1  // the C API only: the deprecated C++ bindings are not used
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace warpbeam::dist {

namespace {

// Launched by an MPI launcher? OpenMPI (OMPI_COMM_WORLD_SIZE), PMIx (PMIX_RANK) or a PMI-1/2
// launcher such as MPICH's hydra or Slurm's srun (PMI_SIZE). Returns the world size it announces
// (1 when it announces none).
int launcher_world_size(bool* launched) {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* v = std::getenv(var); v && *v) {
      *launched = true;
      return std::max(1, std::atoi(v));
    }
  *launched = std::getenv("PMIX_RANK") != nullptr;
  return 1;
}

#ifdef WARPBEAM_HAVE_MPI
void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  fail(ErrorCategory::io, "MPI: {} failed: {}", what, std::string(text, len));
}

void finalize_mpi() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

int to_count(std::size_t n, const char* what) {
  if (n > static_cast<std::size_t>(INT_MAX))
    fail(ErrorCategory::unsupported, "MPI: {} of {} bytes exceeds one message (2 GiB)", what, n);
  return static_cast<int>(n);
}
#endif

}  // namespace

struct CommAccess {
  static Comm make_world() {
    Comm c;
    bool launched = false;
    const int announced = launcher_world_size(&launched);
    if (!launched) return c;
#ifdef WARPBEAM_HAVE_MPI
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided),
                "MPI_Init_thread");
      std::atexit(finalize_mpi);
    }
    // Errors come back as codes (checked here) rather than aborting the job.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &c.rank_), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &c.size_), "MPI_Comm_size");
    MPI_Comm node{};
    check_mpi(
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, c.rank_, MPI_INFO_NULL, &node),
        "MPI_Comm_split_type");
    check_mpi(MPI_Comm_rank(node, &c.local_rank_), "MPI_Comm_rank (node)");
    check_mpi(MPI_Comm_size(node, &c.local_size_), "MPI_Comm_size (node)");
    MPI_Comm_free(&node);
    c.mpi_ = true;
    (void)announced;
    return c;
#else
    if (announced > 1)
      fail(ErrorCategory::unsupported,
           "this warpbeam build has no MPI but runs as one of {} processes (mpirun): every one "
           "would write the whole product; rebuild with MPI (libopenmpi-dev) or run one process",
           announced);
    return c;
#endif
  }
};

bool mpi_built() {
#ifdef WARPBEAM_HAVE_MPI
  return true;
#else
  return false;
#endif
}

const Comm& Comm::world() {
  static const Comm w = CommAccess::make_world();
  return w;
}

void Comm::agree(const std::exception_ptr& error) const {
  int category = -1;  // -1: this rank succeeded
  std::string message;
  if (error) {
    try {
      std::rethrow_exception(error);
    } catch (const Error& e) {
      category = static_cast<int>(e.category());
      message = e.what();
    } catch (const std::exception& e) {
      category = static_cast<int>(ErrorCategory::io);
      message = e.what();
    } catch (...) {
      category = static_cast<int>(ErrorCategory::io);
      message = "unknown error";
    }
  }
  if (!mpi_) {
    if (category >= 0) throw AgreedError(static_cast<ErrorCategory>(category), message);
    return;
  }
#ifdef WARPBEAM_HAVE_MPI
  std::vector<int> all(static_cast<std::size_t>(size_));
  check_mpi(MPI_Allgather(&category, 1, MPI_INT, all.data(), 1, MPI_INT, MPI_COMM_WORLD),
            "MPI_Allgather (error agreement)");
  int first = -1;
  for (int r = 0; r < size_ && first < 0; ++r)
    if (all[static_cast<std::size_t>(r)] >= 0) first = r;
  if (first < 0) return;
  int len = rank_ == first ? to_count(message.size(), "an error message") : 0;
  check_mpi(MPI_Bcast(&len, 1, MPI_INT, first, MPI_COMM_WORLD), "MPI_Bcast (error length)");
  std::string text(static_cast<std::size_t>(len), '\0');
  if (rank_ == first) text = message;
  if (len > 0)
    check_mpi(MPI_Bcast(text.data(), len, MPI_CHAR, first, MPI_COMM_WORLD),
              "MPI_Bcast (error message)");
  if (size_ > 1 && first > 0) text += fmt::format(" (rank {} of {})", first, size_);
  throw AgreedError(static_cast<ErrorCategory>(all[static_cast<std::size_t>(first)]), text);
#endif
}

std::vector<std::string> Comm::gather(const std::string& mine) const {
  if (!mpi_) return {mine};
#ifdef WARPBEAM_HAVE_MPI
  const int n = to_count(mine.size(), "a gathered result");
  std::vector<int> counts(static_cast<std::size_t>(size_)), displs(counts.size());
  check_mpi(MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD),
            "MPI_Gather (sizes)");
  std::string all;
  if (is_root()) {
    std::size_t total = 0;
    for (std::size_t r = 0; r < counts.size(); ++r) {
      displs[r] = to_count(total, "the gathered results");
      total += static_cast<std::size_t>(counts[r]);
    }
    to_count(total, "the gathered results");
    all.resize(total);
  }
  check_mpi(MPI_Gatherv(mine.data(), n, MPI_CHAR, all.data(), counts.data(), displs.data(),
                        MPI_CHAR, 0, MPI_COMM_WORLD),
            "MPI_Gatherv");
  std::vector<std::string> out;
  if (is_root())
    for (std::size_t r = 0; r < counts.size(); ++r)
      out.push_back(
          all.substr(static_cast<std::size_t>(displs[r]), static_cast<std::size_t>(counts[r])));
  return out;
#else
  return {mine};
#endif
}

std::vector<std::string> Comm::allgather(const std::string& mine) const {
  if (!mpi_) return {mine};
#ifdef WARPBEAM_HAVE_MPI
  const int n = to_count(mine.size(), "a gathered result");
  std::vector<int> counts(static_cast<std::size_t>(size_)), displs(counts.size());
  check_mpi(MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD),
            "MPI_Allgather (sizes)");
  std::size_t total = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    displs[r] = to_count(total, "the gathered results");
    total += static_cast<std::size_t>(counts[r]);
  }
  std::string all(total, '\0');
  check_mpi(MPI_Allgatherv(mine.data(), n, MPI_CHAR, all.data(), counts.data(), displs.data(),
                           MPI_CHAR, MPI_COMM_WORLD),
            "MPI_Allgatherv");
  std::vector<std::string> out;
  for (std::size_t r = 0; r < counts.size(); ++r)
    out.push_back(
        all.substr(static_cast<std::size_t>(displs[r]), static_cast<std::size_t>(counts[r])));
  return out;
#else
  return {mine};
#endif
}

std::vector<std::string> Comm::alltoall(const std::vector<std::string>& to_each) const {
  if (static_cast<int>(to_each.size()) != size_)
    fail(ErrorCategory::invalid_argument, "alltoall: {} messages for {} ranks", to_each.size(),
         size_);
  if (!mpi_) return to_each;
#ifdef WARPBEAM_HAVE_MPI
  const auto n = static_cast<std::size_t>(size_);
  std::vector<int> send_counts(n), send_displs(n), recv_counts(n), recv_displs(n);
  std::string send;
  for (std::size_t r = 0; r < n; ++r) {
    send_displs[r] = to_count(send.size(), "the exchanged bytes");
    send_counts[r] = to_count(to_each[r].size(), "an exchanged message");
    send += to_each[r];
  }
  check_mpi(
      MPI_Alltoall(send_counts.data(), 1, MPI_INT, recv_counts.data(), 1, MPI_INT, MPI_COMM_WORLD),
      "MPI_Alltoall (sizes)");
  std::size_t total = 0;
  for (std::size_t r = 0; r < n; ++r) {
    recv_displs[r] = to_count(total, "the exchanged bytes");
    total += static_cast<std::size_t>(recv_counts[r]);
  }
  to_count(total, "the exchanged bytes");
  std::string all(total, '\0');
  check_mpi(MPI_Alltoallv(send.data(), send_counts.data(), send_displs.data(), MPI_CHAR, all.data(),
                          recv_counts.data(), recv_displs.data(), MPI_CHAR, MPI_COMM_WORLD),
            "MPI_Alltoallv");
  std::vector<std::string> out;
  for (std::size_t r = 0; r < n; ++r)
    out.push_back(all.substr(static_cast<std::size_t>(recv_displs[r]),
                             static_cast<std::size_t>(recv_counts[r])));
  return out;
#else
  return to_each;
#endif
}

std::string Comm::broadcast(const std::string& root_bytes) const {
  if (!mpi_) return root_bytes;
#ifdef WARPBEAM_HAVE_MPI
  int n = is_root() ? to_count(root_bytes.size(), "a broadcast") : 0;
  check_mpi(MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast (size)");
  std::string out = is_root() ? root_bytes : std::string(static_cast<std::size_t>(n), '\0');
  if (n > 0) check_mpi(MPI_Bcast(out.data(), n, MPI_CHAR, 0, MPI_COMM_WORLD), "MPI_Bcast");
  return out;
#else
  return root_bytes;
#endif
}

void Comm::barrier() const {
#ifdef WARPBEAM_HAVE_MPI
  if (mpi_) check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
#endif
}

void Comm::abort(int code) const {
  std::fflush(stdout);
  std::fflush(stderr);
#ifdef WARPBEAM_HAVE_MPI
  if (mpi_) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  std::_Exit(code);
}

namespace detail {

void quiet_exit(const Comm&, const Error& e) {
  std::fflush(stdout);
  std::exit(e.category() == ErrorCategory::invalid_argument ? 2 : 1);
}

void abort_unagreed(const Comm& comm, const std::exception& e) {
  std::fprintf(stderr, "warpbeam: error: %s (rank %d of %d; stopping every rank)\n", e.what(),
               comm.rank(), comm.size());
  const auto* err = dynamic_cast<const Error*>(&e);
  comm.abort(err && err->category() == ErrorCategory::invalid_argument ? 2 : 1);
}

}  // namespace detail

}  // namespace warpbeam::dist
