#pragma once
// One bind_* function per area; module.cpp calls them all.
#include <nanobind/nanobind.h>

namespace wbpy {
void bind_io(nanobind::module_& m);
void bind_dedisp(nanobind::module_& m);
void bind_search(nanobind::module_& m);
void bind_das(nanobind::module_& m);
void bind_beamform(nanobind::module_& m);
void bind_epic(nanobind::module_& m);
void bind_sim(nanobind::module_& m);
}  // namespace wbpy
