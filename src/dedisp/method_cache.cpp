// cached_method_tables(): the subband / fdmt tables of recent configurations, shared.
//
// Why. Deriving a sub-band plan is the costly part of making it (D1, 1122 trials: the greedy
// grid and the S/N model of every trial, seconds of CPU), and a file search derives the same
// tables many times: select_algorithm() and preview() while it plans, estimate_workspace() per
// DM chunk, then one plan per CUDA lane (or CPU searcher) and per plane length (first, middle
// and last gulps differ). The tables depend only on the band, the trials, the killmask, the
// pulse width and the method's settings, not on the samples per execute (except FDMT's time
// block, which is part of the key), so one derivation serves them all. A few entries are kept
// (least recently used first out); the tables are immutable once made and shared by
// shared_ptr, so a plan that holds them outlives its cache entry safely.
#include <algorithm>
#include <cstring>
#include <list>
#include <memory>
#include <mutex>
#include <string>

#include "dedisp/method_tables.hpp"

namespace warpbeam::dedisp::detail {
namespace {

constexpr std::size_t kEntries = 8;

template <class T>
void put(std::string& k, const T& v) {
  k.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

template <class T>
void put_vector(std::string& k, const std::vector<T>& v) {
  put(k, v.size());
  if (!v.empty()) k.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// Everything make_method_tables() reads, as bytes.
std::string key_of(const DedispersionConfig& c, Backend backend, std::int64_t nsamples_out) {
  std::string k;
  put(k, static_cast<int>(c.algorithm));
  put(k, c.nchans);
  put(k, c.fch1_mhz);
  put(k, c.foff_mhz);
  put(k, c.tsamp_s);
  put(k, c.pulse_width_us);
  put_vector(k, c.dms);
  put_vector(k, c.killmask);
  if (c.algorithm == Algorithm::subband) {
    const SubbandConfig& s = c.subband;
    put(k, s.subbands);
    put(k, s.coarse_dm_step);
    put(k, s.smearing);
    put(k, s.min_snr_fraction);
    put(k, s.phases);
    put_vector(k, s.trial_coarse_dms);
    put_vector(k, s.trial_phases);
  } else if (c.algorithm == Algorithm::fdmt) {
    put(k, fdmt_block(c, backend, nsamples_out));
  }
  return k;
}

struct Entry {
  std::string key;
  std::shared_ptr<const MethodTables> tables;
};

}  // namespace

std::shared_ptr<const MethodTables> cached_method_tables(const DedispersionConfig& c,
                                                         Backend backend,
                                                         const std::vector<std::int32_t>& delays,
                                                         std::int64_t nsamples_out) {
  // Brute force has no tables to derive: its report is the delay table (cheap, and as large as
  // what a key would hold).
  if (c.algorithm != Algorithm::subband && c.algorithm != Algorithm::fdmt)
    return std::make_shared<const MethodTables>(
        make_method_tables(c, backend, delays, nsamples_out));
  static std::mutex mutex;
  static std::list<Entry> entries;  // most recently used first
  const std::string key = key_of(c, backend, nsamples_out);
  {
    const std::lock_guard<std::mutex> lock(mutex);
    for (auto it = entries.begin(); it != entries.end(); ++it)
      if (it->key == key) {
        entries.splice(entries.begin(), entries, it);
        return it->tables;
      }
  }
  // Derived outside the lock (it is long and may throw: nothing is cached then); two threads
  // asking at once both derive, the same tables.
  auto tables =
      std::make_shared<const MethodTables>(make_method_tables(c, backend, delays, nsamples_out));
  const std::lock_guard<std::mutex> lock(mutex);
  entries.push_front({key, tables});
  if (entries.size() > kEntries) entries.pop_back();
  return tables;
}

}  // namespace warpbeam::dedisp::detail
