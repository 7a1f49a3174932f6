// The host instance of das_coefficients (delay.hpp), compiled with -ffp-contract=off so that its
// double-precision delays round exactly as the CUDA kernels' do.
#include "das/delay.hpp"

namespace warpbeam::das::detail {

Coeff host_coefficients(const DelayParams& p, double px, double py, double pz, double tau_tx,
                        float w_tx, const Element& e) {
  return das_coefficients(p, px, py, pz, tau_tx, w_tx, e);
}

}  // namespace warpbeam::das::detail
