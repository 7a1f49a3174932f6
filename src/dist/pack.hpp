#pragma once
// Internal: packing results into bytes to send between ranks. Values are copied as they are in
// memory (every rank runs the same build on the same architecture); the reader checks bounds.
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "warpbeam/core.hpp"

namespace warpbeam::dist::detail {

class Packer {
 public:
  template <class T>
  void put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    bytes_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  template <class T>
  void put_vector(const std::vector<T>& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    put<std::uint64_t>(v.size());
    bytes_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  void put_string(const std::string& s) {
    put<std::uint64_t>(s.size());
    bytes_ += s;
  }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

class Unpacker {
 public:
  explicit Unpacker(const std::string& bytes) : bytes_(bytes) {}
  template <class T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    T v;
    std::memcpy(&v, take(sizeof(T)), sizeof(T));
    return v;
  }
  template <class T>
  std::vector<T> get_vector() {
    const auto n = get<std::uint64_t>();
    if (n > (bytes_.size() - pos_) / sizeof(T)) corrupt();
    std::vector<T> v(n);
    const char* src = take(n * sizeof(T));
    if (n) std::memcpy(v.data(), src, n * sizeof(T));  // an empty vector's data() may be null
    return v;
  }
  std::string get_string() {
    const auto n = get<std::uint64_t>();
    return std::string(take(n), n);
  }
  bool done() const { return pos_ == bytes_.size(); }

 private:
  const char* take(std::size_t n) {
    if (n > bytes_.size() - pos_) corrupt();
    const char* p = bytes_.data() + pos_;
    pos_ += n;
    return p;
  }
  [[noreturn]] static void corrupt() {
    fail(ErrorCategory::io,
         "a result sent between ranks is truncated (ranks of different builds?)");
  }
  const std::string& bytes_;
  std::size_t pos_ = 0;
};

}  // namespace warpbeam::dist::detail
