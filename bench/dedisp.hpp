#pragma once
// `warpbeam bench dedisp --config D1 --backend cpu|cuda`: shared pieces of the dedispersion
// benchmark, so that each backend's runner lives in its own file:
//   dedisp.cpp       bench_dedisp(), the D1 set-up, the record, the CPU runner
//   dedisp_cuda.cpp  the CUDA runner, bench_dedisp_cuda() (in every build: without CUDA it
//                    throws unsupported)
// The search benchmarks (search.cpp, search_scaling.cpp) take D1's shape from here too.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/bench.hpp"
#include "warpbeam/core.hpp"
#include "warpbeam/dedisp.hpp"

namespace warpbeam::bench {

/// What the user asked for on the command line.
struct DedispBenchRequest {
  std::string config = "D1";  ///< reference configuration (DESIGN.md)
  std::int64_t nsamples = 0;  ///< output samples to time; 0: all of the configuration's
  std::int64_t gulp = 0;      ///< output samples per execute(); 0: the backend's default
  int repeats = 3;            ///< timed repeats (of the whole run, or per gulp on the CPU)
  int threads = 0;            ///< CPU threads (0: OpenMP's default)
  bool sweep = true;          ///< also try a few tile sizes and report the best (CPU)
  // CUDA runner:
  bool cuda_sweep = false;        ///< --sweep: time 10 tile sizes of each tiled kernel
  bool autotune = false;          ///< --autotune: run dedisp::autotune() and time its pick
  std::string algorithm = "all";  ///< kernels besides the direct baseline: all, tiled, packed
  bool end_to_end = true;         ///< also stream a D1 file through the GPU (--no-file: skip)
  std::string backend = "cpu";    ///< cpu, cuda or auto
  std::string json;               ///< write the record here ("": only the summary on stdout)
};

/// Runs the CPU or the CUDA runner (by request.backend), prints the summary, writes the record
/// with provenance to request.json; throws Error(cuda) when a kernel failed its check.
void bench_dedisp(const DedispBenchRequest& request);

/// A reference configuration as a dedispersion problem.
struct DedispBenchSetup {
  std::string name;                    ///< "D1"
  dedisp::DedispersionConfig config;   ///< nsamples_in is left to the runner (its gulp)
  std::int64_t nsamples_in_full = 0;   ///< the configuration's input samples (D1: 2^20)
  std::int64_t nsamples_out_full = 0;  ///< its valid output samples (D1: 1,032,380)
  std::int32_t max_delay = 0;          ///< samples
};

/// D1 (the only dedispersion configuration so far): 1024 ch, fch1 1500 MHz, foff -0.29296875 MHz,
/// tsamp 64 us, 8-bit, 2^20 samples, DM 0-1000 by dedisp's rule (40 us, tolerance 1.25: 1122
/// trials). Throws invalid_argument for another name.
DedispBenchSetup dedisp_bench_setup(const std::string& name);

/// The figures every backend reports for `nsamples_out` output samples dedispersed in
/// `seconds`: the JSON record (benchmark, config, backend, shape, seconds, throughput in
/// channel*DM*samples/s and DM*samples/s, real-time factor, seconds extrapolated to the full
/// configuration) with a one-line "summary"; the caller adds its own fields (variant, sweep,
/// roofline, baseline) and "provenance".
nlohmann::json dedisp_bench_record(const DedispBenchSetup& setup, const std::string& backend,
                                   std::int64_t nsamples_out, double seconds);

/// Deterministic random 8-bit input of `nsamples_in` rows for the configuration.
std::vector<std::uint8_t> dedisp_bench_input(const DedispBenchSetup& setup,
                                             std::int64_t nsamples_in);

/// CPU runner (dedisp.cpp): tiled kernel over gulps, the direct loop as the baseline
/// variant, a small sweep of tile sizes. Returns the record (without provenance).
nlohmann::json bench_dedisp_cpu(const DedispBenchRequest& request);

/// CUDA runner (dedisp_cuda.cpp): the direct kernel (dedisp's scheme, the baseline),
/// the tiled and packed kernels at their defaults (or a sweep), optionally autotune()'s pick,
/// each checked against the direct kernel, and the end-to-end time from a D1 file. Prints its
/// table on stdout and returns the record (without provenance). Throws unsupported in a build
/// without CUDA, cuda when no device is visible.
nlohmann::json bench_dedisp_cuda(const DedispBenchRequest& request);

}  // namespace warpbeam::bench
