// EPIC over several devices: one EpicPlan per channel block (see warpbeam/dist/epic.hpp).
#include "warpbeam/dist/epic.hpp"

#include <omp.h>

#include <cmath>
#include <exception>
#include <thread>

#include "warpbeam/device.hpp"
#include "warpbeam/dist/work.hpp"
#include "warpbeam/format.hpp"

namespace warpbeam::dist {

namespace {

// Runs f(k) for every k < n, in one thread each when n > 1; rethrows the first error (by k).
template <class F>
void for_each_block(std::size_t n, F&& f) {
  std::vector<std::exception_ptr> errors(n);
  auto run = [&](std::size_t k) {
    try {
      f(k);
    } catch (...) {
      errors[k] = std::current_exception();
    }
  };
  if (n == 1) {
    run(0);
  } else {
    std::vector<std::thread> threads;
    for (std::size_t k = 0; k < n; ++k)
      threads.emplace_back(run, k);
    for (auto& t : threads)
      t.join();
  }
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace

struct MultiEpicPlan::Block {
  // The block's plan and buffers are released on their own device, whichever is current.
  ~Block() {
    try {
      if (device >= 0) set_device(device);
    } catch (...) {  // nothing better to do in a destructor
    }
  }
  int first = 0, last = 0, device = -1;
  std::unique_ptr<epic::EpicPlan> plan;
  DeviceArray<std::uint8_t> in;  // CUDA: the block's input and output on its device
  DeviceArray<float> out;
};

epic::EpicConfig channel_block(const epic::EpicConfig& c, int first, int last) {
  if (first < 0 || last <= first || last > c.nchan)
    fail(ErrorCategory::invalid_argument, "channel block [{}, {}) of {} channels", first, last,
         c.nchan);
  const double du = c.cell_wavelengths();
  epic::EpicConfig b = c;
  b.nchan = last - first;
  b.freqs_hz.assign(c.freqs_hz.begin() + first, c.freqs_hz.begin() + last);
  if (!c.calibration.empty()) {
    const std::size_t per_chan = static_cast<std::size_t>(c.nstand) * 2;
    b.calibration.assign(c.calibration.begin() + static_cast<std::ptrdiff_t>(first * per_chan),
                         c.calibration.begin() + static_cast<std::ptrdiff_t>(last * per_chan));
  }
  b.du_override = du;  // the block's own highest frequency would give another cell
  return b;
}

MultiEpicPlan::MultiEpicPlan(const epic::EpicConfig& config, Backend backend,
                             std::vector<int> devices)
    : config_(config) {
  config_.validate();
  const Backend resolved = resolve_backend(backend);
  if (devices.empty()) devices.push_back(-1);
  if (resolved == Backend::cuda) {
    const int visible = device_count();
    for (int& d : devices) {
      if (d >= visible)
        fail(ErrorCategory::invalid_argument, "--gpus: device {} is not visible ({} device{})", d,
             visible, visible == 1 ? "" : "s");
      if (d < 0) d = 0;
    }
  } else {
    for (int& d : devices)
      d = -1;
  }
  const int nblocks = std::min(static_cast<int>(devices.size()), config_.nchan);
  epic::EpicConfig base = config_;
  if (resolved == Backend::cpu && nblocks > 1 && base.threads == 0)
    base.threads = std::max(1, omp_get_max_threads() / nblocks);
  for (int k = 0; k < nblocks; ++k) {
    auto b = std::make_unique<Block>();
    const auto [first, last] = split_range(config_.nchan, nblocks, k);
    b->first = static_cast<int>(first);
    b->last = static_cast<int>(last);
    b->device = devices[static_cast<std::size_t>(k)];
    blocks_.push_back(std::move(b));
  }

  // Plans (and device buffers) on every block's device at once: building the GCF tables is
  // most of a plan's cost.
  auto build = [&](epic::Algorithm algorithm) {
    for_each_block(blocks_.size(), [&](std::size_t k) {
      Block& b = *blocks_[k];
      if (b.device >= 0) set_device(b.device);
      epic::EpicConfig c = channel_block(base, b.first, b.last);
      c.algorithm = algorithm;
      b.plan = std::make_unique<epic::EpicPlan>(std::move(c), resolved);
      if (b.device >= 0 && b.in.size() == 0) {
        const auto& bc = b.plan->config();
        b.in = DeviceArray<std::uint8_t>(static_cast<std::size_t>(bc.nchan) *
                                         static_cast<std::size_t>(bc.ntime) * bc.nstand * 2);
        b.out = DeviceArray<float>(static_cast<std::size_t>(bc.nchan) * 4 * bc.grid_size *
                                   bc.grid_size);
      }
    });
  };
  build(config_.algorithm);
  // One plan over every channel uses fused only when every channel fits it.
  if (config_.algorithm == epic::Algorithm::automatic && resolved == Backend::cuda) {
    bool all_fused = true;
    for (const auto& b : blocks_)
      all_fused = all_fused && b->plan->algorithm() == epic::Algorithm::fused;
    if (!all_fused) build(epic::Algorithm::multikernel);
  }
}

MultiEpicPlan::~MultiEpicPlan() = default;
MultiEpicPlan::MultiEpicPlan(MultiEpicPlan&&) noexcept = default;
MultiEpicPlan& MultiEpicPlan::operator=(MultiEpicPlan&&) noexcept = default;

Backend MultiEpicPlan::backend() const {
  return blocks_.front()->plan->backend();
}
epic::Algorithm MultiEpicPlan::algorithm() const {
  return blocks_.front()->plan->algorithm();
}
epic::ImageGeometry MultiEpicPlan::geometry() const {
  return blocks_.front()->plan->geometry();
}
const std::vector<int>& MultiEpicPlan::used_stands() const {
  return blocks_.front()->plan->used_stands();
}
const std::vector<int>& MultiEpicPlan::distant_stands() const {
  return blocks_.front()->plan->distant_stands();
}
int MultiEpicPlan::blocks() const {
  return static_cast<int>(blocks_.size());
}
std::pair<int, int> MultiEpicPlan::block_channels(int k) const {
  require_range("block", k, 0, blocks() - 1);
  return {blocks_[static_cast<std::size_t>(k)]->first, blocks_[static_cast<std::size_t>(k)]->last};
}
int MultiEpicPlan::block_device(int k) const {
  require_range("block", k, 0, blocks() - 1);
  return blocks_[static_cast<std::size_t>(k)]->device;
}
const epic::EpicPlan& MultiEpicPlan::block_plan(int k) const {
  require_range("block", k, 0, blocks() - 1);
  return *blocks_[static_cast<std::size_t>(k)]->plan;
}

void MultiEpicPlan::execute(View<const std::uint8_t, 4> in, View<float, 4> out) const {
  const auto& c = config_;
  require_view(in, {c.nchan, c.ntime, c.nstand, 2}, Space::host, "EPIC input (ci4 voltages)");
  require_view(out, {c.nchan, 4, c.grid_size, c.grid_size}, Space::host, "EPIC output (images)");
  const std::int64_t in_per_chan = c.ntime * c.nstand * 2;
  const std::int64_t out_per_chan = std::int64_t{4} * c.grid_size * c.grid_size;
  for_each_block(blocks_.size(), [&](std::size_t k) {
    const Block& b = *blocks_[k];
    const std::int64_t n = b.last - b.first;
    const std::uint8_t* src = in.data + b.first * in_per_chan;
    float* dst = out.data + b.first * out_per_chan;
    const View<const std::uint8_t, 4> bin(src, {n, c.ntime, c.nstand, 2});
    const View<float, 4> bout(dst, {n, 4, c.grid_size, c.grid_size});
    if (b.device < 0) {
      b.plan->execute(bin, bout);
      return;
    }
    set_device(b.device);
    copy_bytes(b.in.data(), src, b.in.bytes());
    b.plan->execute(View<const std::uint8_t, 4>(b.in.data(), bin.shape, Space::device),
                    View<float, 4>(b.out.data(), bout.shape, Space::device));
    copy_bytes(dst, b.out.data(), b.out.bytes());
  });
}

}  // namespace warpbeam::dist
