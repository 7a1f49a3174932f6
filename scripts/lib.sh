# Shared by scripts/demo and scripts/test: install what is missing, configure and build.
# Sourced, not run. Works as root on a fresh Debian 12 machine (uses sudo when not root).

WB_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# Debian packages the build and the tests need (see DESIGN.md, Dependencies).
WB_APT_PACKAGES=(cmake ninja-build g++ pkg-config git file python3 python3-pip
  libcli11-dev libfmt-dev nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev
  libcfitsio-dev libfftw3-dev libhdf5-dev libmatio-dev libpng-dev libopenmpi-dev openmpi-bin
  clang-format)
# The beamformer's tracking (RA, Dec) beams: ERFA for ICRS -> observed coordinates.
WB_APT_PACKAGES+=(liberfa-dev)
# The .mat reader's structure check inflates compressed elements (zlib, also matio's).
WB_APT_PACKAGES+=(zlib1g-dev)
# The sanitized build and the fuzz targets (scripts/test, scripts/fuzz): clang with its ASan,
# UBSan and libFuzzer runtimes and its OpenMP; ccache, which the sanitized build runs through (a
# second build of the same sources, as CI's next run, compiles only what changed).
WB_APT_PACKAGES+=(clang libclang-rt-14-dev libomp-dev ccache)
# Candidate plots (PNG): PLplot and its cairo driver (pngcairo).
WB_APT_PACKAGES+=(libplplot-dev plplot-driver-cairo)
# Live streams: cpp-httplib (the status page), libdivide and Boost (spead2, built from its PyPI
# sdist by scripts/build-spead2), chromium and curl (the status page's test).
WB_APT_PACKAGES+=(libcpp-httplib-dev libdivide-dev libboost-dev chromium curl)
# PyPI packages: header-only CUDA libraries (cuFFTDx, CUTLASS/CuTe) and the Python checks.
WB_PIP_PACKAGES=(nvidia-mathdx==25.6.0 nvidia-cutlass==4.2.0.0 numpy astropy)
# The Python package (python/: nanobind, scikit-build-core) and its pytest suite's references
# (PyMUST's DAS, your's filterbank reader and candidate layout (the candidate files' check),
# h5py, matplotlib for the tutorial).
WB_PIP_PACKAGES+=(nanobind==3.1.0 scikit-build-core==1.1.2 pytest scipy h5py pymust==0.1.9
  your==0.6.7 matplotlib)

wb_log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

wb_sudo() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

wb_install_deps() {
  local missing=()
  for p in "${WB_APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    wb_log "installing Debian packages: ${missing[*]}"
    wb_sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive wb_sudo apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" >/dev/null
  fi
  local py=${WB_PYTHON:-python3} pipmissing=()
  for spec in "${WB_PIP_PACKAGES[@]}"; do
    local name=${spec%%==*}
    "$py" -m pip show -q "$name" >/dev/null 2>&1 || pipmissing+=("$spec")
  done
  if [ ${#pipmissing[@]} -gt 0 ]; then
    wb_log "installing PyPI packages: ${pipmissing[*]}"
    "$py" -m pip install -q --disable-pip-version-check "${pipmissing[@]}" 2>&1 \
      | grep -v -E "Running pip as the 'root' user|^$" || true
  fi
  # spead2's C++ library, cached outside git (a few minutes the first time on a machine).
  "$WB_ROOT/scripts/build-spead2" || wb_log "WARNING: spead2 did not build: SPEAD streams disabled"
}

# The preset: cuda when nvcc is on the PATH (or in /usr/local/cuda), else the CPU-only default.
wb_preset() {
  if [ -n "${WARPBEAM_PRESET:-}" ]; then echo "$WARPBEAM_PRESET"; return; fi
  if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then echo cuda; else echo default; fi
}

wb_build() {
  local preset; preset=$(wb_preset)
  [ -x /usr/local/cuda/bin/nvcc ] && export PATH=/usr/local/cuda/bin:$PATH
  cd "$WB_ROOT"
  wb_log "configuring (preset $preset)"
  # The Python module is built for the python3 that runs the tests (not whichever CMake finds).
  cmake --preset "$preset" -DPython_EXECUTABLE="$(command -v "${WB_PYTHON:-python3}")" >/dev/null
  wb_log "building with $(nproc) jobs"
  cmake --build --preset "$preset" -j "$(nproc)"
  WB_BUILD_DIR=$WB_ROOT/$( [ "$preset" = cuda ] && echo build-cuda || echo build )
  export WB_BUILD_DIR
}

# The `sanitize` preset (clang, ASan + UBSan, libFuzzer targets) into build-sanitize/: the CLI,
# every GoogleTest binary of tests/ (the whole CPU suite runs sanitized) and the fuzz targets, not
# the benchmarks. Through ccache when it is installed (a rebuild compiles only what changed).
wb_build_sanitize() {
  cd "$WB_ROOT"
  local launcher=()
  if command -v ccache >/dev/null 2>&1; then
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  fi
  wb_log "configuring (preset sanitize${launcher:+, ccache})"
  cmake --preset sanitize "${launcher[@]}" >/dev/null
  local targets=(warpbeam_cli) t
  for t in $(sed -n 's/^warpbeam_test(\(test_[a-z_]*\).*/\1/p' tests/CMakeLists.txt); do
    targets+=("$t")
  done
  while read -r t _; do
    targets+=("fuzz_$t")
  done < <(awk '!/^#/ && NF' tests/fuzz/targets.txt)
  wb_log "building the sanitized CLI, $((${#targets[@]} - 1)) test and fuzz binaries with $(nproc) jobs"
  cmake --build --preset sanitize -j "$(nproc)" --target "${targets[@]}"
}
