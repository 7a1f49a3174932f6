#pragma once
// The search of several filterbank files (beams) by several workers: GPUs of one process
// (`--gpus`), MPI ranks (`mpirun -n N`), or both. The result is the same, byte for byte in the
// .cand file, as the search by one process with one worker.
//
// How it stays identical:
// - every worker searches its slice (gulps or DM trials) of a search::FileSearchPlan with the
//   file search's own GulpSearcher (src/search/gulp_searcher.hpp), with the gulp the whole run
//   agreed on: each rank plans every file for each of its workers (the host memory bound counts
//   the node's cores or run.threads, not the worker's share; a CUDA worker gets its share of the
//   device budget) and the run takes the smallest gulp, which every worker's plan is then made
//   with, so all cut a file into the same gulps with the same statistics; a DM trial's
//   dedispersion and search do not depend on the other trials;
// - a file of several workers is cut in time (each worker searches a contiguous run of its gulps
//   with every DM trial, reading only their rows) when it has at least as many gulps as
//   workers, else its DM list is cut (each worker reads the whole file); a gulp's statistics,
//   dedispersion and peaks do not depend on the other gulps or DM trials;
// - a file searched by one worker is clustered there, streaming, as search_filterbank does; a
//   file split over workers is clustered on rank 0 from the peaks of all its slices
//   (cluster_peaks: friends-of-friends components do not depend on the order of the peaks, and
//   the streaming Clusterer of a single search finds the same components);
// - the candidates of all files are sorted on rank 0 in one total order (sort_candidates).
// One difference is possible: SearchConfig::max_peaks caps the peaks per DM-time plane, so when
// a plane exceeds it (with a warning) a slice keeps a different set than the whole list.
//
// Errors: every rank reads and plans every file first (a malformed file, or one shorter than the
// largest delay, fails there on every rank); any failure there or in the search, on any rank or
// worker, stops every rank with one error (Comm::agree) and no candidates. A failing
// worker stops the other workers of its process before their next piece; other ranks learn of
// it when they have searched their pieces (the next agreement), so no search is cut mid-piece.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "warpbeam/dist/comm.hpp"
#include "warpbeam/dist/work.hpp"
#include "warpbeam/io/sigproc.hpp"
#include "warpbeam/search.hpp"

namespace warpbeam::dist {

struct DistSearchConfig {
  /// The files; file b's candidates carry beam search.beam + b.
  std::vector<std::string> files;
  /// The physics of every file's search (file b's candidates carry beam search.beam + b).
  search::FileSearchConfig search;
  /// How it runs: the gulp (0: the smallest default of any worker), threads, memory budgets,
  /// streams, autotune; progress is shown only when one worker does everything; each worker
  /// runs on its own device (see gpus) with its share of the device budget.
  search::RunOptions run;
  Backend backend = Backend::cpu;  ///< resolved on every rank (auto: CUDA where a device is)
  /// CUDA devices of this process's workers (--gpus; empty: every visible one). See
  /// local_devices() for ranks of an MPI run.
  std::vector<int> gpus;
  /// CPU backend: workers in this process (threads sharing the cores), 0 or 1: one. It lets
  /// tests drive the split of a multi-GPU run on a machine without a GPU.
  int cpu_workers = 0;
};

/// One piece of the run as it was searched.
struct PieceReport {
  SearchTask task;
  int worker = 0, rank = 0, device = -1;  ///< device -1: CPU
  nlohmann::json run;                     ///< search::SearchResult::to_json() of the piece
};

struct FileReport {
  std::string path;
  io::FilterbankHeader header;
  std::vector<float> dms;
  std::vector<PieceReport> pieces;  ///< rank 0 only, by DM slice
  std::int64_t candidates = 0;      ///< rank 0 only
};

struct DistSearchResult {
  /// Rank 0: the candidates of every file, in sort_candidates() order; other ranks: empty.
  std::vector<search::Candidate> candidates;
  std::vector<FileReport> files;  ///< headers and DM lists on every rank; pieces on rank 0
  int ranks = 1, workers = 1;     ///< of the whole run
  std::string backend;            ///< "cpu" or "cuda"
  double seconds = 0;             ///< wall time of the search (headers to merged candidates)
  /// The run's layout (ranks, workers with their rank and device, every piece) as JSON.
  nlohmann::json to_json() const;
};

/// The merged order of candidates: S/N descending, then sample, beam, dm_trial and filter
/// ascending. A total order (no two clusters of one beam share their best peak), so the merged
/// list does not depend on which worker found what.
void sort_candidates(std::vector<search::Candidate>& candidates);

/// Collective: every rank's candidates (e.g. of the whole beams it searched), merged on rank 0 in
/// sort_candidates() order; other ranks get an empty list. For drivers that cluster where they
/// search (the voltages -> beams -> search pipeline: each device searches whole beams).
std::vector<search::Candidate> gather_candidates(const std::vector<search::Candidate>& mine,
                                                 const Comm& comm);

/// Searches `config.files` with every worker of every rank of `comm` (collective: every rank
/// calls it with the same config). Throws AgreedError (on every rank) when any rank fails: a
/// missing or malformed file, a file shorter than the largest delay, a device error.
DistSearchResult search_files(const DistSearchConfig& config, const Comm& comm);

}  // namespace warpbeam::dist
