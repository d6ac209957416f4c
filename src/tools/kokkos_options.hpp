// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private to the command-line tools: Kokkos' own --kokkos-* options,
// checked before they reach Kokkos::initialize. Kokkos reads their values
// with std::stoi, so "--kokkos-threads=abc" ended a run with "error: stoi"
// (exit 1) or a second line of Kokkos' own; any command that passes
// --kokkos-* options on (moonep-plan, moonep-layer) checks each with this.
#pragma once

#include <string>

namespace moonep::tools {

// Throws UsageError (exit 2) naming the option for a --kokkos-* option
// whose value Kokkos could not read: an integer option (--kokkos-threads,
// --kokkos-num-threads, --kokkos-numa, --kokkos-device, --kokkos-device-id,
// --kokkos-skip-device) without "=N" or with anything but a 32-bit integer
// there; --kokkos-ndevices / --kokkos-num-devices without "=N" or "=N,M";
// --kokkos-map-device-id-by other than random or mpi_rank; a flag
// (--kokkos-help, --kokkos-disable-warnings, ...) given a value. Other
// --kokkos-* options are Kokkos' to judge and pass as they are.
void check_kokkos_option(const std::string& arg);

}  // namespace moonep::tools
