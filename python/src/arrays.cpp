#include "arrays.hpp"

#include <fmt/format.h>

namespace wbpy {

std::string dtype_name(nb::dlpack::dtype d) {
  const char* kind = "?";
  switch (static_cast<nb::dlpack::dtype_code>(d.code)) {
    case nb::dlpack::dtype_code::Int:
      kind = "int";
      break;
    case nb::dlpack::dtype_code::UInt:
      kind = "uint";
      break;
    case nb::dlpack::dtype_code::Float:
      kind = "float";
      break;
    case nb::dlpack::dtype_code::Complex:
      kind = "complex";
      break;
    case nb::dlpack::dtype_code::Bool:
      return "bool";
    default:
      break;
  }
  return fmt::format("{}{}", kind, d.bits);
}

template <class A>
Space space_of(const A& a, const char* name) {
  const int t = a.device_type();
  if (t == nb::device::cpu::value || t == nb::device::cuda_host::value) return Space::host;
  if (t == nb::device::cuda::value || t == nb::device::cuda_managed::value) return Space::device;
  throw nb::type_error(
      fmt::format("{}: arrays on DLPack device type {} are not supported (host or CUDA only)", name,
                  t)
          .c_str());
}
template Space space_of(const InArray&, const char*);
template Space space_of(const OutArray&, const char*);

template <class A>
void require_shape(const A& a, const std::vector<std::int64_t>& shape, const char* name) {
  std::vector<std::int64_t> got(a.ndim());
  for (std::size_t i = 0; i < a.ndim(); ++i)
    got[i] = static_cast<std::int64_t>(a.shape(i));
  bool ok = got.size() == shape.size();
  for (std::size_t i = 0; ok && i < shape.size(); ++i)
    ok = shape[i] < 0 || shape[i] == got[i];
  if (!ok) {
    std::vector<std::string> want;
    for (auto s : shape)
      want.push_back(s < 0 ? "any" : std::to_string(s));
    throw nb::value_error(fmt::format("{}: shape ({}), expected ({})", name, fmt::join(got, ", "),
                                      fmt::join(want, ", "))
                              .c_str());
  }
  std::int64_t s = 1;
  for (std::size_t i = a.ndim(); i-- > 0;) {
    if (got[i] != 1 && a.stride(i) != s)
      throw nb::value_error(
          fmt::format("{}: the array is not C-contiguous (strides in elements ({})); pass a "
                      "row-major copy (numpy/cupy.ascontiguousarray, tensor.contiguous())",
                      name,
                      [&] {
                        std::vector<std::int64_t> st(a.ndim());
                        for (std::size_t k = 0; k < a.ndim(); ++k)
                          st[k] = a.stride(k);
                        return fmt::format("{}", fmt::join(st, ", "));
                      }())
              .c_str());
    s *= got[i];
  }
}
template void require_shape(const InArray&, const std::vector<std::int64_t>&, const char*);
template void require_shape(const OutArray&, const std::vector<std::int64_t>&, const char*);

void require_same_place(const InArray& in, const char* in_name, const OutArray& out,
                        const char* out_name) {
  const Space si = space_of(in, in_name), so = space_of(out, out_name);
  if (si != so)
    throw nb::value_error(fmt::format("{} is in {} memory but {} is in {} memory", out_name,
                                      so == Space::host ? "host" : "device", in_name,
                                      si == Space::host ? "host" : "device")
                              .c_str());
  if (si == Space::device && in.device_id() != out.device_id())
    throw nb::value_error(fmt::format("{} is on CUDA device {} but {} is on device {}", out_name,
                                      out.device_id(), in_name, in.device_id())
                              .c_str());
}

void use_device(int device) {
  if (device >= 0) warpbeam::set_device(device);
}

nb::object json_to_python(const std::string& text) {
  return nb::module_::import_("json").attr("loads")(nb::str(text.c_str(), text.size()));
}
std::string python_to_json(const nb::handle& obj) {
  return nb::cast<std::string>(nb::module_::import_("json").attr("dumps")(obj));
}

}  // namespace wbpy
