// `warpbeam das IN --grid ... --out ...`: delay-and-sum of ultrasound channel data (.mat or UFF)
// onto a 2-D or 3-D grid, with PyMUST's B-mode chain (RF -> IQ demodulation, DAS, envelope,
// log compression). Products: PNG (B-mode of one frame; a slice for volumes), NumPy .npy or HDF5
// (envelope [batch][nz][ny][nx]), each with a JSON side file of parameters and provenance.
//
// --beamform rf beamforms the RF samples themselves (linear interpolation of the real signal)
// and takes the envelope from the analytic signal of the beamformed RF along depth. I/Q is the
// default because linear interpolation of RF needs several samples per carrier period: at
// PyMUST's fs = 1.33 fc (PWI_disk.mat) it is poor (Pearson ~0.5 against PyMUST's B-mode instead
// of ~0.9), and the depth step must also sample the two-way carrier (dz < lambda / 4).
#include <algorithm>
#include <climits>
#include <cmath>
#include <filesystem>
#include <type_traits>

#include <fmt/format.h>

#include "commands.hpp"
#include "warpbeam/das.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/io/image.hpp"
#include "warpbeam/io/output_file.hpp"
#include "warpbeam/io/ultrasound.hpp"
#include "warpbeam/provenance.hpp"

namespace warpbeam::cli {

namespace {

void detail_budget(std::int64_t bytes, std::int64_t budget, const std::string& what) {
  if (bytes > budget)
    fail(ErrorCategory::invalid_argument,
         "{} need {:.0f} MiB, more than --memory {:.0f} MiB: a coarser --grid step or a smaller "
         "grid (or raise --memory)",
         what, bytes / 1048576.0, budget / 1048576.0);
}

struct DasOptions {
  std::string input, grid, out, npy, backend = "auto", algorithm = "auto", storage = "fp32";
  std::string window = "boxcar", slice, beamform = "iq";
  double fnumber = -1;  // < 0: not given (full aperture)
  bool fnumber_given = false;
  double tukey_alpha = 0.5, dynamic_range = 30, bandwidth = -1, c = 0, memory_mib = 2048;
  bool c_given = false;
  int frame = 0;
};

// Runs the plan on host data (through the device for the cuda backend).
template <class T>
void beamform(const das::DasPlan& plan, const std::vector<T>& in,
              std::vector<std::complex<float>>& out) {
  if (plan.backend() == Backend::cuda) {
    DeviceArray<T> din(in.size());
    DeviceArray<std::complex<float>> dout(out.size());
    copy_bytes(din.data(), in.data(), din.bytes());
    plan.execute(View<const T, 4>(din.data(), plan.input_shape(), Space::device),
                 View<std::complex<float>, 2>(dout.data(), plan.output_shape(), Space::device));
    copy_bytes(out.data(), dout.data(), dout.bytes());
  } else {
    plan.execute(View<const T, 4>(in.data(), plan.input_shape()),
                 View<std::complex<float>, 2>(out.data(), plan.output_shape()));
  }
}

// NaN or infinite samples (a dead channel, a bad conversion) spread through every voxel they
// reach: they are zeroed, counted and reported (10 NaNs in one element made 56 % of an image NaN).
template <class T>
std::int64_t zero_nonfinite(std::vector<T>& v) {
  std::int64_t n = 0;
  for (auto& x : v) {
    bool bad;
    if constexpr (std::is_same_v<T, float>)
      bad = !std::isfinite(x);
    else
      bad = !std::isfinite(x.real()) || !std::isfinite(x.imag());
    if (bad) x = T{}, ++n;
  }
  return n;
}

std::string extension(const std::string& path) {
  return std::filesystem::path(path).extension().string();
}

void run_das(const DasOptions& o) {
  // Option values first (exit 2), then the file (exit 1).
  const das::Grid grid = das::parse_grid(o.grid);
  if (o.fnumber_given && !(o.fnumber > 0))
    fail(ErrorCategory::invalid_argument, "--fnumber = {} must be > 0 (omit it for full aperture)",
         o.fnumber);
  if (o.c_given && !(o.c > 0 && o.c <= 1e5))
    fail(ErrorCategory::invalid_argument, "--c = {} m/s must be a sound speed in (0, 1e5]", o.c);
  if (!(o.memory_mib > 0 && o.memory_mib < 1e9))
    fail(ErrorCategory::invalid_argument, "--memory = {} MiB must be > 0", o.memory_mib);
  const auto budget = static_cast<std::int64_t>(o.memory_mib * (1 << 20));
  // The grid against the budget before its voxels are listed (a 1e-6 m step over 20 x 30 mm
  // grew to 15 GB and was killed; 1e-9 ended in a bare std::bad_alloc).
  detail_budget(grid.size() * static_cast<std::int64_t>(sizeof(das::Vec3) + 16), budget,
                fmt::format("the grid's {} voxels", grid.size()));
  if (!(o.dynamic_range > 0))
    fail(ErrorCategory::invalid_argument, "--dynamic-range = {} dB must be > 0", o.dynamic_range);
  const std::string ext = extension(o.out);
  if (ext != ".png" && ext != ".npy" && ext != ".h5" && ext != ".hdf5")
    fail(ErrorCategory::invalid_argument, "--out {}: expected .png, .npy, .h5 or .hdf5", o.out);
  if (!o.npy.empty() && extension(o.npy) != ".npy")
    fail(ErrorCategory::invalid_argument, "--npy {}: expected a .npy file", o.npy);
  // The products must be writable and must not be the input, before the beamforming.
  io::check_outputs({o.out, o.npy, o.out + ".json"}, {o.input});
  das::SliceAxis axis = das::SliceAxis::y;
  std::int64_t slice_index = -1;
  if (!o.slice.empty()) {
    const auto colon = o.slice.find(':');
    const std::string a = o.slice.substr(0, colon);
    if (colon == std::string::npos || (a != "x" && a != "y" && a != "z"))
      fail(ErrorCategory::invalid_argument, "--slice '{}' must be x:INDEX, y:INDEX or z:INDEX",
           o.slice);
    axis = a == "x" ? das::SliceAxis::x : a == "y" ? das::SliceAxis::y : das::SliceAxis::z;
    slice_index = std::stoll(o.slice.substr(colon + 1));
  }
  das::DasConfig c;
  c.algorithm = das::parse_algorithm(o.algorithm);
  c.storage = das::parse_storage(o.storage);
  c.window = das::parse_window(o.window);
  c.tukey_alpha = o.tukey_alpha;
  if (o.fnumber_given) c.fnumber = o.fnumber;

  io::UltrasoundData d = io::read_ultrasound(o.input);
  const std::int64_t nonfinite = zero_nonfinite(d.rf) + zero_nonfinite(d.iq);
  if (nonfinite > 0)
    warnf(
        "das: {} holds {} NaN or infinite samples: they are set to 0 (see the JSON's "
        "nonfinite_samples_zeroed)",
        o.input, nonfinite);
  // The products and the plan's tables for this file: voxels and transmit delays (doubles),
  // output, envelope and image per frame.
  {
    const std::int64_t ntx = std::max<std::int64_t>(1, d.ntx),
                       batch = std::max<std::int64_t>(1, d.batch);
    const double per_voxel = static_cast<double>(sizeof(das::Vec3)) + 8.0 * ntx + 24.0 * batch;
    const double bytes = per_voxel * static_cast<double>(grid.size());
    detail_budget(
        bytes < 9e18 ? static_cast<std::int64_t>(bytes) : INT64_MAX, budget,
        fmt::format("imaging {} frames of {} transmits on {} voxels", batch, ntx, grid.size()));
  }
  c.voxels = grid.voxels();
  if (o.frame < 0 || o.frame >= d.batch)
    fail(ErrorCategory::invalid_argument, "--frame {} is outside [0, {}]", o.frame, d.batch - 1);
  const bool rf_mode = o.beamform == "rf";
  if (rf_mode && d.signal != das::Signal::rf)
    fail(ErrorCategory::invalid_argument,
         "--beamform rf needs RF channel data, but {} holds I/Q: beamform it as I/Q", o.input);
  c.signal = rf_mode ? das::Signal::rf : das::Signal::iq;
  c.batch = d.batch;
  c.nsamples = d.nsamples;
  c.fs = d.fs;
  c.fc = d.fc;
  c.t0 = d.t0;
  c.c = o.c_given ? o.c : d.c;
  c.probe = d.probe;
  c.transmits = d.transmits;
  std::vector<std::complex<float>> iq;
  double bandwidth = o.bandwidth > 0 ? o.bandwidth : d.bandwidth;
  if (rf_mode) {
    if (grid.z.size() < 2)
      fail(ErrorCategory::invalid_argument,
           "--beamform rf takes the envelope along depth: the grid needs >= 2 depths");
    const double lambda = c.c / d.fc;
    if (d.fc > 0 && grid.z.step >= lambda / 4)
      warnf(
          "das: the depth step {:.3g} m is >= lambda / 4 = {:.3g} m: the beamformed RF carrier "
          "aliases along depth and its envelope is unreliable (use a finer z step, or I/Q)",
          grid.z.step, lambda / 4);
  } else if (d.signal == das::Signal::iq) {
    iq = d.iq;
  } else {
    if (!(d.fc > 0)) fail(ErrorCategory::format, "{}: RF data without a centre frequency", o.input);
    // PyMUST's rf2iq: Wn = bandwidth * fc / fs, or min(2 fc / fs, 0.5) without a bandwidth.
    iq = das::rf_to_iq(d.rf.data(), d.batch * d.nrx * d.ntx, d.nsamples, d.fs, d.fc, d.t0,
                       bandwidth > 0 ? bandwidth : 0);
  }
  das::DasPlan plan(c, parse_backend(o.backend));
  std::vector<std::complex<float>> out(static_cast<std::size_t>(c.batch * c.nvoxels()));
  if (rf_mode)
    beamform(plan, d.rf, out);
  else
    beamform(plan, iq, out);
  // An image of zeros means no element took part (an f-number so large that the receive aperture,
  // depth / f-number wide, holds no element): an error, not a black PNG.
  const std::int64_t zero_voxels = std::count(out.begin(), out.end(), std::complex<float>{});
  if (zero_voxels == static_cast<std::int64_t>(out.size()))
    fail(ErrorCategory::invalid_argument,
         "every voxel is 0: {}no channel data reach the grid (check --grid against the probe "
         "and the recorded depths)",
         o.fnumber_given ? fmt::format("with --fnumber {} the receive aperture (depth / f-number "
                                       "wide) holds no element, or ",
                                       o.fnumber)
                         : "");
  if (zero_voxels > 0 && o.fnumber_given)
    warnf("das: {} of {} voxels are 0 (no element in their receive aperture at --fnumber {})",
          zero_voxels, out.size(), o.fnumber);
  const auto shape = grid.shape();
  std::vector<float> env;
  if (rf_mode) {
    // The beamformed RF is real (imaginary parts 0): envelope from its analytic signal along z.
    std::vector<float> re(out.size());
    for (std::size_t i = 0; i < out.size(); ++i)
      re[i] = out[i].real();
    env = das::envelope_along_depth(re.data(), c.batch, shape[0], shape[1], shape[2]);
  } else {
    env = das::envelope(out.data(), static_cast<std::int64_t>(out.size()));
  }
  const std::vector<std::int64_t> vshape = {c.batch, shape[0], shape[1], shape[2]};
  nlohmann::json meta = {
      {"input", o.input},
      {"grid", o.grid},
      {"shape_batch_z_y_x", vshape},
      {"fnumber", o.fnumber_given ? nlohmann::json(o.fnumber) : nlohmann::json(nullptr)},
      {"window", o.window},
      {"tukey_alpha", o.tukey_alpha},
      {"beamformed", rf_mode ? "rf" : "iq"},
      {"envelope", rf_mode ? "analytic signal of the beamformed RF along depth (FFT)"
                           : "magnitude of the beamformed I/Q"},
      {"demodulated_bandwidth", !rf_mode && d.signal == das::Signal::rf ? bandwidth : 0.0},
      {"dynamic_range_db", o.dynamic_range},
      {"backend", std::string(to_string(plan.backend()))},
      {"algorithm", std::string(das::to_string(plan.algorithm()))},
      {"storage", o.storage},
      {"sound_speed", c.c},
      {"nonfinite_samples_zeroed", nonfinite},
      {"zero_voxels", zero_voxels},
      {"provenance", provenance()}};
  io::StagedOutputs staged;  // the product, --npy and the JSON: all or none
  if (ext == ".png") {
    const auto levels = das::bmode_levels(env, o.dynamic_range);  // max over all frames
    const std::int64_t per = shape[0] * shape[1] * shape[2];
    std::vector<float> frame(levels.begin() + o.frame * per, levels.begin() + (o.frame + 1) * per);
    std::int64_t rows = shape[0], cols = shape[2];
    if (!grid.is_2d()) {
      if (slice_index < 0) slice_index = shape[1] / 2;
      frame = das::slice(frame, shape, axis, slice_index, &rows, &cols);
      meta["slice"] = {{"axis", axis == das::SliceAxis::x   ? "x"
                                : axis == das::SliceAxis::y ? "y"
                                                            : "z"},
                       {"index", slice_index}};
    }
    meta["frame"] = o.frame;
    io::write_png(staged.temp(o.out), frame.data(), static_cast<int>(rows), static_cast<int>(cols),
                  0.f, 255.f);
  } else if (ext == ".npy") {
    io::write_npy(staged.temp(o.out), env.data(), vshape);
  } else {
    io::write_hdf5_volume(staged.temp(o.out), "envelope", env.data(), vshape,
                          {{"x_start", grid.x.start},
                           {"x_step", grid.x.step},
                           {"y_start", grid.y.start},
                           {"y_step", grid.y.step},
                           {"z_start", grid.z.start},
                           {"z_step", grid.z.step}},
                          meta);
  }
  if (!o.npy.empty()) io::write_npy(staged.temp(o.npy), env.data(), vshape);
  io::write_text_file(staged.temp(o.out + ".json"), meta.dump(2) + "\n");
  staged.commit();
  fmt::print("das: {} frames x {} voxels x {} rx x {} tx ({} {}) -> {}\n", c.batch, c.nvoxels(),
             c.nrx(), c.ntx(), to_string(plan.backend()), das::to_string(plan.algorithm()), o.out);
}

}  // namespace

void add_das_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "das", "Delay-and-sum beamforming of ultrasound channel data (.mat or UFF) to a B-mode");
  auto o = std::make_shared<DasOptions>();
  cmd->add_option("IN", o->input, "Channel data: Verasonics/PyMUST .mat or UFF (.uff)")->required();
  cmd->add_option("--grid", o->grid,
                  "Grid in metres: x0:x1:dx,z0:z1:dz (2-D) or x0:x1:dx,y0:y1:dy,z0:z1:dz")
      ->required();
  cmd->add_option("--out", o->out, "Product: .png (B-mode), .npy or .h5 (envelope volume)")
      ->required();
  cmd->add_option("--npy", o->npy, "Also write the envelope [batch][z][y][x] as .npy");
  auto* fn = cmd->add_option("--fnumber", o->fnumber,
                             "Receive f-number (> 0); omit for the full aperture");
  cmd->add_option("--window", o->window, "Receive window: boxcar, hann or tukey")
      ->capture_default_str();
  cmd->add_option("--tukey-alpha", o->tukey_alpha, "Tukey taper fraction (0, 1]")
      ->capture_default_str();
  cmd->add_option("--algorithm", o->algorithm, "CUDA variant: auto, bl, bi, tc, tcw")
      ->capture_default_str();
  cmd->add_option("--storage", o->storage, "CUDA channel-data storage: fp32 or fp16")
      ->capture_default_str();
  cmd->add_option("--dynamic-range", o->dynamic_range, "B-mode dynamic range (dB)")
      ->capture_default_str();
  cmd->add_option("--beamform", o->beamform,
                  "What to beamform: iq (RF files are demodulated first, PyMUST's chain) or rf "
                  "(the RF itself; envelope from the analytic signal along depth; needs several "
                  "samples per carrier period and dz < lambda/4)")
      ->check(CLI::IsMember({"iq", "rf"}))
      ->capture_default_str();
  cmd->add_option("--bandwidth", o->bandwidth,
                  "Fractional bandwidth for the RF -> IQ low-pass (default: from the file)");
  cmd->add_option("--c", o->c, "Sound speed override (m/s, > 0)")->each([o](const std::string&) {
    o->c_given = true;
  });
  cmd->add_option("--memory", o->memory_mib,
                  "Memory budget for the grid, the delay tables and the products (MiB)")
      ->capture_default_str();
  cmd->add_option("--frame", o->frame, "Frame shown in the PNG")->capture_default_str();
  cmd->add_option("--slice", o->slice, "Slice of a volume for the PNG: x:I, y:I or z:I");
  add_backend_option(*cmd, o->backend);
  cmd->callback([o, fn] {
    o->fnumber_given = fn->count() > 0;
    run_das(*o);
  });
}

}  // namespace warpbeam::cli
