// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// csv_report.hpp — the one CSV format every perf_tests bench appends to,
// so perf_tests/run_sweeps.sh can collect every backend's sweep in one file
// and plot them side by side.
//
// Contract for a bench binary (host_sweep, mpi_bench, moonep_gpu_bench):
//   * `--csv FILE` appends one row per measured point to FILE, writing the
//     header first when FILE is new or empty; its normal table output stays.
//   * `--smoke` runs a tiny configuration (seconds), for CTest and
//     `run_sweeps.sh --smoke`.
//   * under MPI only rank 0 writes.
//   * its usage text or source mentions "--csv" (run_sweeps.sh looks for the
//     string in the binary before passing the option).
// Every column is filled in every row (no empty fields): see kCsvHeader.
#pragma once

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include <unistd.h>

#include "moonep/config.hpp"

// kokkos_version() reads KOKKOS_VERSION: include <Kokkos_Core.hpp> before
// this header in a bench that uses Kokkos.

// Set by perf_tests/CMakeLists.txt at configure time (git describe of the
// source tree); "unknown" outside a git checkout.
#ifndef MOONEP_GIT_REVISION
#define MOONEP_GIT_REVISION "unknown"
#endif

namespace moonep::perf {

inline constexpr const char* kCsvHeader =
    "machine,backend,world,kokkos_version,git_revision,R,E,K,S,B,tp,imbalance,time_per_step_us,entries_per_s,"
    "step,entries";

// One measured point. backend: reference | portable | cuda | sort (a
// floor, not a planner); world: inprocess | shared | rma | virtual (GPU).
// step: full, or ragged (docs/spec/planning.md "Ragged steps": rank r holds
// s_r <= S tokens, buffers still sized for S); entries: the step's routed
// entries T = sum of s_r*K, what entries_per_s counts.
struct CsvRow {
  std::string backend, world;
  Config config;
  double imbalance = 0;
  double time_per_step_us = 0;
  double entries_per_s = 0;  // all routed entries of a step (`entries`)
  std::string step = "full";
  std::int64_t entries = -1;  // -1: a full step's R*S*K
};

// A field with a comma or quote is quoted, quotes doubled (RFC 4180).
inline std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

inline std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      std::string m = line.substr(line.find(':') + 1);
      m.erase(0, m.find_first_not_of(' '));
      return m;
    }
  }
  return "unknown CPU";
}

// "hostname / CPU model" plus " / GPU model" when the bench ran on one.
inline std::string machine(const std::string& gpu_model = "") {
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') std::snprintf(host, sizeof host, "unknown-host");
  std::string m = std::string(host) + " / " + cpu_model();
  if (!gpu_model.empty()) m += " / " + gpu_model;
  return m;
}

// "4.3.1" from KOKKOS_VERSION (major*10000 + minor*100 + patch); "none" in
// a bench compiled without Kokkos.
inline std::string kokkos_version() {
#ifdef KOKKOS_VERSION
  return std::to_string(KOKKOS_VERSION / 10000) + "." + std::to_string(KOKKOS_VERSION / 100 % 100) + "." +
         std::to_string(KOKKOS_VERSION % 100);
#else
  return "none";
#endif
}

inline std::string git_revision() { return MOONEP_GIT_REVISION[0] ? MOONEP_GIT_REVISION : "unknown"; }

// Appends rows to one CSV file; the header goes in when the file is empty.
class CsvReport {
 public:
  explicit CsvReport(const std::string& path, const std::string& gpu_model = "")
      : path_(path), machine_(machine(gpu_model)) {
    std::ofstream out(path_, std::ios::app);
    if (!out) throw std::runtime_error("cannot open " + path_ + " for appending");
    out.seekp(0, std::ios::end);
    if (out.tellp() == 0) out << kCsvHeader << "\n";
  }

  void append(const CsvRow& r) const {
    std::ofstream out(path_, std::ios::app);
    const Config& c = r.config;
    std::ostringstream line;
    line.precision(6);
    line << csv_field(machine_) << ',' << csv_field(r.backend) << ',' << csv_field(r.world) << ','
         << kokkos_version() << ',' << csv_field(git_revision()) << ',' << c.ranks << ',' << c.experts << ','
         << c.topk << ',' << c.tokens << ',' << c.copy_slots << ',' << c.token_padding << ',' << r.imbalance << ','
         << r.time_per_step_us << ',' << r.entries_per_s << ',' << csv_field(r.step) << ','
         << (r.entries >= 0 ? r.entries : static_cast<std::int64_t>(c.ranks) * c.entries()) << '\n';
    out << line.str();
    if (!out) throw std::runtime_error("cannot write to " + path_);
  }

 private:
  std::string path_, machine_;
};

}  // namespace moonep::perf
