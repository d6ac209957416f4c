// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private to moonep-plan: Kokkos initialized for the lifetime of an object,
// with only the --kokkos-* options (Kokkos would otherwise react to ours,
// e.g. print its own --help).
#pragma once

#include <string>
#include <vector>

#include <Kokkos_Core.hpp>

namespace moonep::tools {

class KokkosSession {
 public:
  KokkosSession(const std::string& program, const std::vector<std::string>& kokkos_args) {
    std::vector<std::string> args{program};
    args.insert(args.end(), kokkos_args.begin(), kokkos_args.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int argc = static_cast<int>(args.size());
    Kokkos::initialize(argc, argv.data());
  }
  ~KokkosSession() { Kokkos::finalize(); }
  KokkosSession(const KokkosSession&) = delete;
  KokkosSession& operator=(const KokkosSession&) = delete;
};

}  // namespace moonep::tools
