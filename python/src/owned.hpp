#pragma once
// NumPy arrays that own a C++ vector's memory (moved in, freed with the array): results made on
// the host (file contents, simulations) reach Python without a copy.
#include <cstdint>
#include <initializer_list>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

namespace wbpy {

template <class T>
nanobind::ndarray<nanobind::numpy, T> to_numpy(std::vector<T>&& v,
                                               std::initializer_list<std::size_t> shape) {
  auto* heap = new std::vector<T>(std::move(v));
  nanobind::capsule owner(heap, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nanobind::ndarray<nanobind::numpy, T>(heap->data(), shape, owner);
}

template <class T>
nanobind::ndarray<nanobind::numpy, T> to_numpy(std::vector<T>&& v,
                                               const std::vector<std::size_t>& shape) {
  auto* heap = new std::vector<T>(std::move(v));
  nanobind::capsule owner(heap, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nanobind::ndarray<nanobind::numpy, T>(heap->data(), shape.size(), shape.data(), owner);
}

}  // namespace wbpy
