// UFF (USTB's ultrasound file format, HDF5) channel data, and HDF5 / NumPy volume products.
// Layout (the subset written and read, docs/FORMATS.md): group /channel_data with datasets
// sampling_frequency, initial_time, sound_speed, modulation_frequency (0 for RF), data (float32
// [frames][waves][channels][samples]; a group with real and imag for IQ), probe/geometry
// [7][channels] (x, y, z, theta, phi, width, height as USTB), and sequence/sequence_NNNN groups
// (wavefront 0 plane / 1 spherical, source/{azimuth, elevation, distance, xyz}, delay).
#include <unistd.h>

#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/checked.hpp"
#include "io/hdf5_check.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/io/output_file.hpp"
#include "warpbeam/io/ultrasound.hpp"

#ifdef WARPBEAM_HAVE_HDF5
#include <hdf5.h>
#endif

namespace warpbeam::io {

void write_npy(const std::string& path, const float* data, const std::vector<std::int64_t>& shape) {
  // NumPy format 1.0: magic, version, little-endian header length, a Python dict literal padded
  // with spaces to a multiple of 64 bytes and ended by '\n', then the raw data.
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  std::int64_t n = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    dict += std::to_string(shape[i]) + (shape.size() == 1 || i + 1 < shape.size() ? ", " : "");
    n *= shape[i];
  }
  dict += "), }";
  const std::size_t pre = 10;
  std::size_t total = pre + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  OutputFile f(path);
  const char magic[] = "\x93NUMPY\x01\x00";
  f.write(magic, 8);
  const std::uint16_t len = static_cast<std::uint16_t>(dict.size());
  const unsigned char le[2] = {static_cast<unsigned char>(len & 0xff),
                               static_cast<unsigned char>(len >> 8)};
  f.write(le, 2);
  f.write(dict.data(), dict.size());
  f.write(data, static_cast<std::size_t>(n) * sizeof(float));
  f.commit();
}

bool uff_supported() {
#ifdef WARPBEAM_HAVE_HDF5
  return true;
#else
  return false;
#endif
}

#ifndef WARPBEAM_HAVE_HDF5
UltrasoundData read_uff(const std::string& path) {
  fail(ErrorCategory::unsupported, "{}: this build has no HDF5 (UFF input)", path);
}
void write_uff(const std::string& path, const UltrasoundData&, const nlohmann::json&) {
  fail(ErrorCategory::unsupported, "{}: this build has no HDF5 (UFF output)", path);
}
void write_hdf5_volume(const std::string& path, const std::string&, const float*,
                       const std::vector<std::int64_t>&,
                       const std::vector<std::pair<std::string, double>>&, const nlohmann::json&) {
  fail(ErrorCategory::unsupported, "{}: this build has no HDF5 (volume output)", path);
}
#else

namespace {

// RAII for HDF5 identifiers.
struct H5Id {
  hid_t id = -1;
  herr_t (*close)(hid_t) = nullptr;
  H5Id(hid_t i, herr_t (*c)(hid_t)) : id(i), close(c) {}
  ~H5Id() {
    if (id >= 0 && close) close(id);
  }
  H5Id(const H5Id&) = delete;
  H5Id& operator=(const H5Id&) = delete;
  H5Id(H5Id&& o) noexcept : id(o.id), close(o.close) { o.id = -1; }
  operator hid_t() const { return id; }
};

void quiet_hdf5() {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

void check(herr_t e, const std::string& what) {
  if (e < 0) fail(ErrorCategory::io, "HDF5: {} failed", what);
}

void write_string_attr(hid_t obj, const char* name, const std::string& value) {
  H5Id type(H5Tcopy(H5T_C_S1), H5Tclose);
  check(H5Tset_size(type, std::max<std::size_t>(value.size(), 1)), "H5Tset_size");
  H5Id space(H5Screate(H5S_SCALAR), H5Sclose);
  H5Id attr(H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  check(attr.id, std::string("create attribute ") + name);
  check(H5Awrite(attr, type, value.c_str()), std::string("write attribute ") + name);
}

void write_dataset(hid_t loc, const char* name, hid_t mem_type, hid_t file_type,
                   const std::vector<hsize_t>& dims, const void* data) {
  H5Id space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose);
  H5Id ds(H5Dcreate2(loc, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
  check(ds.id, std::string("create dataset ") + name);
  check(H5Dwrite(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data),
        std::string("write dataset ") + name);
}

void write_scalar(hid_t loc, const char* name, double v) {
  write_dataset(loc, name, H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, {1, 1}, &v);
}

H5Id make_group(hid_t loc, const char* name, const char* cls) {
  H5Id g(H5Gcreate2(loc, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  check(g.id, std::string("create group ") + name);
  if (cls) write_string_attr(g, "class", cls);
  return g;
}

bool exists(hid_t loc, const char* name) {
  return H5Lexists(loc, name, H5P_DEFAULT) > 0;
}

// The values of dataset `ds` of dims `dims`, checked before a buffer is sized by them: the
// product in 64 bits, and the bytes it stands for against what the file stores for the dataset
// (deflate compresses at most ~1032:1; a 22 kB file declaring 6.3 GB of samples was allocated).
std::size_t checked_values(hid_t ds, const std::vector<hsize_t>& dims, const std::string& path,
                           const char* name) {
  std::int64_t n = 1;
  for (hsize_t d : dims) {
    if (d > static_cast<hsize_t>(INT64_MAX))
      fail(ErrorCategory::format, "{}: UFF '{}' declares a dimension of {}", path, name, d);
    n = warpbeam::detail::checked_mul(n, static_cast<std::int64_t>(d), path + ": UFF " + name);
  }
  if (n == 0) return 0;
  H5Id type(H5Dget_type(ds), H5Tclose);
  const std::size_t element = type.id >= 0 ? H5Tget_size(type) : 0;
  if (element == 0) fail(ErrorCategory::format, "{}: UFF '{}' has no valid type", path, name);
  // Numbers only: converting a variable-length or reference type would read global heaps whose
  // sizes come from the file (not checked by check_hdf5_structure).
  const H5T_class_t cls = H5Tget_class(type);
  if (cls != H5T_INTEGER && cls != H5T_FLOAT)
    fail(ErrorCategory::format, "{}: UFF '{}' is not an integer or floating-point dataset", path,
         name);
  const double declared = static_cast<double>(n) * static_cast<double>(element);
  const double stored = static_cast<double>(H5Dget_storage_size(ds));
  // Without a filter the file must hold every declared byte: libhdf5 1.10 copies the declared
  // size out of a shorter compact buffer (a heap over-read inside H5Dread, ../shared/repro/uff).
  H5Id dcpl(H5Dget_create_plist(ds), H5Pclose);
  const int filters = dcpl.id >= 0 ? H5Pget_nfilters(dcpl) : -1;
  if (filters == 0 && stored < declared)
    fail(ErrorCategory::format,
         "{}: UFF '{}' declares {} values ({:.0f} bytes) but the file stores {:.0f} bytes of them",
         path, name, n, declared, stored);
  if (declared > 1100.0 * stored + 4096.0)
    fail(ErrorCategory::format,
         "{}: UFF '{}' declares {} values ({:.0f} bytes) but the file stores {:.0f} bytes of them",
         path, name, n, declared, stored);
  return static_cast<std::size_t>(n);
}

// Reads a whole numeric dataset as double (any stored numeric type), with its dims.
std::vector<double> read_doubles(hid_t loc, const char* name, const std::string& path,
                                 std::vector<hsize_t>* dims_out = nullptr) {
  if (!exists(loc, name))
    fail(ErrorCategory::format, "{}: UFF dataset '{}' is missing", path, name);
  H5Id ds(H5Dopen2(loc, name, H5P_DEFAULT), H5Dclose);
  if (ds.id < 0) fail(ErrorCategory::format, "{}: '{}' is not a dataset", path, name);
  H5Id space(H5Dget_space(ds), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space);
  std::vector<hsize_t> dims(static_cast<std::size_t>(std::max(rank, 0)));
  if (rank > 0) H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  std::vector<double> v(checked_values(ds, dims, path, name));
  const std::size_t n = v.size();
  if (n && H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) < 0)
    fail(ErrorCategory::format, "{}: cannot read UFF dataset '{}' as numbers", path, name);
  if (dims_out) *dims_out = dims;
  return v;
}

double read_scalar(hid_t loc, const char* name, const std::string& path) {
  const auto v = read_doubles(loc, name, path);
  if (v.size() != 1) fail(ErrorCategory::format, "{}: UFF '{}' must be a scalar", path, name);
  return v[0];
}

std::vector<float> read_floats(hid_t loc, const char* name, const std::string& path,
                               std::vector<hsize_t>* dims) {
  H5Id ds(H5Dopen2(loc, name, H5P_DEFAULT), H5Dclose);
  if (ds.id < 0) fail(ErrorCategory::format, "{}: UFF dataset '{}' is missing", path, name);
  H5Id space(H5Dget_space(ds), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space);
  if (rank < 1 || rank > 4)
    fail(ErrorCategory::format, "{}: UFF '{}' has rank {} (expected 1..4)", path, name, rank);
  dims->assign(static_cast<std::size_t>(rank), 0);
  H5Sget_simple_extent_dims(space, dims->data(), nullptr);
  std::vector<float> v(checked_values(ds, *dims, path, name));
  const std::size_t n = v.size();
  if (n && H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) < 0)
    fail(ErrorCategory::format, "{}: cannot read UFF '{}'", path, name);
  return v;
}

}  // namespace

void write_uff(const std::string& path, const UltrasoundData& d, const nlohmann::json& prov) {
  quiet_hdf5();
  const bool iq = d.signal == das::Signal::iq;
  const std::size_t total = static_cast<std::size_t>(d.batch * d.nrx * d.ntx * d.nsamples);
  if ((iq ? d.iq.size() : d.rf.size()) != total ||
      d.probe.size() != static_cast<std::size_t>(d.nrx) ||
      d.transmits.size() != static_cast<std::size_t>(d.ntx))
    fail(ErrorCategory::invalid_argument, "write_uff: data, probe and transmits disagree");
  for (const auto& t : d.transmits)
    if (t.kind == das::Transmit::Kind::element_delays)
      fail(ErrorCategory::unsupported,
           "{}: UFF stores plane or spherical waves, not element delays", path);
  io::OutputPath tp(path);
  {
    H5Id file(H5Fcreate(tp.temp().c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    if (file.id < 0) fail(ErrorCategory::io, "{}: cannot create", path);
    write_string_attr(file, "version", "v1.2.0");
    write_string_attr(file, "provenance", prov.dump());
    H5Id cd = make_group(file, "channel_data", "uff.channel_data");
    write_string_attr(cd, "name", "warpbeam channel data");
    write_scalar(cd, "sampling_frequency", d.fs);
    write_scalar(cd, "initial_time", d.t0);
    write_scalar(cd, "sound_speed", d.c);
    write_scalar(cd, "modulation_frequency", iq ? d.fc : 0.0);
    write_scalar(cd, "PRF", d.prf);
    {
      H5Id pulse = make_group(cd, "pulse", "uff.pulse");
      write_scalar(pulse, "center_frequency", d.fc);
      write_scalar(pulse, "fractional_bandwidth", d.bandwidth);
    }
    // data: [frames][waves][channels][samples] (USTB's [time][channel][wave][frame] in MATLAB
    // order), from our [frames][channels][waves][samples].
    const std::size_t B = d.batch, M = d.nrx, Q = d.ntx, K = d.nsamples;
    const std::vector<hsize_t> dims = {B, Q, M, K};
    std::vector<float> re(total), im(iq ? total : 0);
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t m = 0; m < M; ++m)
        for (std::size_t q = 0; q < Q; ++q)
          for (std::size_t k = 0; k < K; ++k) {
            const std::size_t s = ((b * M + m) * Q + q) * K + k, t = ((b * Q + q) * M + m) * K + k;
            if (iq) {
              re[t] = d.iq[s].real();
              im[t] = d.iq[s].imag();
            } else {
              re[t] = d.rf[s];
            }
          }
    if (iq) {
      H5Id data = make_group(cd, "data", nullptr);
      write_dataset(data, "real", H5T_NATIVE_FLOAT, H5T_IEEE_F32LE, dims, re.data());
      write_dataset(data, "imag", H5T_NATIVE_FLOAT, H5T_IEEE_F32LE, dims, im.data());
    } else {
      write_dataset(cd, "data", H5T_NATIVE_FLOAT, H5T_IEEE_F32LE, dims, re.data());
    }
    {
      H5Id probe = make_group(cd, "probe", "uff.probe");
      std::vector<double> geom(7 * M, 0.0);
      for (std::size_t m = 0; m < M; ++m) {
        for (int a = 0; a < 3; ++a)
          geom[a * M + m] = d.probe.positions[m][a];
        geom[5 * M + m] = d.probe.element_width;
        geom[6 * M + m] = d.probe.element_width;
      }
      write_dataset(probe, "geometry", H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, {7, M}, geom.data());
      std::vector<double> kinds(M, 0.0);
      for (std::size_t m = 0; m < M && !d.probe.kinds.empty(); ++m)
        kinds[m] = static_cast<double>(d.probe.kinds[m]);
      write_dataset(probe, "element_kind", H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, {M}, kinds.data());
      write_scalar(probe, "pitch", d.probe.pitch);
    }
    {
      H5Id seq = make_group(cd, "sequence", "uff.wave");
      for (std::size_t q = 0; q < Q; ++q) {
        const auto& t = d.transmits[q];
        char name[32];
        std::snprintf(name, sizeof name, "sequence_%04zu", q + 1);
        H5Id w = make_group(seq, name, "uff.wave");
        const bool plane = t.kind == das::Transmit::Kind::plane_wave;
        write_scalar(w, "wavefront", plane ? 0.0 : 1.0);
        write_scalar(w, "delay", -t.delay);
        write_scalar(w, "sound_speed", d.c);
        H5Id src = make_group(w, "source", "uff.point");
        if (plane) {
          write_scalar(src, "azimuth", t.azimuth);
          write_scalar(src, "elevation", t.elevation);
          write_scalar(src, "distance", INFINITY);
        } else {
          const auto& s = t.source;
          const double r = std::sqrt(s[0] * s[0] + s[1] * s[1] + s[2] * s[2]);
          const double dist = s[2] < 0 ? -r : r;
          write_scalar(src, "distance", dist);
          write_scalar(src, "elevation", r > 0 ? std::asin(s[1] / dist) : 0.0);
          write_scalar(src, "azimuth", r > 0 ? std::atan2(s[0] / dist, s[2] / dist) : 0.0);
          write_dataset(src, "xyz", H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, {3}, s.data());
        }
      }
    }
    check(H5Fflush(file, H5F_SCOPE_GLOBAL), "flush");
  }
  tp.commit();
}

UltrasoundData read_uff(const std::string& path) {
  quiet_hdf5();
  if (!std::filesystem::exists(path)) fail(ErrorCategory::io, "{}: no such file", path);
  if (H5Fis_hdf5(path.c_str()) <= 0)
    fail(ErrorCategory::format, "{}: not an HDF5 (UFF) file", path);
  // libhdf5 allocates buffers sized by lengths in the file before it reads them: the metadata
  // are walked and checked against the file's size first (hdf5_check.hpp).
  detail::check_hdf5_structure(path, static_cast<std::int64_t>(std::filesystem::file_size(path)));
  H5Id file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (file.id < 0) fail(ErrorCategory::io, "{}: cannot open", path);
  if (!exists(file, "channel_data"))
    fail(ErrorCategory::format, "{}: no channel_data group (UFF)", path);
  H5Id cd(H5Gopen2(file, "channel_data", H5P_DEFAULT), H5Gclose);
  UltrasoundData d;
  d.fs = read_scalar(cd, "sampling_frequency", path);
  d.t0 = read_scalar(cd, "initial_time", path);
  d.c = read_scalar(cd, "sound_speed", path);
  const double fmod =
      exists(cd, "modulation_frequency") ? read_scalar(cd, "modulation_frequency", path) : 0.0;
  if (exists(cd, "PRF")) d.prf = read_scalar(cd, "PRF", path);
  d.fc = fmod;
  if (exists(cd, "pulse")) {
    H5Id pulse(H5Gopen2(cd, "pulse", H5P_DEFAULT), H5Gclose);
    if (exists(pulse, "center_frequency")) d.fc = read_scalar(pulse, "center_frequency", path);
    if (exists(pulse, "fractional_bandwidth"))
      d.bandwidth = read_scalar(pulse, "fractional_bandwidth", path);
  }
  if (!(d.fs > 0))
    fail(ErrorCategory::format, "{}: sampling_frequency = {} must be > 0", path, d.fs);
  // Probe.
  if (!exists(cd, "probe")) fail(ErrorCategory::format, "{}: no channel_data/probe", path);
  H5Id probe(H5Gopen2(cd, "probe", H5P_DEFAULT), H5Gclose);
  std::vector<hsize_t> gd;
  const auto geom = read_doubles(probe, "geometry", path, &gd);
  if (gd.size() != 2 || gd[0] != 7)
    fail(ErrorCategory::format, "{}: probe/geometry must be [7][elements]", path);
  const std::size_t M = gd[1];
  for (std::size_t m = 0; m < M; ++m)
    d.probe.positions.push_back({geom[m], geom[M + m], geom[2 * M + m]});
  d.probe.element_width = M ? geom[5 * M] : 0;
  if (exists(probe, "pitch")) d.probe.pitch = read_scalar(probe, "pitch", path);
  if (exists(probe, "element_kind")) {
    const auto k = read_doubles(probe, "element_kind", path);
    if (k.size() != M) fail(ErrorCategory::format, "{}: probe/element_kind size mismatch", path);
    if (std::any_of(k.begin(), k.end(), [](double v) { return v != 0; }))
      for (double v : k) {
        // Checked before the conversion (a float outside int's range was undefined behaviour).
        if (v != 0 && v != 1 && v != 2)
          fail(ErrorCategory::format,
               "{}: probe/element_kind {} is not 0 (point), 1 (line x) or 2 (line y)", path, v);
        d.probe.kinds.push_back(static_cast<das::ElementKind>(static_cast<int>(v)));
      }
  }
  // Sequence.
  if (!exists(cd, "sequence")) fail(ErrorCategory::format, "{}: no channel_data/sequence", path);
  H5Id seq(H5Gopen2(cd, "sequence", H5P_DEFAULT), H5Gclose);
  auto read_wave = [&](hid_t w) {
    das::Transmit t;
    const double front = exists(w, "wavefront") ? read_scalar(w, "wavefront", path) : 1.0;
    t.delay = exists(w, "delay") ? -read_scalar(w, "delay", path) : 0.0;
    if (!exists(w, "source")) fail(ErrorCategory::format, "{}: a wave has no source", path);
    H5Id src(H5Gopen2(w, "source", H5P_DEFAULT), H5Gclose);
    const double az = read_scalar(src, "azimuth", path), el = read_scalar(src, "elevation", path);
    if (front == 0) {
      t = das::Transmit::plane(az, el);
      t.delay = exists(w, "delay") ? -read_scalar(w, "delay", path) : 0.0;
    } else if (front == 1) {
      das::Vec3 s{};
      if (exists(src, "xyz")) {
        const auto v = read_doubles(src, "xyz", path);
        if (v.size() != 3) fail(ErrorCategory::format, "{}: source/xyz must have 3 values", path);
        s = {v[0], v[1], v[2]};
      } else {
        const double r = read_scalar(src, "distance", path);
        s = {r * std::sin(az) * std::cos(el), r * std::sin(el), r * std::cos(az) * std::cos(el)};
      }
      const double delay = t.delay;
      t = das::Transmit::diverging(s);
      t.delay = delay;
    } else {
      fail(ErrorCategory::unsupported, "{}: wavefront {} is not plane (0) or spherical (1)", path,
           front);
    }
    return t;
  };
  if (exists(seq, "source")) {
    d.transmits.push_back(read_wave(seq));
  } else {
    for (int q = 1;; ++q) {
      char name[32];
      std::snprintf(name, sizeof name, "sequence_%04d", q);
      if (!exists(seq, name)) break;
      H5Id w(H5Gopen2(seq, name, H5P_DEFAULT), H5Gclose);
      d.transmits.push_back(read_wave(w));
    }
  }
  if (d.transmits.empty()) fail(ErrorCategory::format, "{}: the sequence has no waves", path);
  // Data.
  std::vector<hsize_t> dd;
  std::vector<float> re, im;
  if (!exists(cd, "data")) fail(ErrorCategory::format, "{}: no channel_data/data", path);
  const bool is_group = H5Id(H5Dopen2(cd, "data", H5P_DEFAULT), H5Dclose).id < 0;
  if (is_group) {
    H5Id g(H5Gopen2(cd, "data", H5P_DEFAULT), H5Gclose);
    re = read_floats(g, "real", path, &dd);
    std::vector<hsize_t> di;
    im = read_floats(g, "imag", path, &di);
    if (di != dd) fail(ErrorCategory::format, "{}: data/real and data/imag differ in shape", path);
  } else {
    re = read_floats(cd, "data", path, &dd);
  }
  while (dd.size() < 4)
    dd.insert(dd.begin(), 1);
  const std::size_t B = dd[0], Q = dd[1], Mf = dd[2], K = dd[3];
  if (Mf != M)
    fail(ErrorCategory::format, "{}: data has {} channels but the probe {} elements", path, Mf, M);
  if (Q != d.transmits.size())
    fail(ErrorCategory::format, "{}: data has {} waves but the sequence {}", path, Q,
         d.transmits.size());
  const bool iq = !im.empty();
  if (iq && !(fmod > 0))
    fail(ErrorCategory::format, "{}: complex data need modulation_frequency > 0", path);
  d.signal = iq ? das::Signal::iq : das::Signal::rf;
  if (iq) d.fc = fmod;
  d.batch = static_cast<std::int64_t>(B);
  d.nrx = static_cast<std::int64_t>(M);
  d.ntx = static_cast<std::int64_t>(Q);
  d.nsamples = static_cast<std::int64_t>(K);
  if (iq)
    d.iq.resize(re.size());
  else
    d.rf.resize(re.size());
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t q = 0; q < Q; ++q)
      for (std::size_t m = 0; m < M; ++m)
        for (std::size_t k = 0; k < K; ++k) {
          const std::size_t s = ((b * Q + q) * M + m) * K + k, t = ((b * M + m) * Q + q) * K + k;
          if (iq)
            d.iq[t] = {re[s], im[s]};
          else
            d.rf[t] = re[s];
        }
  return d;
}

void write_hdf5_volume(const std::string& path, const std::string& name, const float* data,
                       const std::vector<std::int64_t>& shape,
                       const std::vector<std::pair<std::string, double>>& attrs,
                       const nlohmann::json& prov) {
  quiet_hdf5();
  io::OutputPath tp(path);
  {
    H5Id file(H5Fcreate(tp.temp().c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    if (file.id < 0) fail(ErrorCategory::io, "{}: cannot create", path);
    std::vector<hsize_t> dims(shape.begin(), shape.end());
    write_dataset(file, name.c_str(), H5T_NATIVE_FLOAT, H5T_IEEE_F32LE, dims, data);
    H5Id ds(H5Dopen2(file, name.c_str(), H5P_DEFAULT), H5Dclose);
    write_string_attr(ds, "provenance", prov.dump());
    for (const auto& [key, value] : attrs) {
      H5Id space(H5Screate(H5S_SCALAR), H5Sclose);
      H5Id a(H5Acreate2(ds, key.c_str(), H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT),
             H5Aclose);
      check(a.id, "create attribute " + key);
      check(H5Awrite(a, H5T_NATIVE_DOUBLE, &value), "write attribute " + key);
    }
  }
  tp.commit();
}

#endif

}  // namespace warpbeam::io
