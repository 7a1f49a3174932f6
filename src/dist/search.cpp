// The search of several files by several workers and ranks (see warpbeam/dist/search.hpp):
// headers first (every rank), then the split, the pieces in worker threads, the gather on rank
// 0 and the merge there. Every step that can fail on one rank ends in Comm::agree.
#include "warpbeam/dist/search.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <thread>
#include <tuple>

#include "dist/pack.hpp"
#include "search/gulp_searcher.hpp"
#include "warpbeam/dedisp.hpp"
#include "warpbeam/device.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/io/filterbank_source.hpp"
#include "warpbeam/progress.hpp"

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
  int memory_threads = 1;  // what the host memory bound counts, the same on every worker
  bool progress = false;
  // Per local worker: its device (-1: CPU) and device memory budget (bytes; 0 on the CPU): the
  // configured one, else 80 % of the free memory shared by the node's workers on that device.
  std::vector<int> devices;
  std::vector<std::int64_t> device_budgets;
  // Per file: the gulp every worker uses (the smallest any worker of the run can hold), so
  // that every worker cuts a file into the same gulps with the same statistics.
  std::vector<std::int64_t> gulps;
};

// The device memory budget of a worker on device `device` (-1: CPU, 0): the configured one, or
// 80 % of the device's free memory divided among the workers of this node that share it (in
// one process: the entries of the list equal to it; under mpirun: the node's ranks that pick it).
std::int64_t device_budget(const DistSearchConfig& cfg, const Comm& comm,
                           const std::vector<int>& devices, int device) {
  if (device < 0) return 0;
  if (cfg.run.device_memory_bytes > 0) return cfg.run.device_memory_bytes;
#ifdef WARPBEAM_HAVE_CUDA
  std::int64_t shares = 0;
  if (comm.size() == 1) {
    shares = std::count(devices.begin(), devices.end(), device);
  } else {
    std::vector<int> list = cfg.gpus;
    if (list.empty())
      for (int d = 0; d < device_count(); ++d)
        list.push_back(d);
    for (int l = 0; l < comm.local_size(); ++l)
      shares += list[static_cast<std::size_t>(l) % list.size()] == device ? 1 : 0;
  }
  search::RunOptions o = cfg.run;
  o.device = device;
  return search::device_memory_budget(o) / std::max<std::int64_t>(1, shares);
#else
  (void)comm;
  (void)devices;
  fail(ErrorCategory::unsupported, "this warpbeam build has no CUDA backend");
#endif
}

// The plan of file `f` for local worker k: the whole DM list with `gulp` (0: the default the
// budgets allow), `threads` OpenMP threads (what the host memory bound counts), and the worker's
// device and device budget. A worker then searches its slice of it (search::SearchSlice).
search::FileSearchPlan plan_for_worker(const DistSearchConfig& cfg, const WorkerSetup& setup,
                                       const FileReport& f, std::int64_t gulp, std::size_t k,
                                       int threads) {
  search::RunOptions o = cfg.run;
  o.gulp = gulp;
  o.threads = threads;
  o.device = std::max(0, setup.devices[k]);
  o.device_memory_bytes = setup.device_budgets[k];
  return search::FileSearchPlan(cfg.search, o, f.header, setup.backend, f.path);
}

// Searches one piece as search::search_filterbank() does: a whole file is clustered here
// (streaming, gulp by gulp); a slice hands its peaks on for rank 0 to cluster with the others.
void search_piece(const DistSearchConfig& cfg, const WorkerSetup& setup,
                  const search::FileSearchPlan& plan, const SearchTask& t, Piece& p) {
  search::SearchResult res = search::planned_result(plan);
  res.backend = setup.backend == Backend::cuda ? "cuda" : "cpu";    // this worker's backend
  res.dm_chunk = std::min(plan.dm_chunk(), t.dm_end - t.dm_begin);  // the chunk within this slice

  search::Clusterer clusterer(cfg.search.cluster);
  std::vector<search::Cluster> clusters;
  Progress progress(fmt::format("search {}", plan.name()), plan.nsamples_searched());
  if (!setup.progress) progress.set_enabled(false);
  auto sink = [&](search::GulpPeaks&& gp) {
    const auto t0 = std::chrono::steady_clock::now();
    res.min_channels_kept = std::min(res.min_channels_kept, gp.channels_kept);
    res.add_zapped(gp.zap_reason);
    const auto r = plan.gulp_range(gp.gulp);
    if (t.whole) {
      // Every later gulp's plane starts at or after own_end - margin: spans begin no earlier.
      clusterer.add(gp.peaks);
      const auto done = gp.gulp + 1 < plan.gulps() ? clusterer.take_final(r.own_end - plan.margin())
                                                   : clusterer.finish();
      clusters.insert(clusters.end(), done.begin(), done.end());
    } else {
      p.peaks.insert(p.peaks.end(), gp.peaks.begin(), gp.peaks.end());
    }
    res.seconds_cluster +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    progress.update(r.own_end);
    ++res.gulps_searched;
    return true;
  };
  search::StageTimes times;
  const auto source = io::open_filterbank(plan.name());
  search::search_gulps(plan, *source, {t.gulp_begin, t.gulp_end, t.dm_begin, t.dm_end},
                       std::max(p.device, 0), sink, times);
  progress.finish();
  times.report_to(res);
  p.run = res.to_json().dump();
  if (t.whole)
    for (const auto& cl : clusters)
      p.candidates.push_back(
          search::to_candidate(cl, plan.dms(), plan.header().tsamp, cfg.search.beam + t.file));
}

void search_pieces(const DistSearchConfig& cfg, const WorkerSetup& setup,
                   const std::vector<FileReport>& files, const std::vector<SearchTask>& tasks,
                   int worker, std::size_t k, const std::atomic<bool>& stop,
                   std::vector<Piece>& out) {
  const int device = setup.devices[k];
  if (device >= 0) set_device(device);
  for (const SearchTask& t : tasks) {
    if (stop) return;  // another worker of this process failed: the run is lost
    Piece p;
    p.task = t;
    p.worker = worker;
    p.device = device;
    const auto f = static_cast<std::size_t>(t.file);
    const auto plan = plan_for_worker(cfg, setup, files[f], setup.gulps[f], k, setup.threads);
    search_piece(cfg, setup, plan, t, p);
    out.push_back(std::move(p));
  }
}

// Runs every local worker (one thread each when there are several) and returns their pieces in
// worker order; the first worker's error (by worker order) is rethrown.
std::vector<Piece> run_local_workers(const DistSearchConfig& cfg, const WorkerSetup& setup,
                                     const std::vector<FileReport>& files,
                                     const std::vector<std::vector<SearchTask>>& partition,
                                     int first_worker) {
  const std::size_t n = setup.devices.size();
  std::vector<std::vector<Piece>> found(n);
  std::vector<std::exception_ptr> errors(n);
  std::atomic<bool> stop{false};
  auto work = [&](std::size_t k) {
    try {
      const int w = first_worker + static_cast<int>(k);
      search_pieces(cfg, setup, files, partition[static_cast<std::size_t>(w)], w, k, stop,
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
    pk.put(p.task.gulp_begin);
    pk.put(p.task.gulp_end);
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
    p.task.gulp_begin = u.get<std::int64_t>();
    p.task.gulp_end = u.get<std::int64_t>();
    p.worker = u.get<int>();
    p.device = u.get<int>();
    p.run = u.get_string();
    p.candidates = u.get_vector<search::Candidate>();
    p.peaks = u.get_vector<search::Peak>();
    out.push_back(std::move(p));
  }
  if (!u.done()) fail(ErrorCategory::io, "a result sent by rank {} has trailing bytes", rank);
}

// Rank 0: the candidates of every file from the pieces (sorted by file, DM slice and gulp
// slice). A file's pieces must tile its search: DM slices of every gulp, or gulp slices of
// every DM trial.
std::vector<search::Candidate> merge_pieces(const DistSearchConfig& cfg,
                                            std::vector<FileReport>& files,
                                            std::vector<Piece>& pieces) {
  std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) {
    return std::tie(a.task.file, a.task.dm_begin, a.task.gulp_begin) <
           std::tie(b.task.file, b.task.dm_begin, b.task.gulp_begin);
  });
  std::vector<search::Candidate> out;
  std::size_t i = 0;
  for (std::size_t f = 0; f < files.size(); ++f) {
    FileReport& rep = files[f];
    const auto ndm = static_cast<std::int64_t>(rep.dms.size());
    std::vector<search::Peak> peaks;
    std::int64_t next_dm = 0, next_gulp = 0;  // the slices must tile [0, ndm) or the gulps
    bool in_time = false;
    const std::size_t before = out.size();
    for (; i < pieces.size() && pieces[i].task.file == static_cast<int>(f); ++i) {
      Piece& p = pieces[i];
      in_time = p.task.gulp_begin > 0 || p.task.gulp_end >= 0;
      if (in_time) {
        if (p.task.dm_begin != 0 || p.task.dm_end != ndm || p.task.gulp_begin != next_gulp)
          fail(ErrorCategory::io, "internal: file {} lacks gulps [{}, {})", f, next_gulp,
               p.task.gulp_begin);
        next_gulp = p.task.gulp_end;
        next_dm = ndm;
      } else {
        if (p.task.dm_begin != next_dm)
          fail(ErrorCategory::io, "internal: file {} lacks DM trials [{}, {})", f, next_dm,
               p.task.dm_begin);
        next_dm = p.task.dm_end;
      }
      rep.pieces.push_back({p.task, p.worker, p.rank, p.device, nlohmann::json::parse(p.run)});
      if (p.task.whole) {
        out.insert(out.end(), p.candidates.begin(), p.candidates.end());
      } else {
        peaks.insert(peaks.end(), p.peaks.begin(), p.peaks.end());
      }
    }
    if (next_dm != ndm)
      fail(ErrorCategory::io, "internal: file {} searched to DM trial {} of {}", f, next_dm, ndm);
    if (in_time && next_gulp != rep.pieces.back().run.at("gulps").get<std::int64_t>())
      fail(ErrorCategory::io, "internal: file {} searched to gulp {}", f, next_gulp);
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
                        {"gulp_begin", p.task.gulp_begin},
                        {"gulp_end", p.task.gulp_end},
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

  // 1. Every rank: the parameters, this process's workers, every header and DM list, and the
  //    gulp each file would have on each local worker.
  WorkerSetup setup;
  std::vector<std::int64_t> local_gulps;
  std::exception_ptr error;
  try {
    if (cfg.files.empty()) fail(ErrorCategory::invalid_argument, "no file to search");
    cfg.search.validate();
    cfg.run.validate();
    require_range("cpu_workers", cfg.cpu_workers, 0, 4096);
    setup.backend = resolve_backend(cfg.backend);
    setup.devices = local_devices(setup.backend, cfg.gpus, comm);
    if (setup.backend == Backend::cpu && cfg.cpu_workers > 1 && comm.size() == 1)
      setup.devices.assign(static_cast<std::size_t>(cfg.cpu_workers), -1);
    const auto nlocal = static_cast<int>(setup.devices.size());
    // OpenMP threads: the user's, else the process's cores shared by its workers. The memory
    // bound counts the same number on every worker, so all cut the files into the same gulps.
    const int hw = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    setup.memory_threads = cfg.run.threads > 0 ? cfg.run.threads : hw;
    setup.threads = cfg.run.threads > 0 || nlocal == 1
                        ? cfg.run.threads
                        : std::max(1, omp_get_max_threads() / nlocal);
    for (int d : setup.devices)
      setup.device_budgets.push_back(device_budget(cfg, comm, setup.devices, d));

    for (const auto& path : cfg.files) {
      FileReport rep;
      rep.path = path;
      rep.header = io::open_filterbank(path)->header();
      const auto& h = rep.header;
      rep.dms =
          dedisp::dm_list_dedisp(cfg.search.dm_min, cfg.search.dm_max, cfg.search.pulse_width_us,
                                 cfg.search.dm_tolerance, h.nchans, h.tsamp, h.fch1, h.foff);
      // The largest gulp every local worker can hold (a file too short for the largest delay
      // fails here, on every rank).
      std::int64_t gulp = std::numeric_limits<std::int64_t>::max();
      for (std::size_t k = 0; k < setup.devices.size(); ++k)
        gulp = std::min(
            gulp, plan_for_worker(cfg, setup, rep, cfg.run.gulp, k, setup.memory_threads).gulp());
      local_gulps.push_back(gulp);
      res.files.push_back(std::move(rep));
    }
  } catch (...) {
    error = std::current_exception();
  }
  comm.agree(error);
  res.backend = std::string(to_string(setup.backend));

  // 2. The workers of the run (rank order), the gulps and the split, the same on every rank.
  detail::Packer mine;
  mine.put_vector(setup.devices);
  mine.put_vector(local_gulps);
  const auto all = comm.allgather(mine.bytes());
  int first_worker = 0;
  res.workers = 0;
  setup.gulps = local_gulps;
  for (int r = 0; r < comm.size(); ++r) {
    detail::Unpacker u(all[static_cast<std::size_t>(r)]);
    const auto n = static_cast<int>(u.get_vector<int>().size());
    const auto gulps = u.get_vector<std::int64_t>();
    if (gulps.size() != nfiles)
      fail(ErrorCategory::io, "rank {} planned {} files, not {}", r, gulps.size(), nfiles);
    for (std::size_t f = 0; f < nfiles; ++f)
      setup.gulps[f] = std::min(setup.gulps[f], gulps[f]);
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
  // Gulps per file (with the agreed gulp), so that a file of several workers can be cut in time.
  std::vector<std::int64_t> ngulps(nfiles);
  for (std::size_t f = 0; f < nfiles; ++f)
    ngulps[f] =
        plan_for_worker(cfg, setup, res.files[f], setup.gulps[f], 0, setup.memory_threads).gulps();
  const auto partition = partition_search(ndm, cost, res.workers, ngulps);
  setup.progress = cfg.run.progress && res.workers == 1;

  // 3. Every local worker's pieces.
  std::vector<Piece> pieces;
  error = nullptr;
  try {
    pieces = run_local_workers(cfg, setup, res.files, partition, first_worker);
    // Fault injection for the tests (test_dist_mpi): this rank alone fails after its search,
    // as a rank whose disk or device failed would, while the others carry on to the agreement.
    if (const char* r = std::getenv("WARPBEAM_TEST_FAIL_RANK");
        r && *r && std::atoi(r) == comm.rank())
      fail(ErrorCategory::io, "injected failure after the search (WARPBEAM_TEST_FAIL_RANK={})",
           comm.rank());
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
