// Verasonics/PyMUST-style MATLAB .mat channel data (matio): RF or IQ + the `param` struct.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>

#include "warpbeam/format.hpp"
#include "warpbeam/io/output_file.hpp"
#include "warpbeam/io/ultrasound.hpp"

#ifdef WARPBEAM_HAVE_MATIO
#include <matio.h>
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

std::size_t numel(const matvar_t* v) {
  std::size_t n = 1;
  for (int i = 0; i < v->rank; ++i)
    n *= v->dims[i];
  return n;
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
  std::vector<double> out(numel(v));
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
  const auto v = values(f, path + ": param." + name);
  if (v.size() != 1) fail(ErrorCategory::format, "{}: param.{} must be a scalar", path, name);
  return v[0];
}

}  // namespace

std::vector<double> read_mat_array(const std::string& path, const std::string& name,
                                   std::vector<std::size_t>* dims) {
  if (!std::filesystem::exists(path)) fail(ErrorCategory::io, "{}: no such file", path);
  MatPtr mat(Mat_Open(path.c_str(), MAT_ACC_RDONLY));
  if (!mat) fail(ErrorCategory::format, "{}: not a MATLAB .mat file (matio cannot open it)", path);
  VarPtr v(Mat_VarRead(mat.get(), name.c_str()));
  if (!v) fail(ErrorCategory::format, "{}: no variable '{}'", path, name);
  if (dims) dims->assign(v->dims, v->dims + v->rank);
  return values(v.get(), path + ": " + name);
}

UltrasoundData read_mat(const std::string& path) {
  if (!std::filesystem::exists(path)) fail(ErrorCategory::io, "{}: no such file", path);
  MatPtr mat(Mat_Open(path.c_str(), MAT_ACC_RDONLY));
  if (!mat) fail(ErrorCategory::format, "{}: not a MATLAB .mat file (matio cannot open it)", path);
  VarPtr sig(Mat_VarRead(mat.get(), "RF"));
  bool iq = false;
  if (!sig) {
    sig.reset(Mat_VarRead(mat.get(), "IQ"));
    iq = true;
  }
  if (!sig) fail(ErrorCategory::format, "{}: no RF or IQ variable", path);
  VarPtr param(Mat_VarRead(mat.get(), "param"));
  if (!param || param->class_type != MAT_C_STRUCT)
    fail(ErrorCategory::format, "{}: no param struct (fs, fc, c, t0, pitch, TXdelay ...)", path);
  if (!numeric(sig.get()) || sig->rank < 2 || sig->rank > 3)
    fail(ErrorCategory::format, "{}: {} must be a numeric [samples][elements]([shots]) array", path,
         iq ? "IQ" : "RF");
  if (iq && !sig->isComplex) fail(ErrorCategory::format, "{}: IQ must be complex", path);
  if (!iq && sig->isComplex)
    fail(ErrorCategory::format, "{}: RF is complex: store I/Q data as IQ", path);

  UltrasoundData d;
  d.sample_type = iq ? das::SampleType::iq : das::SampleType::rf;
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
  const bool iq = d.sample_type == das::SampleType::iq;
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
