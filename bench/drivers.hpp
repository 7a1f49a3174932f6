#pragma once
// The benchmark drivers behind `warpbeam bench ENGINE --config NAME` (apps/warpbeam/cmd_bench.cpp
// parses the options into these structs and calls the driver). Each driver builds the reference
// configuration of DESIGN.md, times the engine's variants, checks them against the reference
// path, prints a summary line on stdout and writes the record (with provenance) to `json`
// when given. Errors: Error(invalid_argument) for a bad option, Error(unsupported) for a
// backend this build lacks, Error(cuda) when a variant fails its check.
#include <cstdint>
#include <string>
#include <vector>

#include "bench/dedisp.hpp"

namespace warpbeam::bench {

/// `bench beamform` (beamform.cpp): B1 (BEST-2) or B2 (large N), every candidate kernel.
struct BeamformBenchOptions {
  std::string config = "B1", backend = "cuda", algorithm = "auto", json;
  bool sweep = false;
  int repeats = 0;
};
void bench_beamform(const BeamformBenchOptions& options);

/// `bench das` (das.cpp): delay-and-sum variants on U1 or U2 (points/s).
struct DasBenchOptions {
  std::string config = "U1", backend = "cuda", algorithm, storage = "fp32", json;
  bool sweep = false;
  int repeats = 7;
  std::int64_t batch = 0;
  int rx_split = 0;  // TCW without --sweep: tuning.rx_split (0: the default)
};
void bench_das(const DasBenchOptions& options);

/// `bench epic` (epic.cpp): the EPIC imager on E1, E2 or E3, time per 40 ms gulp.
struct EpicBenchOptions {
  std::string config = "E1", backend = "cuda", algorithm = "all", json, ssmif;
  bool sweep = false;
  int repeats = 5;
  std::int64_t ntime = 0;  // 0: the configuration's 1000 (CPU: 10)
};
void bench_epic(const EpicBenchOptions& options);

/// `bench pipeline` (pipeline.cpp): voltages -> beams -> search on B1, voltages from memory.
struct PipelineBenchOptions {
  std::string config = "B1", backend = "cuda", json, split = "auto";
  double seconds = 0, dm_max = 100;
  int integrate = 16, beams = 32;
  std::vector<int> gpus;
  bool pageable = false;      // feed pageable blocks (staged per device) instead of pinned ones
  bool int8_weights = false;  // PipelineConfig::int8_weights
  bool scaling = false;       // one device against all (both splits) instead of the stream baseline
};
void bench_pipeline(const PipelineBenchOptions& options);

/// `bench search` (search.cpp): the file search end to end on a simulated D1 file with an
/// injected burst; throws Error(io) when the burst is not the top candidate.
struct SearchBenchOptions {
  std::string config = "D1", backend = "cuda", json_path;
  std::string dedisp = "brute";  // brute, subband, fdmt or auto (FileSearchConfig::dedisp)
  std::int64_t nsamples = 0;     // input samples (0: D1's 2^20)
  int repeats = 3;
  int threads = 0;
  int read_threads = 0;  // RunOptions::read_threads (0: automatic)
  bool autotune = false;
  bool read_only = false;  // only the read measurement (one thread against read_threads)
};
void bench_search(const SearchBenchOptions& options);

/// `bench search-scaling` (search_scaling.cpp): the D1 search on one GPU and on all of them.
struct SearchScalingOptions {
  std::string config = "D1", backend = "cuda", gpus, json;
  std::int64_t file_samples = std::int64_t{1} << 18;
  double dm_max = 1000;
  int repeats = 3, workers = 2, files = 1;
  bool no_kernel = false, no_search = false;
};
void bench_search_scaling(const SearchScalingOptions& options);

/// `bench ceilings` (ceilings.cpp): the device's measured copy bandwidth and fp32 rates.
void bench_ceilings(const std::string& json_path);

// `bench dedisp`: bench_dedisp() in dedisp.hpp.

}  // namespace warpbeam::bench
