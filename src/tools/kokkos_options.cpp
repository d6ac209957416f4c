// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Kokkos' own options (kokkos_options.hpp).
#include "kokkos_options.hpp"

#include <cerrno>
#include <climits>
#include <cstdlib>

#include "moonep/error.hpp"
#include "plan_options.hpp"

namespace moonep::tools {
namespace {

// An int as std::stoi reads it, and nothing after it.
bool is_int(const std::string& text, bool* out_of_range = nullptr) {
  if (text.empty() || text[0] == ' ' || text[0] == '+') return false;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (*end != '\0') return false;
  const bool fits = errno != ERANGE && v >= INT_MIN && v <= INT_MAX;
  if (out_of_range) *out_of_range = !fits;
  return fits;
}

}  // namespace

void check_kokkos_option(const std::string& arg) {
  const auto eq = arg.find('=');
  const std::string name = arg.substr(0, eq);
  const bool has_value = eq != std::string::npos;
  const std::string value = has_value ? arg.substr(eq + 1) : std::string();
  auto bad = [&](const std::string& expected) {
    throw UsageError(name + ": expected " + expected + (has_value ? ", got '" + printable(value, 60) + "'" : ""));
  };
  for (const char* n : {"--kokkos-threads", "--kokkos-num-threads", "--kokkos-numa", "--kokkos-device",
                        "--kokkos-device-id", "--kokkos-skip-device"}) {
    bool out_of_range = false;
    if (name == n && !is_int(value, &out_of_range)) {
      if (out_of_range) throw UsageError(name + ": " + printable(value, 60) + " is outside the 32-bit integers");
      bad(std::string("an integer, as ") + n + "=N");
    }
  }
  if (name == "--kokkos-ndevices" || name == "--kokkos-num-devices") {
    const auto comma = value.find(',');
    if (!is_int(value.substr(0, comma)) || (comma != std::string::npos && !is_int(value.substr(comma + 1))))
      bad("a device count, as " + name + "=N or " + name + "=N,M (M: a device to skip)");
  }
  if (name == "--kokkos-map-device-id-by" && value != "random" && value != "mpi_rank")
    bad("random or mpi_rank");
  for (const char* n : {"--kokkos-help", "--kokkos-disable-warnings", "--kokkos-print-configuration",
                        "--kokkos-tune-internals", "--kokkos-tools-help"}) {
    if (name == n && has_value) bad("no value");
  }
}

}  // namespace moonep::tools
