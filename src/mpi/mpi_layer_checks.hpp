// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private: the argument checks of moonep::MpiLayer (moonep/mpi_layer.hpp).
// They return the error line ("" when good) instead of throwing, because
// every process must first learn whether any other found one
// (MpiLayerWindow::start).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "moonep/mpi_layer.hpp"

namespace moonep::layer {

// The plan's first problem for rank `my_rank` of a layer of config `c`:
// another configuration or rank, a field of the wrong length, a value
// that would lead outside a buffer.
std::string mpi_plan_error(const MpiLayerPlan& plan, const Config& c, int my_rank);

// "<name> is [a][b], expected [<rows_name>][<cols_name>] = [rows][cols]"
// unless the view has those extents.
template <class V>
std::string extent_error(const char* name, const V& v, std::int64_t rows, std::int64_t cols, const char* rows_name,
                         const char* cols_name) {
  if (v.extent(0) == static_cast<std::size_t>(rows) && v.extent(1) == static_cast<std::size_t>(cols)) return "";
  return std::string(name) + " is [" + std::to_string(v.extent(0)) + "][" + std::to_string(v.extent(1)) +
         "], expected [" + rows_name + "][" + cols_name + "] = [" + std::to_string(rows) + "][" +
         std::to_string(cols) + "]";
}
template <class V>
std::string extent_error(const char* name, const V& v, std::int64_t n, const char* n_name) {
  if (v.extent(0) == static_cast<std::size_t>(n)) return "";
  return std::string(name) + " is [" + std::to_string(v.extent(0)) + "], expected [" + n_name + "] = [" +
         std::to_string(n) + "]";
}

// The first non-empty line of `errors` ("" when all are).
inline std::string first_error(std::initializer_list<std::string> errors) {
  for (const std::string& e : errors)
    if (!e.empty()) return e;
  return "";
}

}  // namespace moonep::layer
