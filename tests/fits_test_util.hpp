#pragma once
// A minimal FITS primary-HDU reader for the tests (FITS standard 4.0: 2880-byte blocks of 80-byte
// cards, big-endian IEEE floats for BITPIX -32), independent of cfitsio.
#include <cstdint>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_util.hpp"

namespace wbtest {

struct Fits {
  std::map<std::string, std::string> cards;
  std::vector<long> naxes;
  std::vector<float> data;
  double num(const std::string& k) const { return std::stod(cards.at(k)); }
  std::string str(const std::string& k) const {
    std::string v = cards.at(k);
    const auto a = v.find('\''), b = v.rfind('\'');
    v = v.substr(a + 1, b - a - 1);
    while (!v.empty() && v.back() == ' ')
      v.pop_back();
    return v;
  }
};

inline Fits read_fits(const std::string& path) {
  const std::string b = slurp(path);
  Fits f;
  std::size_t o = 0;
  for (;; o += 80) {
    if (o + 80 > b.size()) throw std::runtime_error("no END card");
    const std::string card = b.substr(o, 80);
    const std::string key = card.substr(0, 8).substr(0, card.substr(0, 8).find(' '));
    if (key == "END") break;
    if (card.size() > 9 && card[8] == '=') {
      std::string v = card.substr(10);
      if (v.find('\'') == std::string::npos) v = v.substr(0, v.find('/'));
      f.cards[key] = v;
    }
  }
  const std::size_t data_at = (o / 2880 + 1) * 2880;
  const int naxis = std::stoi(f.cards.at("NAXIS"));
  std::size_t count = 1;
  for (int i = 1; i <= naxis; ++i) {
    f.naxes.push_back(std::stol(f.cards.at("NAXIS" + std::to_string(i))));
    count *= static_cast<std::size_t>(f.naxes.back());
  }
  if (b.size() < data_at + 4 * count) throw std::runtime_error("truncated FITS data: " + path);
  f.data.resize(count);
  for (std::size_t i = 0; i < count; ++i) {
    std::uint32_t u = 0;
    for (int k = 0; k < 4; ++k)
      u = (u << 8) | static_cast<unsigned char>(b[data_at + 4 * i + k]);
    std::memcpy(&f.data[i], &u, 4);
  }
  return f;
}

}  // namespace wbtest
