// The search of several files by several workers and ranks (see warpbeam/dist/search.hpp):
// headers first (every rank), then the split, the pieces in worker threads, the gather on rank
// 0 and the merge there. Every step that can fail on one rank ends in Comm::agree.
#include "warpbeam/dist/search.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <tuple>

#include "dist/pack.hpp"
#include "warpbeam/dedisp.hpp"
#include "warpbeam/device.hpp"
#include "warpbeam/format.hpp"

namespace warpbeam::dist {

namespace {

// What a worker found in one piece.
struct Piece {
  SearchTask task;
  int worker = 0, rank = 0, device = -1;
  std::string run;                            // SearchResult::to_json().dump()
  std::vector<search::Candidate> candidates;  // a whole file, clustered by its worker
  std::vector<search::Peak> peaks;            // a slice: clustered on rank 0
};

// How every worker of this process searches.
struct WorkerSetup {
  Backend backend = Backend::cpu;
  int threads = 0;         // OpenMP threads per worker (0: the default)
  int memory_threads = 1;  // what the memory bound counts, the same on every worker
  bool progress = false;
};

void search_pieces(const DistSearchConfig& cfg, const WorkerSetup& setup,
                   const std::vector<SearchTask>& tasks, int worker, int device,
                   const std::atomic<bool>& stop, std::vector<Piece>& out) {
  if (device >= 0) set_device(device);
  for (const SearchTask& t : tasks) {
    if (stop) return;  // another worker of this process failed: the run is lost
    Piece p;
    p.task = t;
    p.worker = worker;
    p.device = device;
    search::FileSearchConfig c = cfg.search;
    c.beam = cfg.search.beam + t.file;
    c.threads = setup.threads;
    c.progress = setup.progress;
    c.part = {};
    c.part.memory_threads = setup.memory_threads;
    if (!t.whole) {
      c.part.dm_trial_begin = t.dm_begin;
      c.part.dm_trial_end = t.dm_end;
      c.part.on_peaks = [&p](const std::vector<search::Peak>& peaks) {
        p.peaks.insert(p.peaks.end(), peaks.begin(), peaks.end());
      };
    }
    search::SearchResult r =
        search::search_filterbank(cfg.files[static_cast<std::size_t>(t.file)], c, setup.backend);
    p.run = r.to_json().dump();
    if (t.whole) p.candidates = std::move(r.candidates);
    out.push_back(std::move(p));
  }
}

// Runs every local worker (one thread each when there are several) and returns their pieces in
// worker order; the first worker's error (by worker order) is rethrown.
std::vector<Piece> run_local_workers(const DistSearchConfig& cfg, const WorkerSetup& setup,
                                     const std::vector<std::vector<SearchTask>>& partition,
                                     int first_worker, const std::vector<int>& devices) {
  const std::size_t n = devices.size();
  std::vector<std::vector<Piece>> found(n);
  std::vector<std::exception_ptr> errors(n);
  std::atomic<bool> stop{false};
  auto work = [&](std::size_t k) {
    try {
      const int w = first_worker + static_cast<int>(k);
      search_pieces(cfg, setup, partition[static_cast<std::size_t>(w)], w, devices[k], stop,
                    found[k]);
    } catch (...) {
      errors[k] = std::current_exception();
      stop = true;
    }
  };
  if (n == 1) {
    work(0);  // on the main thread: MPI (funneled) and CUDA state stay where they were
  } else {
    std::vector<std::thread> threads;
    for (std::size_t k = 0; k < n; ++k)
      threads.emplace_back(work, k);
    for (auto& t : threads)
      t.join();
  }
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  std::vector<Piece> out;
  for (auto& f : found)
    for (auto& p : f)
      out.push_back(std::move(p));
  return out;
}

std::string pack_pieces(const std::vector<Piece>& pieces) {
  detail::Packer pk;
  pk.put<std::uint64_t>(pieces.size());
  for (const Piece& p : pieces) {
    pk.put(p.task.file);
    pk.put(p.task.dm_begin);
    pk.put(p.task.dm_end);
    pk.put(p.task.whole);
    pk.put(p.worker);
    pk.put(p.device);
    pk.put_string(p.run);
    pk.put_vector(p.candidates);
    pk.put_vector(p.peaks);
  }
  return pk.bytes();
}

void unpack_pieces(const std::string& bytes, int rank, std::vector<Piece>& out) {
  detail::Unpacker u(bytes);
  const auto n = u.get<std::uint64_t>();
  for (std::uint64_t i = 0; i < n; ++i) {
    Piece p;
    p.rank = rank;
    p.task.file = u.get<int>();
    p.task.dm_begin = u.get<std::int64_t>();
    p.task.dm_end = u.get<std::int64_t>();
    p.task.whole = u.get<bool>();
    p.worker = u.get<int>();
    p.device = u.get<int>();
    p.run = u.get_string();
    p.candidates = u.get_vector<search::Candidate>();
    p.peaks = u.get_vector<search::Peak>();
    out.push_back(std::move(p));
  }
  if (!u.done()) fail(ErrorCategory::io, "a result sent by rank {} has trailing bytes", rank);
}

// Rank 0: the candidates of every file from the pieces (sorted by file and DM slice).
std::vector<search::Candidate> merge_pieces(const DistSearchConfig& cfg,
                                            std::vector<FileReport>& files,
                                            std::vector<Piece>& pieces) {
  std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) {
    return std::tie(a.task.file, a.task.dm_begin) < std::tie(b.task.file, b.task.dm_begin);
  });
  std::vector<search::Candidate> out;
  std::size_t i = 0;
  for (std::size_t f = 0; f < files.size(); ++f) {
    FileReport& rep = files[f];
    const auto ndm = static_cast<std::int64_t>(rep.dms.size());
    std::vector<search::Peak> peaks;
    std::int64_t next = 0;  // the slices must tile [0, ndm)
    const std::size_t before = out.size();
    for (; i < pieces.size() && pieces[i].task.file == static_cast<int>(f); ++i) {
      Piece& p = pieces[i];
      if (p.task.dm_begin != next)
        fail(ErrorCategory::io, "internal: file {} lacks DM trials [{}, {})", f, next,
             p.task.dm_begin);
      next = p.task.dm_end;
      rep.pieces.push_back({p.task, p.worker, p.rank, p.device, nlohmann::json::parse(p.run)});
      if (p.task.whole) {
        out.insert(out.end(), p.candidates.begin(), p.candidates.end());
      } else {
        peaks.insert(peaks.end(), p.peaks.begin(), p.peaks.end());
      }
    }
    if (next != ndm)
      fail(ErrorCategory::io, "internal: file {} searched to DM trial {} of {}", f, next, ndm);
    if (!rep.pieces.empty() && !rep.pieces.front().task.whole)
      for (const auto& cl : search::cluster_peaks(peaks, cfg.search.cluster))
        out.push_back(search::to_candidate(cl, rep.dms, rep.header.tsamp,
                                           cfg.search.beam + static_cast<int>(f)));
    rep.candidates = static_cast<std::int64_t>(out.size() - before);
  }
  sort_candidates(out);
  return out;
}

}  // namespace

void sort_candidates(std::vector<search::Candidate>& c) {
  std::sort(c.begin(), c.end(), [](const search::Candidate& a, const search::Candidate& b) {
    if (a.snr != b.snr) return a.snr > b.snr;
    return std::tie(a.sample, a.beam, a.dm_trial, a.filter) <
           std::tie(b.sample, b.beam, b.dm_trial, b.filter);
  });
}

std::vector<search::Candidate> gather_candidates(const std::vector<search::Candidate>& mine,
                                                 const Comm& comm) {
  detail::Packer pk;
  pk.put_vector(mine);
  const auto blobs = comm.gather(pk.bytes());
  std::vector<search::Candidate> out;
  std::exception_ptr error;
  try {
    for (const auto& b : blobs) {
      detail::Unpacker u(b);
      const auto c = u.get_vector<search::Candidate>();
      out.insert(out.end(), c.begin(), c.end());
    }
    sort_candidates(out);
  } catch (...) {
    error = std::current_exception();
  }
  comm.agree(error);
  return out;
}

nlohmann::json DistSearchResult::to_json() const {
  nlohmann::json pieces = nlohmann::json::array();
  for (std::size_t f = 0; f < files.size(); ++f)
    for (const auto& p : files[f].pieces)
      pieces.push_back({{"file", files[f].path},
                        {"beam", p.task.file},
                        {"dm_trial_begin", p.task.dm_begin},
                        {"dm_trial_end", p.task.dm_end},
                        {"worker", p.worker},
                        {"rank", p.rank},
                        {"device", p.device},
                        {"run", p.run}});
  return {{"ranks", ranks},
          {"workers", workers},
          {"backend", backend},
          {"seconds", seconds},
          {"pieces", pieces}};
}

DistSearchResult search_files(const DistSearchConfig& cfg, const Comm& comm) {
  const auto t0 = std::chrono::steady_clock::now();
  DistSearchResult res;
  res.ranks = comm.size();
  const auto nfiles = cfg.files.size();

  // 1. Every rank: the parameters, every header and DM list, this process's workers.
  WorkerSetup setup;
  std::vector<int> devices;
  std::exception_ptr error;
  try {
    if (cfg.files.empty()) fail(ErrorCategory::invalid_argument, "no file to search");
    cfg.search.validate();
    require_range("cpu_workers", cfg.cpu_workers, 0, 4096);
    setup.backend = resolve_backend(cfg.backend);
    devices = local_devices(setup.backend, cfg.gpus, comm);
    if (setup.backend == Backend::cpu && cfg.cpu_workers > 1 && comm.size() == 1)
      devices.assign(static_cast<std::size_t>(cfg.cpu_workers), -1);
    for (const auto& path : cfg.files) {
      const io::FilterbankReader reader(path);
      FileReport rep;
      rep.path = path;
      rep.header = reader.header();
      const auto& h = rep.header;
      rep.dms =
          dedisp::dm_list_dedisp(cfg.search.dm_min, cfg.search.dm_max, cfg.search.pulse_width_us,
                                 cfg.search.dm_tolerance, h.nchans, h.tsamp, h.fch1, h.foff);
      res.files.push_back(std::move(rep));
    }
  } catch (...) {
    error = std::current_exception();
  }
  comm.agree(error);
  res.backend = std::string(to_string(setup.backend));

  // 2. The workers of the run (rank order) and the split, the same on every rank.
  detail::Packer mine;
  mine.put_vector(devices);
  const auto all_devices = comm.allgather(mine.bytes());
  int first_worker = 0;
  res.workers = 0;
  for (int r = 0; r < comm.size(); ++r) {
    detail::Unpacker u(all_devices[static_cast<std::size_t>(r)]);
    const auto n = static_cast<int>(u.get_vector<int>().size());
    if (r == comm.rank()) first_worker = res.workers;
    res.workers += n;
  }
  std::vector<std::int64_t> ndm(nfiles);
  std::vector<double> cost(nfiles);
  for (std::size_t f = 0; f < nfiles; ++f) {
    const auto& h = res.files[f].header;
    ndm[f] = static_cast<std::int64_t>(res.files[f].dms.size());
    cost[f] = static_cast<double>(ndm[f]) *
              static_cast<double>(std::max<std::int64_t>(1, h.nsamples)) * h.nchans;
  }
  const auto partition = partition_search(ndm, cost, res.workers);

  // OpenMP threads: the user's, else the process's cores shared by its workers. The memory
  // bound counts the same number on every worker, so all cut the files into the same gulps.
  const int hw = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  setup.memory_threads = cfg.search.threads > 0 ? cfg.search.threads : hw;
  setup.threads = cfg.search.threads > 0 || devices.size() == 1
                      ? cfg.search.threads
                      : std::max(1, omp_get_max_threads() / static_cast<int>(devices.size()));
  setup.progress = cfg.search.progress && res.workers == 1;

  // 3. Every local worker's pieces.
  std::vector<Piece> pieces;
  error = nullptr;
  try {
    pieces = run_local_workers(cfg, setup, partition, first_worker, devices);
  } catch (...) {
    error = std::current_exception();
  }
  comm.agree(error);

  // 4. Gather on rank 0 and merge there.
  const auto blobs = comm.gather(pack_pieces(pieces));
  error = nullptr;
  if (comm.is_root()) {
    try {
      std::vector<Piece> all;
      for (std::size_t r = 0; r < blobs.size(); ++r)
        unpack_pieces(blobs[r], static_cast<int>(r), all);
      res.candidates = merge_pieces(cfg, res.files, all);
    } catch (...) {
      error = std::current_exception();
    }
  }
  comm.agree(error);
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace warpbeam::dist
