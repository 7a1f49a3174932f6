// Candidate cutouts as HDF5 in your's layout (your/candidate.py, Candidate.save_h5; FETCH reads
// data_freq_time and data_dm_time), written and read with the HDF5 C library. The datasets and
// attributes are listed in docs/FORMATS.md, "Candidate cutouts".
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "warpbeam/format.hpp"
#include "warpbeam/io/candidate_cutout.hpp"
#include "warpbeam/io/output_file.hpp"

#ifdef WARPBEAM_HAVE_HDF5
#include <hdf5.h>

#include "io/hdf5_check.hpp"
#endif

namespace warpbeam::io {

#ifndef WARPBEAM_HAVE_HDF5

bool candidate_h5_supported() {
  return false;
}
void write_candidate_h5(const std::string& path, const CandidateCutout&) {
  fail(ErrorCategory::unsupported, "{}: this build has no HDF5 (candidate files)", path);
}
CandidateCutout read_candidate_h5(const std::string& path) {
  fail(ErrorCategory::unsupported, "{}: this build has no HDF5 (candidate files)", path);
}

#else

bool candidate_h5_supported() {
  return true;
}

namespace {

struct H5Id {
  hid_t id = -1;
  herr_t (*close)(hid_t) = nullptr;
  H5Id(hid_t i, herr_t (*c)(hid_t)) : id(i), close(c) {}
  ~H5Id() {
    if (id >= 0 && close) close(id);
  }
  H5Id(const H5Id&) = delete;
  H5Id& operator=(const H5Id&) = delete;
  operator hid_t() const { return id; }
};

void check(herr_t e, const std::string& what) {
  if (e < 0) fail(ErrorCategory::io, "HDF5: {} failed", what);
}

// --- writing ---------------------------------------------------------------------------------

void attr_raw(hid_t obj, const char* name, hid_t file_type, hid_t mem_type, hid_t space,
              const void* data) {
  H5Id a(H5Acreate2(obj, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  check(a.id, std::string("create attribute ") + name);
  check(H5Awrite(a, mem_type, data), std::string("write attribute ") + name);
}
void attr(hid_t obj, const char* name, double v) {
  H5Id s(H5Screate(H5S_SCALAR), H5Sclose);
  attr_raw(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, s, &v);
}
void attr_int(hid_t obj, const char* name, std::int64_t v) {
  H5Id s(H5Screate(H5S_SCALAR), H5Sclose);
  attr_raw(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, s, &v);
}
// Variable-length UTF-8 strings, as h5py writes Python str attributes.
hid_t vlen_string_type() {
  const hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  return t;
}
void attr(hid_t obj, const char* name, const std::string& v) {
  H5Id t(vlen_string_type(), H5Tclose);
  H5Id s(H5Screate(H5S_SCALAR), H5Sclose);
  const char* p = v.c_str();
  attr_raw(obj, name, t, t, s, &p);
}
void attr_strings(hid_t obj, const char* name, const std::vector<std::string>& v) {
  H5Id t(vlen_string_type(), H5Tclose);
  const hsize_t n = v.size();
  H5Id s(H5Screate_simple(1, &n, nullptr), H5Sclose);
  std::vector<const char*> p;
  for (const auto& x : v)
    p.push_back(x.c_str());
  attr_raw(obj, name, t, t, s, p.data());
}
void attr_bools(hid_t obj, const char* name, const std::vector<std::uint8_t>& v) {
  // numpy bool arrays, as h5py stores them: an 8-bit enum FALSE = 0, TRUE = 1.
  H5Id t(H5Tenum_create(H5T_NATIVE_INT8), H5Tclose);
  const std::int8_t f = 0, tr = 1;
  H5Tenum_insert(t, "FALSE", &f);
  H5Tenum_insert(t, "TRUE", &tr);
  const hsize_t n = v.size();
  H5Id s(H5Screate_simple(1, &n, nullptr), H5Sclose);
  std::vector<std::int8_t> b(v.begin(), v.end());
  attr_raw(obj, name, t, t, s, b.data());
}

// A 2-D float32 dataset, gzip level 9 in one chunk (your's compression), with dimension
// labels in the attribute HDF5's dimension-scale API keeps them in (DIMENSION_LABELS: one
// variable-length string per axis), which h5py's dims[i].label reads.
void dataset(hid_t file, const char* name, const std::vector<float>& data, hsize_t rows,
             hsize_t cols, const char* label0, const char* label1) {
  const hsize_t dims[2] = {rows, cols};
  H5Id space(H5Screate_simple(2, dims, nullptr), H5Sclose);
  H5Id dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  check(H5Pset_chunk(dcpl, 2, dims), "H5Pset_chunk");
  check(H5Pset_deflate(dcpl, 9), "H5Pset_deflate");
  H5Id ds(H5Dcreate2(file, name, H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT), H5Dclose);
  check(ds.id, std::string("create dataset ") + name);
  check(H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()),
        std::string("write dataset ") + name);
  attr_strings(ds, "DIMENSION_LABELS", {label0, label1});
}

// src_raj / src_dej (SIGPROC hhmmss.s / ddmmss.s) in degrees.
double sigproc_angle_deg(double packed, double scale) {
  const double sign = packed < 0 ? -1 : 1;
  const double a = std::abs(packed);
  const double hh = std::floor(a / 1e4), mm = std::floor((a - hh * 1e4) / 1e2);
  const double ss = a - hh * 1e4 - mm * 1e2;
  return sign * scale * (hh + mm / 60 + ss / 3600);
}

std::string mjd_isot(double mjd) {
  const double unix_s = (mjd - 40587.0) * 86400.0;
  const auto whole = static_cast<std::time_t>(std::floor(unix_s));
  std::tm utc{};
  gmtime_r(&whole, &utc);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:", &utc);
  return fmt::format("{}{:06.3f}", date, utc.tm_sec + (unix_s - static_cast<double>(whole)));
}

std::string dtype_name(const FilterbankHeader& h) {
  if (h.nbits == 32) return "float32";
  if (h.nbits == 16) return h.is_signed ? "int16" : "uint16";
  return h.is_signed ? "int8" : "uint8";
}

// --- reading ---------------------------------------------------------------------------------

bool has_attr(hid_t obj, const char* name) {
  return H5Aexists(obj, name) > 0;
}
double read_attr(hid_t obj, const char* name, const std::string& path) {
  if (!has_attr(obj, name))
    fail(ErrorCategory::format, "{}: the attribute '{}' is missing", path, name);
  H5Id a(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  H5Id s(H5Aget_space(a), H5Sclose);
  H5Id t(H5Aget_type(a), H5Tclose);
  const H5T_class_t cls = H5Tget_class(t);
  if (H5Sget_simple_extent_npoints(s) != 1 || (cls != H5T_INTEGER && cls != H5T_FLOAT))
    fail(ErrorCategory::format, "{}: the attribute '{}' is not a number", path, name);
  double v = 0;
  if (H5Aread(a, H5T_NATIVE_DOUBLE, &v) < 0)
    fail(ErrorCategory::format, "{}: cannot read the attribute '{}'", path, name);
  return v;
}
double read_attr(hid_t obj, const char* name, const std::string& path, double fallback) {
  return has_attr(obj, name) ? read_attr(obj, name, path) : fallback;
}
// An integer attribute in [lo, hi] (checked as a double, before any cast: a file's NaN or huge
// value must not reach an integer); `fallback` when missing.
std::int64_t read_int_attr(hid_t obj, const char* name, const std::string& path,
                           std::int64_t fallback, double lo, double hi) {
  if (!has_attr(obj, name)) return fallback;
  const double v = read_attr(obj, name, path);
  if (!(v >= lo && v <= hi))
    fail(ErrorCategory::format, "{}: the attribute '{}' = {} is outside {} .. {}", path, name, v,
         lo, hi);
  return static_cast<std::int64_t>(v);
}
std::string read_string_attr(hid_t obj, const char* name, const std::string& fallback) {
  if (!has_attr(obj, name)) return fallback;
  H5Id a(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  H5Id t(H5Aget_type(a), H5Tclose);
  H5Id s(H5Aget_space(a), H5Sclose);
  if (H5Tget_class(t) != H5T_STRING || H5Sget_simple_extent_npoints(s) != 1) return fallback;
  if (H5Tis_variable_str(t) > 0) {
    H5Id mt(vlen_string_type(), H5Tclose);
    char* p = nullptr;
    if (H5Aread(a, mt, &p) < 0 || !p) return fallback;
    std::string v(p);
    H5free_memory(p);
    return v;
  }
  const std::size_t n = H5Tget_size(t);
  std::string v(n, '\0');
  H5Id mt(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(mt, n);
  if (H5Aread(a, mt, v.data()) < 0) return fallback;
  v.resize(std::strlen(v.c_str()));
  return v;
}
// A 1-D boolean attribute (numpy bool as h5py stores it: an 8-bit enum; or integers) of n
// entries as 0/1 flags; n zeros when it is missing.
std::vector<std::uint8_t> read_flags_attr(hid_t obj, const char* name, const std::string& path,
                                          std::size_t n) {
  std::vector<std::uint8_t> v(n, 0);
  if (!has_attr(obj, name)) return v;
  H5Id a(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  H5Id s(H5Aget_space(a), H5Sclose);
  H5Id t(H5Aget_type(a), H5Tclose);
  const H5T_class_t cls = H5Tget_class(t);
  const hssize_t points = H5Sget_simple_extent_npoints(s);
  if (points < 0 || static_cast<std::size_t>(points) != n)
    fail(ErrorCategory::format, "{}: the attribute '{}' has {} entries, not nchans = {}", path,
         name, points, n);
  if (cls == H5T_ENUM && H5Tget_size(t) == 1) {
    // HDF5 converts no enum to integers: read the enum's own 1-byte values.
    std::vector<std::int8_t> b(n);
    if (H5Aread(a, t, b.data()) < 0)
      fail(ErrorCategory::format, "{}: cannot read the attribute '{}'", path, name);
    for (std::size_t i = 0; i < n; ++i)
      v[i] = b[i] != 0;
  } else if (cls == H5T_INTEGER) {
    std::vector<std::int32_t> b(n);
    if (H5Aread(a, H5T_NATIVE_INT32, b.data()) < 0)
      fail(ErrorCategory::format, "{}: cannot read the attribute '{}'", path, name);
    for (std::size_t i = 0; i < n; ++i)
      v[i] = b[i] != 0;
  } else {
    fail(ErrorCategory::format, "{}: the attribute '{}' is not a boolean array", path, name);
  }
  return v;
}

std::vector<float> read_2d(hid_t file, const char* name, const std::string& path, hsize_t dims[2]) {
  if (H5Lexists(file, name, H5P_DEFAULT) <= 0)
    fail(ErrorCategory::format, "{}: no dataset '{}' (not a your/FETCH candidate file)", path,
         name);
  H5Id ds(H5Dopen2(file, name, H5P_DEFAULT), H5Dclose);
  H5Id s(H5Dget_space(ds), H5Sclose);
  if (ds.id < 0 || H5Sget_simple_extent_ndims(s) != 2)
    fail(ErrorCategory::format, "{}: '{}' is not a 2-D dataset", path, name);
  H5Sget_simple_extent_dims(s, dims, nullptr);
  if (dims[0] < 2 || dims[1] < 2 || dims[0] > 8192 || dims[1] > 8192)
    fail(ErrorCategory::format, "{}: '{}' has shape {} x {} (2 to 8192 each)", path, name, dims[0],
         dims[1]);
  std::vector<float> v(dims[0] * dims[1]);
  if (H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) < 0)
    fail(ErrorCategory::format, "{}: cannot read '{}' as numbers", path, name);
  return v;
}

}  // namespace

void write_candidate_h5(const std::string& path, const CandidateCutout& c) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  TempFileGuard guard(tmp);
  struct Remove {
    const std::string& p;
    bool keep = false;
    ~Remove() {
      std::error_code ec;
      if (!keep) std::filesystem::remove(p, ec);
    }
  } remove{tmp};
  {
    H5Id f(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    if (f.id < 0) fail(ErrorCategory::io, "cannot create '{}'", tmp);
    const FilterbankHeader& h = c.header;
    // your's Candidate attributes.
    attr(f, "cand_id", c.cand_id);
    attr(f, "tcand", c.tcand_s);
    attr(f, "dm", c.dm);
    attr_int(f, "dm_opt", -1);
    attr(f, "snr", c.snr);
    attr_int(f, "snr_opt", -1);
    attr_int(f, "width", c.width);
    attr_int(f, "label", c.label);
    attr_bools(f, "rfi_mask", {0});
    attr_bools(f, "kill_mask", c.kill_mask);
    attr_strings(f, "filelist", {c.file});
    // your's unified header (vars(your_header)), then its properties tsamp, nchans, foff,
    // nspectra; no decimation of the source (factors 1).
    attr(f, "filename", c.file);
    attr(f, "basename", std::filesystem::path(c.file).stem().string());
    attr(f, "source_name", h.source_name);
    attr(f, "ra_deg", sigproc_angle_deg(h.src_raj, 15));
    attr(f, "dec_deg", sigproc_angle_deg(h.src_dej, 1));
    attr(f, "bw", h.nchans * h.foff);
    attr(f, "center_freq", h.fch1 + h.nchans * h.foff / 2 - h.foff / 2);
    attr_int(f, "nbits", std::max(h.nbits, 8));
    attr_int(f, "native_nbits", h.nbits);
    attr(f, "format", c.file_format);
    attr(f, "dtype", dtype_name(h));
    attr_int(f, "time_decimation_factor", 1);
    attr_int(f, "frequency_decimation_factor", 1);
    attr(f, "native_tsamp", h.tsamp);
    attr(f, "native_foff", h.foff);
    attr_int(f, "native_nchans", h.nchans);
    attr_int(f, "native_nspectra", h.nsamples);
    attr(f, "fch1", h.fch1);
    attr_int(f, "npol", 1);
    attr(f, "poln_order", "AA+BB");
    attr(f, "tstart", h.tstart);
    attr(f, "tstart_utc", mjd_isot(h.tstart));
    attr(f, "tsamp", h.tsamp);
    attr_int(f, "nchans", h.nchans);
    attr(f, "foff", h.foff);
    attr_int(f, "nspectra", h.nsamples);
    // SIGPROC keywords your's earlier files carried.
    attr_int(f, "telescope_id", h.telescope_id);
    attr_int(f, "machine_id", h.machine_id);
    attr_int(f, "data_type", h.data_type);
    attr_int(f, "nifs", h.nifs);
    attr(f, "src_raj", h.src_raj);
    attr(f, "src_dej", h.src_dej);
    attr(f, "az_start", h.az_start);
    attr(f, "za_start", h.za_start);
    // warpbeam's: how the arrays were made, the search's candidate, provenance.
    attr_int(f, "wb_time_decimation", c.time_decimation);
    attr(f, "wb_cutout_tsamp", c.cutout_tsamp_s());
    attr(f, "wb_dm_min", c.dm_min);
    attr(f, "wb_dm_max", c.dm_max);
    attr_int(f, "wb_nstart_read", c.nstart_read);
    attr_int(f, "wb_nsamp_read", c.nsamp_read);
    attr(f, "wb_search", c.search.dump());
    attr(f, "wb_provenance", c.provenance.dump());
    attr(f, "wb_version", c.provenance.value("warpbeam_version", std::string()));
    attr(f, "wb_commit", c.provenance.value("git_commit", std::string()));
    dataset(f, "data_freq_time", c.freq_time, static_cast<hsize_t>(c.time_size),
            static_cast<hsize_t>(c.frequency_size), "time", "frequency");
    dataset(f, "data_dm_time", c.dm_time, static_cast<hsize_t>(c.dm_size),
            static_cast<hsize_t>(c.time_size), "dm", "time");
    check(H5Fflush(f, H5F_SCOPE_GLOBAL), "flush");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) fail(ErrorCategory::io, "cannot rename '{}' to '{}': {}", tmp, path, ec.message());
  remove.keep = true;
}

CandidateCutout read_candidate_h5(const std::string& path) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  if (!std::filesystem::exists(path))
    fail(ErrorCategory::io, "cannot open '{}': no such file", path);
  if (H5Fis_hdf5(path.c_str()) <= 0) fail(ErrorCategory::format, "'{}' is not an HDF5 file", path);
  detail::check_hdf5_structure(path, static_cast<std::int64_t>(std::filesystem::file_size(path)));
  H5Id f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (f.id < 0) fail(ErrorCategory::io, "cannot open '{}'", path);
  CandidateCutout c;
  hsize_t ft[2] = {}, dt[2] = {};
  c.freq_time = read_2d(f, "data_freq_time", path, ft);
  c.dm_time = read_2d(f, "data_dm_time", path, dt);
  c.time_size = static_cast<int>(ft[0]);
  c.frequency_size = static_cast<int>(ft[1]);
  c.dm_size = static_cast<int>(dt[0]);
  if (dt[1] != ft[0])
    fail(ErrorCategory::format, "{}: data_dm_time has {} samples, data_freq_time {}", path, dt[1],
         ft[0]);
  c.cand_id = read_string_attr(f, "cand_id", std::filesystem::path(path).stem().string());
  c.file = read_string_attr(f, "filename", "");
  c.file_format = read_string_attr(f, "format", "");
  c.tcand_s = read_attr(f, "tcand", path);
  c.dm = read_attr(f, "dm", path);
  c.snr = read_attr(f, "snr", path);
  const double width = read_attr(f, "width", path);
  c.width = width >= 1 && width <= (1 << 30) ? static_cast<int>(width) : 0;  // 0: refused below
  c.label = static_cast<int>(read_int_attr(f, "label", path, -1, -1e9, 1e9));
  if (c.width < 1 || !std::isfinite(c.dm) || c.dm < 0)
    fail(ErrorCategory::format, "{}: width {} / dm {} are not a candidate's", path, c.width, c.dm);
  FilterbankHeader& h = c.header;
  h.tsamp = read_attr(f, "tsamp", path);
  h.fch1 = read_attr(f, "fch1", path);
  h.foff = read_attr(f, "foff", path);
  // Range-checked as a double: a file's huge value must not reach an int (or an allocation).
  const double nchans = read_attr(f, "nchans", path);
  if (!(nchans >= 1 && nchans <= (1 << 20)))
    fail(ErrorCategory::format, "{}: nchans {} is not a filterbank's (1 to 2^20)", path, nchans);
  h.nchans = static_cast<int>(nchans);
  h.tstart = read_attr(f, "tstart", path, 0);
  h.nsamples = read_int_attr(f, "nspectra", path, 0, 0, 9e15);
  h.source_name = read_string_attr(f, "source_name", "");
  if (!(h.tsamp > 0) || h.nchans < 1 || !(h.foff != 0) || !std::isfinite(h.fch1))
    fail(ErrorCategory::format, "{}: tsamp {} / nchans {} / foff {} are not a filterbank's", path,
         h.tsamp, h.nchans, h.foff);
  c.kill_mask = read_flags_attr(f, "kill_mask", path, static_cast<std::size_t>(h.nchans));
  // your_candmaker's choices when the file does not record them.
  c.time_decimation = static_cast<int>(
      read_int_attr(f, "wb_time_decimation", path, std::max(1, c.width / 2), 1, 1 << 30));
  c.dm_min = read_attr(f, "wb_dm_min", path, 0);
  c.dm_max = read_attr(f, "wb_dm_max", path, 2 * c.dm);
  if (!std::isfinite(c.dm_min) || !std::isfinite(c.dm_max) || c.dm_max < c.dm_min ||
      !std::isfinite(h.tstart) || !std::isfinite(c.tcand_s))
    fail(ErrorCategory::format,
         "{}: wb_dm_min {} / wb_dm_max {} / tstart {} / tcand {} are not a "
         "candidate's",
         path, c.dm_min, c.dm_max, h.tstart, c.tcand_s);
  c.nstart_read = read_int_attr(f, "wb_nstart_read", path, 0, -9e15, 9e15);
  c.nsamp_read = read_int_attr(f, "wb_nsamp_read", path, 0, 0, 9e15);
  try {
    c.search = nlohmann::json::parse(read_string_attr(f, "wb_search", "null"));
    c.provenance = nlohmann::json::parse(read_string_attr(f, "wb_provenance", "null"));
  } catch (const nlohmann::json::exception&) {
    fail(ErrorCategory::format, "{}: wb_search / wb_provenance are not JSON", path);
  }
  return c;
}

#endif  // WARPBEAM_HAVE_HDF5

}  // namespace warpbeam::io
