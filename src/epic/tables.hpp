#pragma once
// Internal: what an EpicPlan precomputes (gcf.cpp) and hands to every executor, plus the shared
// host-side finalisation (autocorrelation subtraction, grid correction, centring).
#include <complex>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "warpbeam/epic.hpp"

namespace warpbeam::epic::detail {

struct PlanTables {
  int n = 0;        // grid size N
  int support = 0;  // S; footprints are (S+1) x (S+1)
  int nchan = 0, nstand = 0;
  std::int64_t ntime = 0;
  double du = 0;  // cell in wavelengths

  std::vector<int> used;     // gridded stands, ascending
  std::vector<int> distant;  // usable stands beyond the radius cut

  // Per channel and used antenna k (index into `used`): footprint origin (cells, after the
  // channel's shift), exact position (cells) and the separable cell weights.
  std::vector<int> x0, y0;               // [nchan][nused]
  std::vector<double> u, v;              // [nchan][nused]
  std::vector<float> wx, wy;             // [nchan][nused][S+1]
  std::vector<int> rows, cols;           // [nchan]: grid rows / columns the aperture spans
  std::vector<std::complex<float>> cal;  // [nchan][nstand][2]; 0 for stands not gridded
  std::vector<float> ax, ay;  // [nchan][nused][N]: |DFT of wx|^2, |DFT of wy|^2 (FFT order)
  std::vector<float> corr;    // [nchan][N][N] grid correction, FFT order [q][p]

  int nused() const { return static_cast<int>(used.size()); }
  int taps() const { return support + 1; }
  std::size_t ant(int chan, int k) const {
    return static_cast<std::size_t>(chan) * used.size() + static_cast<std::size_t>(k);
  }
};

/// Builds every table for a validated config (gcf.cpp).
PlanTables build_tables(const EpicConfig& config);

/// The gridding turned around for the CUDA paths: for each channel and each cell (y, x) of a
/// window x window corner of the grid (y, x < window), the (stand, weight = wy * wx) of every
/// footprint touching it. Cells are CSR-indexed: channel c's cell i has the entries
/// base[c] + offsets[c][i] .. base[c] + offsets[c][i + 1]. Every footprint must lie inside the
/// window (the caller checks the aperture extent).
struct GatherTable {
  int window = 0;
  std::vector<std::uint32_t> offsets;  // [nchan][window * window + 1]
  std::vector<std::uint32_t> base;     // [nchan + 1]
  std::vector<std::uint32_t> stand;    // [entries]
  std::vector<float> weight;           // [entries]
};
GatherTable build_gather_table(const PlanTables& t, int window);

/// The fused kernel's gather lists (cuda_fused.cu, fused_layout.hpp), regrouped per block of a
/// channel's cluster so that each block keeps its own in shared memory for the whole gulp: block
/// `rank` gathers grid rows rank + cluster i (local row i < ceil(window / cluster)), thread q of
/// a row task the cells (row, q + q_threads p), p < pin. Cell (i, q, p) is numbered
/// (i q_threads + q) pin + p; its entries are entries[c][rank][offsets[c][rank][cell] ..
/// offsets[c][rank][cell + 1]), each stand << 16 | the fp16 bits of wy * wx. Throws
/// unsupported when a block's list exceeds 65535 entries (16-bit offsets).
struct FusedGather {
  int cells = 0;                       // cells per block
  int max_entries = 0;                 // the longest list of any (channel, rank)
  std::vector<std::uint16_t> offsets;  // [nchan][cluster][cells + 1]
  std::vector<std::uint32_t> entries;  // [nchan][cluster][max_entries]
};
FusedGather build_fused_gather(const PlanTables& t, int window, int cluster, int q_threads,
                               int pin);

/// Host finalisation of one channel: out[k][y][x] = (acc[k][q][p] - auto_k(q, p)) * corr(q, p)
/// with (y, x) = ((q + N/2) mod N, (p + N/2) mod N) and auto_k(q, p) = sum_i autos[i][k] *
/// ay[i][q] * ax[i][p]. acc: [4][N][N] FFT order; autos: [nused][4]; out: [4][N][N].
void finalize_channel(const PlanTables& t, int chan, const double* acc, const double* autos,
                      float* out);

class Executor {
 public:
  virtual ~Executor() = default;
  /// Shapes and spaces are already checked by the plan.
  virtual void execute(const std::uint8_t* in, float* out, const Stream* stream) = 0;
  /// The fused kernel's stage cycles (FusedTuning::profile); empty for the other paths.
  virtual FusedProfile profile() const { return {}; }
};

std::unique_ptr<Executor> make_cpu_executor(const EpicConfig& c, const PlanTables& t);
/// Whether the fused kernel supports this plan (plan.cpp); `why` says why not.
bool fused_supports(const EpicConfig& c, const PlanTables& t, std::string* why);
#ifdef WARPBEAM_HAVE_CUDA
std::unique_ptr<Executor> make_multikernel_executor(const EpicConfig& c, const PlanTables& t);
std::unique_ptr<Executor> make_fused_executor(const EpicConfig& c, const PlanTables& t);
#endif

}  // namespace warpbeam::epic::detail
