#pragma once
// Who does what in a run of several workers: the GPU list (`--gpus`), the workers of this
// process, and the split of a search's files and DM trials over every worker of the run.
//
// A worker is one host thread driving one device (CUDA) or, on the CPU backend, one process's
// share of the cores. In a run of one process the workers are the entries of --gpus (default:
// every visible device); under mpirun each rank is one worker on device `local_rank mod
// (GPUs of the node)`. Every rank computes the same partition from the same inputs, so the
// split needs no communication.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "warpbeam/core.hpp"
#include "warpbeam/dist/comm.hpp"

namespace warpbeam::dist {

/// Parses a device list such as "0,1,3": device ordinals >= 0, separated by commas; repeats are
/// allowed ("0,0": two workers sharing device 0, which is how a one-GPU machine tests the split).
/// Throws invalid_argument naming the bad item (empty list, empty item, not a number).
std::vector<int> parse_gpu_list(const std::string& spec);

/// The devices of this process's workers, one entry per worker.
/// - Backend::cpu: one worker ({-1}); a non-empty `gpus` is an invalid_argument (--gpus needs
///   the CUDA backend).
/// - Backend::cuda, one process: `gpus` (empty: 0 .. device_count() - 1).
/// - Backend::cuda, several ranks: one worker, on gpus[local_rank % gpus.size()] (empty `gpus`:
///   device local_rank % device_count()).
/// Throws invalid_argument for an ordinal that is not a visible device (naming how many are),
/// unsupported when CUDA is asked for without a device. `backend` must be resolved.
std::vector<int> local_devices(Backend backend, const std::vector<int>& gpus, const Comm& comm);

/// A piece of a file search: DM trials [dm_begin, dm_end) of gulps [gulp_begin, gulp_end) (end
/// -1: to the last) of file `file` (an index into the run's file list). `whole` when the piece
/// is the file's whole search (every DM trial, every gulp).
struct SearchTask {
  int file = 0;
  std::int64_t dm_begin = 0, dm_end = 0;
  bool whole = true;
  std::int64_t gulp_begin = 0, gulp_end = -1;
  bool operator==(const SearchTask&) const = default;
};

/// Splits a search of files (file f: ndm[f] DM trials, cost[f] > 0 in any unit, e.g. DM trials
/// x samples x channels) over `workers` workers; element w is worker w's tasks, by file.
/// - workers <= files: whole files, each (largest cost first, ties by index) to the worker with
///   the least cost so far (ties: the lowest worker);
/// - workers > files: every file gets one worker, the remaining ones go one at a time to the file
///   with the largest cost per worker (ties: the lowest file); a file of k > 1 workers is cut in
///   time into k contiguous gulp slices (all DM trials each) when it has at least k gulps
///   (ngulps[f], when given: each worker then reads only its part of the file), else into
///   min(k, ndm) contiguous DM slices of nearly equal size (each worker reads the whole file);
///   workers follow file order. Workers left without a slice get no task.
/// Deterministic: every rank computes the same split. Throws invalid_argument for workers < 1,
/// mismatched sizes, ndm < 1 or cost <= 0.
std::vector<std::vector<SearchTask>> partition_search(const std::vector<std::int64_t>& ndm,
                                                      const std::vector<double>& cost, int workers,
                                                      const std::vector<std::int64_t>& ngulps = {});

/// [begin, end) of part k of n items cut into `parts` contiguous pieces of nearly equal size
/// (the first n % parts pieces one larger). parts >= 1, 0 <= k < parts.
std::pair<std::int64_t, std::int64_t> split_range(std::int64_t n, int parts, int k);

}  // namespace warpbeam::dist
