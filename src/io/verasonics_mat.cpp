// Verasonics/PyMUST-style MATLAB .mat channel data (matio): RF or IQ + the `param` struct.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "core/checked.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/io/output_file.hpp"
#include "warpbeam/io/ultrasound.hpp"

#ifdef WARPBEAM_HAVE_MATIO
#include <matio.h>

#include "io/mat5_check.hpp"
#endif
#ifdef WARPBEAM_HAVE_HDF5
#include <hdf5.h>

#include "io/hdf5_check.hpp"
#endif

namespace warpbeam::io {

bool mat_supported() {
#ifdef WARPBEAM_HAVE_MATIO
  return true;
#else
  return false;
#endif
}

#ifndef WARPBEAM_HAVE_MATIO
UltrasoundData read_mat(const std::string& path) {
  fail(ErrorCategory::unsupported, "{}: this build has no matio (MATLAB .mat input)", path);
}
void write_mat(const std::string& path, const UltrasoundData&, const nlohmann::json&) {
  fail(ErrorCategory::unsupported, "{}: this build has no matio (MATLAB .mat output)", path);
}
std::vector<double> read_mat_array(const std::string& path, const std::string&,
                                   std::vector<std::size_t>*) {
  fail(ErrorCategory::unsupported, "{}: this build has no matio (MATLAB .mat input)", path);
}
#else

namespace {

struct MatCloser {
  void operator()(mat_t* m) const { Mat_Close(m); }
};
struct VarFree {
  void operator()(matvar_t* v) const { Mat_VarFree(v); }
};
using MatPtr = std::unique_ptr<mat_t, MatCloser>;
using VarPtr = std::unique_ptr<matvar_t, VarFree>;

// Elements of a variable, in 64 bits: an overflowing product of dims is a format error.
std::size_t numel(const matvar_t* v) {
  if (!v->dims && v->rank > 0) fail(ErrorCategory::format, "a .mat variable without dims");
  std::int64_t n = 1;
  for (int i = 0; i < v->rank; ++i) {
    if (v->dims[i] > static_cast<std::size_t>(INT64_MAX))
      fail(ErrorCategory::format, ".mat variable '{}': a dimension of {}", v->name ? v->name : "?",
           v->dims[i]);
    n = warpbeam::detail::checked_mul(n, static_cast<std::int64_t>(v->dims[i]),
                                      ".mat variable size");
  }
  return static_cast<std::size_t>(n);
}

// The file's format from its first bytes, before matio sees it: MAT 5 (a 128-byte header ending
// in version 0x0100 and "IM"/"MI") or MAT 7.3 (HDF5, its signature at byte 512). Anything else is
// refused here: matio's version-4 path allocated what the first 20 bytes of any file declared.
#ifdef WARPBEAM_HAVE_HDF5
// A v7.3 file (HDF5) before matio reads it: every dataset's declared size against what the file
// stores for it, as for UFF (a deflated dataset expands at most ~1032:1).
#if H5_VERSION_GE(1, 12, 0)
using ObjectInfo = H5O_info2_t;
#else
using ObjectInfo = H5O_info_t;
#endif
herr_t check_dataset(hid_t obj, const char* name, const ObjectInfo* info, void* op) {
  if (info->type != H5O_TYPE_DATASET) return 0;
  const auto& path = *static_cast<const std::string*>(op);
  const hid_t ds = H5Dopen2(obj, name, H5P_DEFAULT);
  if (ds < 0) return -1;
  const hid_t space = H5Dget_space(ds), type = H5Dget_type(ds);
  double declared = space >= 0 && type >= 0 ? static_cast<double>(H5Tget_size(type)) : -1;
  const int rank = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
  if (rank < 0 || rank > 32) declared = -1;
  hsize_t dims[32] = {};
  if (rank > 0) H5Sget_simple_extent_dims(space, dims, nullptr);
  for (int i = 0; i < rank && declared >= 0; ++i)
    declared *= static_cast<double>(dims[i]);
  const double stored = static_cast<double>(H5Dget_storage_size(ds));
  if (type >= 0) H5Tclose(type);
  if (space >= 0) H5Sclose(space);
  H5Dclose(ds);
  if (declared < 0 || declared > 1100.0 * stored + 4096.0) {
    *static_cast<std::string*>(op) = path + ": dataset '" + name + "' declares more than it holds";
    return 1;  // stops the visit
  }
  return 0;
}

void check_mat73_structure(const std::string& path) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  detail::check_hdf5_structure(path, static_cast<std::int64_t>(std::filesystem::file_size(path)));
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) fail(ErrorCategory::format, "{}: a v7.3 .mat file HDF5 cannot open", path);
  std::string verdict = path;
#if H5_VERSION_GE(1, 12, 0)
  const herr_t r =
      H5Ovisit3(file, H5_INDEX_NAME, H5_ITER_NATIVE, check_dataset, &verdict, H5O_INFO_BASIC);
#else
  const herr_t r =
      H5Ovisit2(file, H5_INDEX_NAME, H5_ITER_NATIVE, check_dataset, &verdict, H5O_INFO_BASIC);
#endif
  H5Fclose(file);
  if (r != 0)
    fail(ErrorCategory::format, "{}",
         verdict != path ? verdict : path + ": a v7.3 .mat file HDF5 cannot walk");
}
#endif

// Returns true for MAT 5, false for MAT 7.3 (see below).
bool require_mat_header(const std::string& path, std::int64_t size) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) fail(ErrorCategory::io, "{}: cannot open: {}", path, std::strerror(errno));
  unsigned char h[520] = {};
  const std::size_t n = std::fread(h, 1, sizeof h, f);
  std::fclose(f);
  const bool v5 =
      n >= 128 && ((h[126] == 'I' && h[127] == 'M' && h[124] == 0x00 && h[125] == 0x01) ||
                   (h[126] == 'M' && h[127] == 'I' && h[124] == 0x01 && h[125] == 0x00));
  static const unsigned char hdf5[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  const bool v73 = n >= 520 && std::memcmp(h + 512, hdf5, 8) == 0;
  if (!v5 && !v73)
    fail(ErrorCategory::format,
         "{}: not a MATLAB v5 or v7.3 .mat file ({} bytes; no MAT-file header)", path, size);
  return v5;
}

// The file's structure before matio reads anything (mat5_check.hpp; HDF5's datasets for v7.3).
void require_sound_mat(const std::string& path, std::int64_t size) {
  if (require_mat_header(path, size)) {
    detail::check_mat5_structure(path, size);
  } else {
#ifdef WARPBEAM_HAVE_HDF5
    check_mat73_structure(path);
#else
    fail(ErrorCategory::unsupported, "{}: a v7.3 .mat file needs HDF5, which this build lacks",
         path);
#endif
  }
}

// The bytes a variable's data may take in memory for a file of `file_bytes`: what an uncompressed
// variable declares must be in the file; a compressed one inflates at most ~1032:1 (deflate).
void require_plausible(const matvar_t* v, std::int64_t file_bytes, const std::string& what) {
  const double bytes =
      static_cast<double>(numel(v)) *
      static_cast<double>(std::max<std::size_t>(Mat_SizeOfClass(v->class_type), 1)) *
      (v->isComplex ? 2 : 1);
  const double limit = 1100.0 * static_cast<double>(file_bytes) + 4096.0;
  if (bytes > limit)
    fail(ErrorCategory::format, "{} declares {:.0f} bytes of data in a file of {} bytes", what,
         bytes, file_bytes);
}

bool numeric(const matvar_t* v) {
  return v->class_type >= MAT_C_DOUBLE && v->class_type <= MAT_C_UINT64;
}

// Element i of a numeric array of any class, as double.
double element(const void* data, matio_classes cls, std::size_t i) {
  switch (cls) {
    case MAT_C_DOUBLE:
      return static_cast<const double*>(data)[i];
    case MAT_C_SINGLE:
      return static_cast<const float*>(data)[i];
    case MAT_C_INT8:
      return static_cast<const std::int8_t*>(data)[i];
    case MAT_C_UINT8:
      return static_cast<const std::uint8_t*>(data)[i];
    case MAT_C_INT16:
      return static_cast<const std::int16_t*>(data)[i];
    case MAT_C_UINT16:
      return static_cast<const std::uint16_t*>(data)[i];
    case MAT_C_INT32:
      return static_cast<const std::int32_t*>(data)[i];
    case MAT_C_UINT32:
      return static_cast<const std::uint32_t*>(data)[i];
    case MAT_C_INT64:
      return static_cast<const std::int64_t*>(data)[i];
    case MAT_C_UINT64:
      return static_cast<const std::uint64_t*>(data)[i];
    default:
      return NAN;
  }
}

std::vector<double> values(const matvar_t* v, const std::string& what) {
  if (!v || !numeric(v) || v->isComplex || !v->data)
    fail(ErrorCategory::format, "{} must be a real numeric array", what);
  const std::size_t n = numel(v);
  if (v->nbytes < n * Mat_SizeOfClass(v->class_type))
    fail(ErrorCategory::format, "{} holds {} bytes for {} values", what, v->nbytes, n);
  std::vector<double> out(n);
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = element(v->data, v->class_type, i);
  return out;
}

// A scalar field of param, or `fallback` (NaN: required) when absent.
double field(matvar_t* param, const char* name, const std::string& path, double fallback) {
  matvar_t* f = Mat_VarGetStructFieldByName(param, name, 0);
  if (!f || numel(f) == 0) {
    if (std::isnan(fallback)) fail(ErrorCategory::format, "{}: param.{} is missing", path, name);
    return fallback;
  }
  // The size before the values: a declared [huge] field is not copied to find it is no scalar.
  if (numel(f) != 1) fail(ErrorCategory::format, "{}: param.{} must be a scalar", path, name);
  return values(f, path + ": param." + name)[0];
}

// A struct variable matio can be asked for fields: 1 x 1, with fields, and its field table read
// (Mat_VarGetStructFieldByName dereferences it unchecked).
void require_struct(const matvar_t* v, const std::string& what) {
  if (!v || v->class_type != MAT_C_STRUCT || v->rank != 2 || numel(v) != 1 || !v->data ||
      Mat_VarGetNumberOfFields(const_cast<matvar_t*>(v)) == 0)
    fail(ErrorCategory::format, "{} must be a 1 x 1 struct (fs, fc, c, t0, pitch, TXdelay ...)",
         what);
  // matio 1.5.23 compares every field name unchecked (a null name crashed), and indexes the
  // field table by the field count.
  const unsigned nf = Mat_VarGetNumberOfFields(const_cast<matvar_t*>(v));
  char* const* names = Mat_VarGetStructFieldnames(v);
  if (!names || v->nbytes < nf * sizeof(matvar_t*))
    fail(ErrorCategory::format, "{}: a struct without its field table", what);
  for (unsigned i = 0; i < nf; ++i)
    if (!names[i]) fail(ErrorCategory::format, "{}: a struct field without a name", what);
}

// Every field of struct `v` (already require_struct) is within the plausible size.
void require_plausible_fields(matvar_t* v, std::int64_t file_bytes, const std::string& what) {
  const unsigned nf = Mat_VarGetNumberOfFields(v);
  for (unsigned i = 0; i < nf; ++i)
    if (const matvar_t* f = Mat_VarGetStructFieldByIndex(v, i, 0))
      require_plausible(f, file_bytes, what + " (a field)");
}

// Reads variable `name` after checking its header (Mat_VarReadInfo: no data) against the file's
// size; nullptr when the file has no such variable.
VarPtr read_checked(mat_t* mat, const char* name, std::int64_t file_bytes,
                    const std::string& path) {
  VarPtr info(Mat_VarReadInfo(mat, name));
  if (!info) return nullptr;
  const std::string what = path + ": " + name;
  require_plausible(info.get(), file_bytes, what);
  if (info->class_type == MAT_C_STRUCT) {
    require_struct(info.get(), what);
    require_plausible_fields(info.get(), file_bytes, what);
  }
  info.reset();
  VarPtr v(Mat_VarRead(mat, name));
  if (!v) fail(ErrorCategory::format, "{}: matio cannot read it", what);
  return v;
}

}  // namespace

std::vector<double> read_mat_array(const std::string& path, const std::string& name,
                                   std::vector<std::size_t>* dims) {
  if (!std::filesystem::exists(path)) fail(ErrorCategory::io, "{}: no such file", path);
  const auto file_bytes = static_cast<std::int64_t>(std::filesystem::file_size(path));
  require_sound_mat(path, file_bytes);
  MatPtr mat(Mat_Open(path.c_str(), MAT_ACC_RDONLY));
  if (!mat) fail(ErrorCategory::format, "{}: not a MATLAB .mat file (matio cannot open it)", path);
  VarPtr v = read_checked(mat.get(), name.c_str(), file_bytes, path);
  if (!v) fail(ErrorCategory::format, "{}: no variable '{}'", path, name);
  if (dims) dims->assign(v->dims, v->dims + v->rank);
  return values(v.get(), path + ": " + name);
}

UltrasoundData read_mat(const std::string& path) {
  if (!std::filesystem::exists(path)) fail(ErrorCategory::io, "{}: no such file", path);
  if (!std::filesystem::is_regular_file(path))
    fail(ErrorCategory::io, "{}: not a regular file", path);
  const auto file_bytes = static_cast<std::int64_t>(std::filesystem::file_size(path));
  require_sound_mat(path, file_bytes);
  MatPtr mat(Mat_Open(path.c_str(), MAT_ACC_RDONLY));
  if (!mat) fail(ErrorCategory::format, "{}: not a MATLAB .mat file (matio cannot open it)", path);
  VarPtr sig = read_checked(mat.get(), "RF", file_bytes, path);
  bool iq = false;
  if (!sig) {
    sig = read_checked(mat.get(), "IQ", file_bytes, path);
    iq = true;
  }
  if (!sig) fail(ErrorCategory::format, "{}: no RF or IQ variable", path);
  VarPtr param = read_checked(mat.get(), "param", file_bytes, path);
  if (!param || param->class_type != MAT_C_STRUCT)
    fail(ErrorCategory::format, "{}: no param struct (fs, fc, c, t0, pitch, TXdelay ...)", path);
  require_struct(param.get(), path + ": param");
  if (!numeric(sig.get()) || sig->rank < 2 || sig->rank > 3 || !sig->data)
    fail(ErrorCategory::format, "{}: {} must be a numeric [samples][elements]([shots]) array", path,
         iq ? "IQ" : "RF");
  if (iq) {
    const auto* split = static_cast<const mat_complex_split_t*>(sig->data);
    if (!split->Re || !split->Im) fail(ErrorCategory::format, "{}: IQ has no data", path);
  }
  // matio's buffer must hold what the dims say (element() reads numel values).
  if (sig->nbytes < numel(sig.get()) * Mat_SizeOfClass(sig->class_type))
    fail(ErrorCategory::format, "{}: {} holds {} bytes for {} values", path, iq ? "IQ" : "RF",
         sig->nbytes, numel(sig.get()));
  if (iq && !sig->isComplex) fail(ErrorCategory::format, "{}: IQ must be complex", path);
  if (!iq && sig->isComplex)
    fail(ErrorCategory::format, "{}: RF is complex: store I/Q data as IQ", path);

  UltrasoundData d;
  d.signal = iq ? das::Signal::iq : das::Signal::rf;
  const std::size_t nl = sig->dims[0], nc = sig->dims[1], n3 = sig->rank == 3 ? sig->dims[2] : 1;
  if (nl < 2 || nc < 1 || n3 < 1)
    fail(ErrorCategory::format, "{}: {} is {} x {} x {}: too small", path, iq ? "IQ" : "RF", nl, nc,
         n3);
  d.fs = field(param.get(), "fs", path, NAN);
  d.fc = field(param.get(), "fc", path, iq ? NAN : 0.0);
  d.c = field(param.get(), "c", path, 1540.0);
  d.t0 = field(param.get(), "t0", path, 0.0);
  d.bandwidth = field(param.get(), "bandwidth", path, 0.0) / 100.0;
  d.prf = field(param.get(), "PRF", path, 0.0);
  if (!(d.fs > 0)) fail(ErrorCategory::format, "{}: param.fs = {} must be > 0", path, d.fs);
  if (matvar_t* r = Mat_VarGetStructFieldByName(param.get(), "radius", 0))
    if (numel(r) && std::isfinite(values(r, path + ": param.radius")[0]))
      fail(ErrorCategory::unsupported, "{}: convex arrays (finite param.radius) are not supported",
           path);
  const double nel = field(param.get(), "Nelements", path, static_cast<double>(nc));
  if (nel != static_cast<double>(nc))
    fail(ErrorCategory::format, "{}: param.Nelements = {} but {} has {} columns (elements)", path,
         nel, iq ? "IQ" : "RF", nc);
  // Elements: param.elements ([2 or 3][N]: x, (y,) z rows as PyMUST) or a linear array from pitch.
  if (matvar_t* e = Mat_VarGetStructFieldByName(param.get(), "elements", 0); e && numel(e)) {
    const auto v = values(e, path + ": param.elements");
    if (e->rank != 2 || e->dims[1] != nc || (e->dims[0] != 2 && e->dims[0] != 3))
      fail(ErrorCategory::format, "{}: param.elements must be [2 or 3][{}] (x; (y;) z)", path, nc);
    const std::size_t rows = e->dims[0];
    for (std::size_t m = 0; m < nc; ++m) {
      const double x = v[m * rows], y = rows == 3 ? v[m * rows + 1] : 0.0,
                   z = v[m * rows + rows - 1];
      d.probe.positions.push_back({x, y, z});
    }
    d.probe.pitch = field(param.get(), "pitch", path, 0.0);
    d.probe.element_width = field(param.get(), "width", path, 0.0);
  } else {
    const double pitch = field(param.get(), "pitch", path, NAN);
    d.probe = das::linear_array(static_cast<int>(nc), pitch, field(param.get(), "width", path, 0));
  }
  // Transmit delays [ntx][nc] (MATLAB column-major: (q, e) at q + ntx * e).
  std::size_t ntx = 1;
  std::vector<double> txd(nc, 0.0);
  if (matvar_t* t = Mat_VarGetStructFieldByName(param.get(), "TXdelay", 0); t && numel(t)) {
    txd = values(t, path + ": param.TXdelay");
    if (t->rank != 2 || (t->dims[1] != nc && !(t->dims[0] == nc && t->dims[1] == 1)))
      fail(ErrorCategory::format, "{}: param.TXdelay is {} x {}, expected [ntx][{}]", path,
           t->dims[0], t->rank > 1 ? t->dims[1] : 1, nc);
    ntx = t->dims[1] == nc ? t->dims[0] : 1;
  }
  if (n3 % ntx != 0)
    fail(ErrorCategory::format, "{}: {} shots are not a multiple of {} transmits (TXdelay rows)",
         path, n3, ntx);
  for (std::size_t q = 0; q < ntx; ++q) {
    das::Transmit tr;
    tr.kind = das::Transmit::Kind::element_delays;
    for (std::size_t e = 0; e < nc; ++e)
      tr.element_delays.push_back(txd[q + ntx * e]);
    d.transmits.push_back(std::move(tr));
  }
  d.nsamples = static_cast<std::int64_t>(nl);
  d.nrx = static_cast<std::int64_t>(nc);
  d.ntx = static_cast<std::int64_t>(ntx);
  d.batch = static_cast<std::int64_t>(n3 / ntx);
  const std::size_t total = nl * nc * n3;
  // MATLAB (k, m, shot) at k + nl (m + nc shot), shot = q + ntx b -> [b][m][q][k].
  auto dest = [&](std::size_t k, std::size_t m, std::size_t shot) {
    const std::size_t q = shot % ntx, b = shot / ntx;
    return ((b * nc + m) * ntx + q) * nl + k;
  };
  if (iq) {
    d.iq.resize(total);
    const auto* split = static_cast<const mat_complex_split_t*>(sig->data);
    for (std::size_t s = 0; s < n3; ++s)
      for (std::size_t m = 0; m < nc; ++m)
        for (std::size_t k = 0; k < nl; ++k) {
          const std::size_t i = k + nl * (m + nc * s);
          d.iq[dest(k, m, s)] = {static_cast<float>(element(split->Re, sig->class_type, i)),
                                 static_cast<float>(element(split->Im, sig->class_type, i))};
        }
  } else {
    d.rf.resize(total);
    for (std::size_t s = 0; s < n3; ++s)
      for (std::size_t m = 0; m < nc; ++m)
        for (std::size_t k = 0; k < nl; ++k)
          d.rf[dest(k, m, s)] =
              static_cast<float>(element(sig->data, sig->class_type, k + nl * (m + nc * s)));
  }
  return d;
}

namespace {

matvar_t* make_double(const char* name, std::size_t rows, std::size_t cols, const double* v) {
  std::size_t dims[2] = {rows, cols};
  return Mat_VarCreate(name, MAT_C_DOUBLE, MAT_T_DOUBLE, 2, dims, const_cast<double*>(v), 0);
}

// Per-element firing delays (s) of a transmit model on the probe (for TXdelay).
std::vector<double> element_delays(const das::Transmit& t, const das::Probe& probe, double c) {
  std::vector<double> d(probe.size());
  if (t.kind == das::Transmit::Kind::element_delays) return t.element_delays;
  for (std::size_t e = 0; e < probe.size(); ++e) {
    const auto& p = probe.positions[e];
    if (t.kind == das::Transmit::Kind::plane_wave) {
      d[e] =
          (p[0] * std::sin(t.azimuth) * std::cos(t.elevation) + p[1] * std::sin(t.elevation)) / c;
    } else {
      const auto& s = t.source;
      d[e] = std::sqrt((p[0] - s[0]) * (p[0] - s[0]) + (p[1] - s[1]) * (p[1] - s[1]) +
                       (p[2] - s[2]) * (p[2] - s[2])) /
             c;
    }
  }
  // Delays relative to the UFF time origin (the wave passing (0, 0, 0)), not shifted to start at
  // 0 as PyMUST's txdelay does, so that min_e (d_e + |p - e| / c) equals the model's tau_tx.
  if (t.kind == das::Transmit::Kind::diverging_wave) {
    const auto& s = t.source;
    const double r = std::sqrt(s[0] * s[0] + s[1] * s[1] + s[2] * s[2]);
    for (auto& x : d)
      x -= r / c;
  }
  for (auto& x : d)
    x += t.delay;
  return d;
}

}  // namespace

void write_mat(const std::string& path, const UltrasoundData& d, const nlohmann::json& prov) {
  const bool iq = d.signal == das::Signal::iq;
  const std::size_t nl = d.nsamples, nc = d.nrx, ntx = d.ntx, nb = d.batch, n3 = ntx * nb;
  if ((iq ? d.iq.size() : d.rf.size()) != nl * nc * n3 || d.probe.size() != nc ||
      d.transmits.size() != ntx)
    fail(ErrorCategory::invalid_argument, "write_mat: data, probe and transmits disagree");
  io::OutputPath out(path);  // a temporary file, renamed by commit()
  const std::string& tmp = out.temp();
  {
    MatPtr mat(Mat_CreateVer(tmp.c_str(), nullptr, MAT_FT_MAT5));
    if (!mat) fail(ErrorCategory::io, "{}: cannot create", path);
    // Signals: MATLAB [nl][nc][n3] column-major from [b][m][q][k].
    std::size_t dims[3] = {nl, nc, n3};
    auto src = [&](std::size_t k, std::size_t m, std::size_t s) {
      const std::size_t q = s % ntx, b = s / ntx;
      return ((b * nc + m) * ntx + q) * nl + k;
    };
    VarPtr sig;
    std::vector<float> re(nl * nc * n3), im(iq ? re.size() : 0);
    for (std::size_t s = 0; s < n3; ++s)
      for (std::size_t m = 0; m < nc; ++m)
        for (std::size_t k = 0; k < nl; ++k) {
          const std::size_t i = k + nl * (m + nc * s);
          if (iq) {
            re[i] = d.iq[src(k, m, s)].real();
            im[i] = d.iq[src(k, m, s)].imag();
          } else {
            re[i] = d.rf[src(k, m, s)];
          }
        }
    mat_complex_split_t split{re.data(), im.data()};
    if (iq)
      sig.reset(Mat_VarCreate("IQ", MAT_C_SINGLE, MAT_T_SINGLE, 3, dims, &split,
                              MAT_F_COMPLEX | MAT_F_DONT_COPY_DATA));
    else
      sig.reset(Mat_VarCreate("RF", MAT_C_SINGLE, MAT_T_SINGLE, 3, dims, re.data(),
                              MAT_F_DONT_COPY_DATA));
    if (!sig || Mat_VarWrite(mat.get(), sig.get(), MAT_COMPRESSION_ZLIB) != 0)
      fail(ErrorCategory::io, "{}: cannot write the {} variable", path, iq ? "IQ" : "RF");
    // param struct.
    const char* fields[] = {"fs",        "fc",      "c",         "t0",  "pitch",   "width",
                            "Nelements", "TXdelay", "bandwidth", "PRF", "elements"};
    std::size_t one[2] = {1, 1};
    VarPtr param(Mat_VarCreateStruct("param", 2, one, fields, 11));
    const double nel = static_cast<double>(nc), bw = d.bandwidth * 100.0;
    const double scal[] = {d.fs, d.fc, d.c, d.t0, d.probe.pitch, d.probe.element_width, nel};
    for (int i = 0; i < 7; ++i)
      Mat_VarSetStructFieldByName(param.get(), fields[i], 0, make_double(nullptr, 1, 1, &scal[i]));
    std::vector<double> txd(ntx * nc);
    for (std::size_t q = 0; q < ntx; ++q) {
      const auto e = element_delays(d.transmits[q], d.probe, d.c);
      for (std::size_t m = 0; m < nc; ++m)
        txd[q + ntx * m] = e[m];
    }
    Mat_VarSetStructFieldByName(param.get(), "TXdelay", 0,
                                make_double(nullptr, ntx, nc, txd.data()));
    Mat_VarSetStructFieldByName(param.get(), "bandwidth", 0, make_double(nullptr, 1, 1, &bw));
    Mat_VarSetStructFieldByName(param.get(), "PRF", 0, make_double(nullptr, 1, 1, &d.prf));
    std::vector<double> el(3 * nc);
    for (std::size_t m = 0; m < nc; ++m)
      for (int a = 0; a < 3; ++a)
        el[a + 3 * m] = d.probe.positions[m][a];
    Mat_VarSetStructFieldByName(param.get(), "elements", 0, make_double(nullptr, 3, nc, el.data()));
    if (Mat_VarWrite(mat.get(), param.get(), MAT_COMPRESSION_NONE) != 0)
      fail(ErrorCategory::io, "{}: cannot write param", path);
    const std::string text = prov.dump();
    std::size_t pdims[2] = {1, text.size()};
    VarPtr pv(Mat_VarCreate("provenance", MAT_C_CHAR, MAT_T_UINT8, 2, pdims,
                            const_cast<char*>(text.data()), MAT_F_DONT_COPY_DATA));
    if (!pv || Mat_VarWrite(mat.get(), pv.get(), MAT_COMPRESSION_NONE) != 0)
      fail(ErrorCategory::io, "{}: cannot write provenance", path);
  }
  out.commit();
}

#endif

UltrasoundData read_ultrasound(const std::string& path) {
  const auto ext = std::filesystem::path(path).extension().string();
  if (ext == ".mat") return read_mat(path);
  if (ext == ".uff" || ext == ".h5" || ext == ".hdf5") return read_uff(path);
  fail(ErrorCategory::format, "{}: unknown channel-data format (expected .mat or .uff)", path);
}

}  // namespace warpbeam::io
