// The CUDA runner of `warpbeam bench dedisp --config D1 --backend cuda [--sweep] [--autotune]`
// (bench_dedisp_cuda(), declared in bench_dedisp.hpp): the CUDA dedispersion kernels on
// DESIGN.md's D1 shape.
//
// Measures, in one run: the device ceilings; the direct kernel (dedisp's scheme, the baseline);
// the tiled and packed kernels at their default tile sizes (or a sweep of tile sizes); each
// kernel's output rows checked against the direct kernel's; optionally autotune()'s pick; and
// the end-to-end time from a D1 file written to the temp folder: read in gulps into two pinned
// buffers, copied on two streams so that the copy of gulp n+1 overlaps the dedispersion of
// gulp n; the DM-time plane stays on the GPU (not copied back), as the GPU search uses it.
// It compiles in every build; without CUDA it throws unsupported.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "bench/bench.hpp"
#include "bench/dedisp.hpp"
#include "commands.hpp"
#include "warpbeam/dedisp.hpp"
#include "warpbeam/device.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/io/output_file.hpp"
#include "warpbeam/io/sigproc.hpp"
#include "warpbeam/provenance.hpp"
#include "warpbeam/unpack.hpp"

namespace warpbeam::bench {
namespace {

using namespace warpbeam::dedisp;
using json = nlohmann::json;

// The tile sizes --sweep tries for each tiled variant ({dms_per_block, samples_per_thread,
// threads_per_block, channels_per_stage}; 0 = automatic), the default first.
constexpr CudaTuning kSweep[] = {
    {16, 16, 512, 0}, {8, 16, 256, 0}, {32, 16, 1024, 0}, {16, 32, 512, 0}, {8, 32, 512, 0},
    {8, 16, 512, 0},  {16, 8, 512, 0}, {32, 8, 1024, 0},  {16, 16, 512, 8}, {16, 16, 512, 24},
};

struct Work {
  std::int64_t nchans, ndm, nsamples_in, nout;
  double in_bytes, out_bytes, adds, data_s;
};

struct Measured {
  Algorithm requested = Algorithm::automatic;
  CudaTuning requested_tuning;
  Algorithm algorithm = Algorithm::automatic;
  CudaTuning tuning;
  std::string kernel;
  std::vector<double> seconds;  // sorted
  double median_s = 0;
  std::string error;       // non-empty: the plan could not be made
  double max_rel_err = 0;  // against the direct kernel's rows
  bool verified = false;
};

json tuning_json(const CudaTuning& t) {
  return {{"dms_per_block", t.dms_per_block},
          {"samples_per_thread", t.samples_per_thread},
          {"threads_per_block", t.threads_per_block},
          {"channels_per_stage", t.channels_per_stage}};
}

json rates(double s, const Work& w, const bench::DeviceCeilings& c, double direct_s) {
  json j = {{"seconds", s},
            {"realtime_factor", w.data_s / s},
            {"ch_dm_samples_per_s", w.adds / s},
            {"add_roofline_fraction", w.adds / c.fp32_add_per_s / s},
            {"bytes_roofline_fraction", (w.in_bytes + w.out_bytes) / c.copy_bytes_per_s / s}};
  if (direct_s > 0) j["speedup_vs_direct"] = direct_s / s;
  return j;
}

json to_json(const Measured& m, const Work& w, const bench::DeviceCeilings& c, double direct_s) {
  json j = {{"requested_algorithm", to_string(m.requested)},
            {"requested_tuning", tuning_json(m.requested_tuning)}};
  if (!m.error.empty()) {
    j["error"] = m.error;
    return j;
  }
  j["algorithm"] = to_string(m.algorithm);
  j["tuning"] = tuning_json(m.tuning);
  j["kernel"] = m.kernel;
  j["repeats"] = m.seconds.size();
  j["min_s"] = m.seconds.front();
  j["max_s"] = m.seconds.back();
  j["verified_against_direct"] = m.verified;
  j["max_rel_err_vs_direct"] = m.max_rel_err;
  j.update(rates(m.median_s, w, c, direct_s));
  return j;
}

// DM trials whose rows are checked against the direct kernel: first, middle, last.
std::vector<std::int64_t> check_rows(std::int64_t ndm) {
  return {0, ndm / 2, ndm - 1};
}

std::vector<float> copy_rows(const DeviceArray<float>& out, std::int64_t nout,
                             const std::vector<std::int64_t>& rows) {
  std::vector<float> h(rows.size() * static_cast<std::size_t>(nout));
  for (std::size_t i = 0; i < rows.size(); ++i)
    copy_bytes(h.data() + i * nout, out.data() + rows[i] * nout, nout * sizeof(float));
  return h;
}

// Times plan.execute with CUDA events on `stream`: one warm-up, then `repeats` runs.
Measured measure(const DedispersionConfig& base, Algorithm alg, const CudaTuning& tuning,
                 const DeviceArray<std::uint8_t>& in, DeviceArray<float>& out, const Stream& stream,
                 int repeats) {
  Measured m;
  m.requested = alg;
  m.requested_tuning = tuning;
  DedispersionConfig c = base;
  c.algorithm = alg;
  c.tuning = tuning;
  std::optional<DedispersionPlan> plan;
  try {
    plan.emplace(c, Backend::cuda);
  } catch (const Error& e) {
    if (e.category() == ErrorCategory::cuda) throw;
    m.error = e.what();
    return m;
  }
  m.algorithm = plan->algorithm();
  m.tuning = plan->tuning();
  m.kernel = plan->kernel_description();
  const View<const std::uint8_t, 2> vin(in.data(), {c.nsamples_in, plan->row_bytes()},
                                        Space::device);
  const View<float, 2> vout(out.data(), {plan->ndms(), plan->nsamples_out()}, Space::device);
  device_memset(out.data(), 0xFF, out.bytes());
  Event start, stop;
  plan->execute(vin, vout, &stream);
  for (int i = 0; i < repeats; ++i) {
    start.record(&stream);
    plan->execute(vin, vout, &stream);
    stop.record(&stream);
    stop.synchronize();
    m.seconds.push_back(stop.elapsed_ms_since(start) * 1e-3);
  }
  std::sort(m.seconds.begin(), m.seconds.end());
  m.median_s = m.seconds[m.seconds.size() / 2];
  return m;
}

// max over the checked rows of max|x - ref| / max|ref| (per row).
double max_rel_error(const std::vector<float>& ref, const std::vector<float>& got,
                     std::int64_t nout) {
  double worst = 0;
  for (std::size_t r = 0; r * nout < ref.size(); ++r) {
    double maxref = 0, maxerr = 0;
    for (std::int64_t t = 0; t < nout; ++t) {
      const auto i = r * nout + t;
      maxref = std::max(maxref, static_cast<double>(std::abs(ref[i])));
      const double e = std::abs(static_cast<double>(got[i]) - ref[i]);
      maxerr = std::max(maxerr, std::isnan(e) ? INFINITY : e);
    }
    worst = std::max(worst, maxref > 0 ? maxerr / maxref : maxerr);
  }
  return worst;
}

// A temporary file removed when this goes out of scope.
struct TempFile {
  std::string path;
  ~TempFile() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove(path, ec);
  }
};

// Writes the device input as a SIGPROC file (through pinned chunks).
void write_file(const std::string& path, const DedispersionConfig& c,
                const DeviceArray<std::uint8_t>& in, std::int64_t row) {
  io::FilterbankHeader h;
  h.source_name = "warpbeam bench D1 (random 8-bit)";
  h.nchans = c.nchans;
  h.nbits = c.nbits;
  h.fch1 = c.fch1_mhz;
  h.foff = c.foff_mhz;
  h.tsamp = c.tsamp_s;
  h.tstart = 60000.0;
  io::FilterbankWriter w(path, h);
  const std::int64_t chunk_rows = 1 << 16;
  PinnedArray<std::uint8_t> buf(static_cast<std::size_t>(chunk_rows * row));
  for (std::int64_t t = 0; t < c.nsamples_in; t += chunk_rows) {
    const std::int64_t rows = std::min(chunk_rows, c.nsamples_in - t);
    copy_bytes(buf.data(), in.data() + t * row, static_cast<std::size_t>(rows * row));
    w.write_raw(buf.data(), static_cast<std::size_t>(rows * row));
  }
  w.commit();
}

struct FileRun {
  std::vector<double> seconds;
  double median_s = 0;
  std::int64_t gulp = 0;
  std::int64_t ngulps = 0;
};

// Streams the file through the GPU: gulp n of `gulp` output samples needs samples
// [n*gulp, n*gulp + gulp + max_delay); it is read into pinned buffer n%2 (after the copy that
// last used it finished), copied on stream n%2 and dedispersed there by that stream's plan, so
// the read and copy of gulp n+1 overlap the kernels of gulp n. The timing starts at opening the
// file and ends when both streams are done; plans and buffers are made before (a pipeline
// makes them once).
FileRun run_from_file(const DedispersionConfig& base, const std::string& path, std::int64_t gulp,
                      int repeats) {
  const io::FilterbankHeader h = io::read_filterbank_header(path);
  const auto delays = delay_table(base);
  const std::int64_t maxd = *std::max_element(delays.begin(), delays.end());
  const std::int64_t nout_total = h.nsamples - maxd;
  FileRun fr;
  fr.gulp = std::min(gulp, nout_total);
  fr.ngulps = (nout_total + fr.gulp - 1) / fr.gulp;
  const std::int64_t tail = nout_total - (fr.ngulps - 1) * fr.gulp;
  DedispersionConfig cg = base;
  cg.nsamples_in = fr.gulp + maxd;
  DedispersionPlan plan0(cg, Backend::cuda), plan1(cg, Backend::cuda);
  std::optional<DedispersionPlan> plan_tail;
  if (tail != fr.gulp) {
    DedispersionConfig ct = base;
    ct.nsamples_in = tail + maxd;
    plan_tail.emplace(ct, Backend::cuda);
  }
  const auto row = static_cast<std::int64_t>(h.bytes_per_sample());
  const auto in_bytes = static_cast<std::size_t>((fr.gulp + maxd) * row);
  const auto ndm = static_cast<std::int64_t>(base.dms.size());
  PinnedArray<std::uint8_t> pin0(in_bytes), pin1(in_bytes);
  DeviceArray<std::uint8_t> din0(in_bytes), din1(in_bytes);
  DeviceArray<float> dout0(static_cast<std::size_t>(ndm * fr.gulp)),
      dout1(static_cast<std::size_t>(ndm * fr.gulp));
  Stream s0, s1;
  Event copied0, copied1;
  auto once = [&] {
    io::FilterbankReader reader(path);
    for (std::int64_t n = 0; n < fr.ngulps; ++n) {
      const bool odd = n % 2 == 1;
      PinnedArray<std::uint8_t>& pin = odd ? pin1 : pin0;
      DeviceArray<std::uint8_t>& din = odd ? din1 : din0;
      DeviceArray<float>& dout = odd ? dout1 : dout0;
      Stream& s = odd ? s1 : s0;
      Event& copied = odd ? copied1 : copied0;
      if (n >= 2) copied.synchronize();  // the copy out of this pinned buffer is done
      const bool last = n == fr.ngulps - 1;
      const std::int64_t nout = last ? tail : fr.gulp;
      const std::int64_t rows = nout + maxd;
      reader.seek(n * fr.gulp);
      if (reader.read_raw(rows, pin.data()) != rows)
        fail(ErrorCategory::io, "{}: short read at sample {}", path, n * fr.gulp);
      copy_bytes(din.data(), pin.data(), static_cast<std::size_t>(rows * row), &s);
      copied.record(&s);
      const DedispersionPlan& plan = (last && plan_tail) ? *plan_tail : (odd ? plan1 : plan0);
      plan.execute(View<const std::uint8_t, 2>(din.data(), {rows, row}, Space::device),
                   View<float, 2>(dout.data(), {ndm, nout}, Space::device), &s);
    }
    s0.synchronize();
    s1.synchronize();
  };
  const bench::Timing t = bench::time_host(once, 1, repeats);
  fr.median_s = t.median_s;
  fr.seconds = {t.min_s, t.median_s, t.max_s};
  return fr;
}

}  // namespace

json bench_dedisp_cuda(const DedispBenchRequest& o) {
  if (!cuda_built()) fail(ErrorCategory::unsupported, "this warpbeam build has no CUDA backend");
  if (!cuda_available()) fail(ErrorCategory::cuda, "no CUDA device is visible");
  const Algorithm only = o.algorithm == "all" ? Algorithm::automatic : parse_algorithm(o.algorithm);

  const DedispBenchSetup setup = dedisp_bench_setup(o.config);
  DedispersionConfig c = setup.config;
  const std::int64_t maxd = setup.max_delay;
  // --nsamples counts output samples, as for the CPU; the default is all of D1 (2^20 input).
  c.nsamples_in = o.nsamples > 0 ? o.nsamples + maxd : setup.nsamples_in_full;
  c.validate();
  const std::int64_t gulp = o.gulp > 0 ? o.gulp : std::int64_t{1} << 17;
  const bool sweep = o.cuda_sweep;
  Work w;
  w.nchans = c.nchans;
  w.ndm = static_cast<std::int64_t>(c.dms.size());
  w.nsamples_in = c.nsamples_in;
  w.nout = c.nsamples_in - maxd;
  const auto row = static_cast<std::int64_t>(packed_bytes(c.nbits, c.nchans));
  w.in_bytes = static_cast<double>(c.nsamples_in * row);
  w.out_bytes = 4.0 * static_cast<double>(w.ndm * w.nout);
  w.adds = static_cast<double>(w.nchans) * static_cast<double>(w.ndm) * static_cast<double>(w.nout);
  w.data_s = static_cast<double>(c.nsamples_in) * c.tsamp_s;

  fmt::print(stderr, "bench dedisp cuda: measuring the device ceilings\n");
  const bench::DeviceCeilings ceil = bench::measure_device_ceilings();
  DeviceArray<std::uint8_t> in(static_cast<std::size_t>(c.nsamples_in * row));
  DeviceArray<float> out(static_cast<std::size_t>(w.ndm * w.nout));
  random_device_bytes(in.data(), in.size(), 20240601);
  Stream stream;

  fmt::print(stderr, "bench dedisp cuda: direct kernel (baseline)\n");
  Measured direct = measure(c, Algorithm::direct, {}, in, out, stream, o.repeats);
  if (!direct.error.empty()) fail(ErrorCategory::unsupported, "direct kernel: {}", direct.error);
  direct.verified = true;
  const auto rows = check_rows(w.ndm);
  const auto ref = copy_rows(out, w.nout, rows);

  std::vector<Algorithm> algs;
  if (only == Algorithm::automatic && o.algorithm == "all")
    algs = {Algorithm::tiled, Algorithm::packed};
  else if (only != Algorithm::direct)
    algs = {only};
  std::vector<Measured> variants;
  bool all_match = true;
  auto check = [&](Measured& m) {
    if (!m.error.empty()) return;
    m.max_rel_err = max_rel_error(ref, copy_rows(out, w.nout, rows), w.nout);
    m.verified = m.max_rel_err <= 1e-5;
    all_match = all_match && m.verified;
  };
  for (Algorithm a : algs) {
    const std::vector<CudaTuning> tunings =
        sweep ? std::vector<CudaTuning>(std::begin(kSweep), std::end(kSweep))
              : std::vector<CudaTuning>{CudaTuning{}};
    for (const CudaTuning& t : tunings) {
      fmt::print(stderr, "bench dedisp cuda: {} dms {} samples {} threads {} channels {}\n",
                 to_string(a), t.dms_per_block, t.samples_per_thread, t.threads_per_block,
                 t.channels_per_stage);
      variants.push_back(measure(c, a, t, in, out, stream, o.repeats));
      check(variants.back());
    }
  }

  std::optional<AutotuneResult> tuned;
  std::optional<Measured> tuned_run;
  if (o.autotune) {
    fmt::print(stderr, "bench dedisp cuda: autotune\n");
    DedispersionConfig ca = c;
    ca.algorithm = only == Algorithm::direct ? Algorithm::automatic : only;
    tuned = autotune(ca);
    tuned_run = measure(c, tuned->algorithm, tuned->tuning, in, out, stream, o.repeats);
    check(*tuned_run);
  }

  // The fastest verified kernel (the autotuned one when asked for) runs the file.
  const Measured* best = &direct;
  for (const auto& m : variants)
    if (m.error.empty() && m.verified && m.median_s < best->median_s) best = &m;
  if (tuned_run && tuned_run->error.empty() && tuned_run->verified) best = &*tuned_run;

  std::optional<FileRun> file;
  if (o.end_to_end) {
    TempFile tmp{(std::filesystem::temp_directory_path() /
                  fmt::format("warpbeam-bench-d1-{}.fil", static_cast<long>(getpid())))
                     .string()};
    fmt::print(stderr, "bench dedisp cuda: writing {} ({:.2f} GB)\n", tmp.path, w.in_bytes / 1e9);
    write_file(tmp.path, c, in, row);
    DedispersionConfig cb = c;
    cb.algorithm = best->algorithm;
    cb.tuning = best->tuning;
    fmt::print(stderr, "bench dedisp cuda: end to end from the file ({})\n",
               to_string(cb.algorithm));
    file = run_from_file(cb, tmp.path, gulp, o.repeats);
  }

  // Report.
  fmt::print(
      "D1 dedispersion on the GPU: {} ch x {} DM x {} output samples, {:.3g} adds, "
      "{:.1f} s of data\n",
      w.nchans, w.ndm, w.nout, w.adds, w.data_s);
  fmt::print("ceilings: copy {:.2f} TB/s, fp32 add {:.2f} T/s\n", ceil.copy_bytes_per_s / 1e12,
             ceil.fp32_add_per_s / 1e12);
  fmt::print("{:<8} {:>4} {:>4} {:>5} {:>4} {:>9} {:>9} {:>10} {:>7} {:>7} {:>8}  {}\n", "kernel",
             "dms", "K", "thr", "ch", "median s", "x real", "chDMs/s", "add %", "bytes %",
             "x direct", "check");
  auto line = [&](const Measured& m) {
    if (!m.error.empty()) {
      fmt::print("{:<8} {:>4} {:>4} {:>5} {:>4}  not run: {}\n", to_string(m.requested),
                 m.requested_tuning.dms_per_block, m.requested_tuning.samples_per_thread,
                 m.requested_tuning.threads_per_block, m.requested_tuning.channels_per_stage,
                 m.error);
      return;
    }
    fmt::print(
        "{:<8} {:>4} {:>4} {:>5} {:>4} {:>9.4f} {:>9.1f} {:>10.3g} {:>7.1f} {:>7.1f} {:>8.2f}  "
        "{}\n",
        to_string(m.algorithm), m.tuning.dms_per_block, m.tuning.samples_per_thread,
        m.tuning.threads_per_block, m.tuning.channels_per_stage, m.median_s, w.data_s / m.median_s,
        w.adds / m.median_s, 100 * w.adds / ceil.fp32_add_per_s / m.median_s,
        100 * (w.in_bytes + w.out_bytes) / ceil.copy_bytes_per_s / m.median_s,
        direct.median_s / m.median_s,
        m.verified ? "ok" : fmt::format("MISMATCH {:.2g}", m.max_rel_err));
  };
  line(direct);
  for (const auto& m : variants)
    line(m);
  if (tuned_run) {
    fmt::print("autotune ({}): ", tuned->from_cache ? "cached" : "measured");
    line(*tuned_run);
  }
  std::string summary = fmt::format(
      "dedisp D1 cuda: {} kernel {:.4f} s ({:.3g} ch*DM*samples/s, {:.0f}x real time, {:.1f}% of "
      "the fp32 add roofline), {:.2f}x the direct kernel ({:.3f} s)",
      to_string(best->algorithm), best->median_s, w.adds / best->median_s,
      w.data_s / best->median_s, 100 * w.adds / ceil.fp32_add_per_s / best->median_s,
      direct.median_s / best->median_s, direct.median_s);
  if (file)
    summary += fmt::format("; end to end from file {:.3f} s ({:.0f}x real time)", file->median_s,
                           w.data_s / file->median_s);
  if (!all_match) summary += "; MISMATCH against the direct kernel";
  fmt::print("{}\n", summary);

  json j = dedisp_bench_record(setup, "cuda", w.nout, best->median_s);
  j.update(json{{"summary", summary},
                {"shape",
                 {{"nchans", w.nchans},
                  {"ndm", w.ndm},
                  {"nsamples_in", w.nsamples_in},
                  {"nsamples_out", w.nout},
                  {"max_delay", maxd},
                  {"nbits", c.nbits},
                  {"fch1_mhz", c.fch1_mhz},
                  {"foff_mhz", c.foff_mhz},
                  {"tsamp_s", c.tsamp_s},
                  {"input_bytes", w.in_bytes},
                  {"output_bytes_float32", w.out_bytes},
                  {"adds", w.adds},
                  {"data_seconds", w.data_s}}},
                {"parameters",
                 {{"algorithm", o.algorithm},
                  {"sweep", sweep},
                  {"autotune", o.autotune},
                  {"repeats", o.repeats},
                  {"input_seed", 20240601},
                  {"timing",
                   "CUDA events around execute() (corner turn included), median after "
                   "one warm-up"}}},
                {"ceilings", bench::to_json(ceil)},
                {"direct", to_json(direct, w, ceil, 0)},
                {"verification", {{"rows", rows}, {"tolerance", 1e-5}, {"all_match", all_match}}}});
  j["variant"] = to_string(best->algorithm);
  json vs = json::array();
  for (const auto& m : variants)
    vs.push_back(to_json(m, w, ceil, direct.median_s));
  j["variants"] = vs;
  j["best"] = to_json(*best, w, ceil, direct.median_s);
  if (tuned) {
    j["autotune"] = to_json(*tuned_run, w, ceil, direct.median_s);
    j["autotune"]["from_cache"] = tuned->from_cache;
    j["autotune"]["cache_key"] = tuned->key;
    j["autotune"]["cache_path"] = tuned->cache_path;
  }
  if (file) {
    j["end_to_end"] = rates(file->median_s, w, ceil, 0);
    j["end_to_end"]["gulp_output_samples"] = file->gulp;
    j["end_to_end"]["gulps"] = file->ngulps;
    j["end_to_end"]["min_median_max_s"] = file->seconds;
    j["end_to_end"]["algorithm"] = to_string(best->algorithm);
    j["end_to_end"]["method"] =
        "file in the temp folder (just written, so in the page cache), read in gulps into two "
        "pinned buffers, H2D on two streams overlapping the kernels; DM-time plane left on "
        "the GPU (not copied back); plans made before timing";
  }
  if (!all_match)
    j["failed"] = "a kernel's output differs from the direct kernel's (see the table)";
  return j;
}

}  // namespace warpbeam::bench
