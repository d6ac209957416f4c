// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// RunFingerprint (run_fingerprint.hpp): building it, and saying how two
// differ in the words of the options that made them.
#include "run_fingerprint.hpp"

#include <cstdio>
#include <cstring>

#include "moonep/config.hpp"

namespace moonep::tools {
namespace {

enum Field {
  kVersion, kMode, kSteps, kBackend, kWorld, kRanks, kExperts, kTopk, kTokens, kCopySlots, kPadding,
  kHasTpe, kImbalance, kSeed, kDigest, kEntries
};
static_assert(kEntries + 1 == RunFingerprint::kFields, "one name per field");

// Changes whenever the fields change meaning, so that two builds of
// moonep-plan never compare fingerprints of different layouts.
constexpr std::int64_t kLayout = 0x4d4f4f4e45500001;  // "MOONEP" v1

std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
  // splitmix64's finaliser over h ^ v: every input bit reaches every
  // output bit, so a swapped or changed value changes the digest.
  std::uint64_t z = (h ^ v) + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::uint64_t digest_rows(std::uint64_t h, const std::vector<std::vector<std::int32_t>>& rows) {
  h = mix(h, rows.size());
  for (const auto& row : rows) {
    h = mix(h, row.size());
    // Two values per step: a digest of a 4 GB routing costs under a second.
    std::size_t i = 0;
    for (; i + 1 < row.size(); i += 2)
      h = mix(h, (static_cast<std::uint64_t>(static_cast<std::uint32_t>(row[i])) << 32) |
                     static_cast<std::uint32_t>(row[i + 1]));
    if (i < row.size()) h = mix(h, static_cast<std::uint32_t>(row[i]));
  }
  return h;
}

const char* backend_name(std::int64_t b) {
  return b < 0 ? "the default backend" : to_string(static_cast<Backend>(b));
}

std::string config_of(const RunFingerprint& f) {
  Config c{static_cast<int>(f.v[kRanks]),  static_cast<int>(f.v[kExperts]),  static_cast<int>(f.v[kTopk]),
           static_cast<int>(f.v[kTokens]), static_cast<int>(f.v[kCopySlots]), static_cast<int>(f.v[kPadding])};
  return describe(c);
}

double imbalance_of(const RunFingerprint& f) {
  double d = 0;
  std::memcpy(&d, &f.v[kImbalance], sizeof d);
  return d;
}

// What rank `r` was started with, for field `i`, in the user's words.
std::string option_value(const RunFingerprint& f, int i) {
  char buf[64];
  switch (i) {
    case kMode: return f.v[kMode] ? "a synthetic step" : "--input";
    case kSteps: return "--steps " + std::to_string(f.v[kSteps]);
    case kBackend: return f.v[kBackend] < 0 ? "no --backend" : std::string("--backend ") + backend_name(f.v[kBackend]);
    case kWorld: {
      static const char* const kinds[] = {"auto", "shared", "rma"};
      return std::string("--mpi-world ") + kinds[f.v[kWorld] >= 0 && f.v[kWorld] < 3 ? f.v[kWorld] : 0];
    }
    case kImbalance:
      std::snprintf(buf, sizeof buf, "--imbalance %g", imbalance_of(f));
      return buf;
    case kSeed: return "--seed " + std::to_string(static_cast<std::uint64_t>(f.v[kSeed]));
    default: return std::to_string(f.v[i]);
  }
}

}  // namespace

std::uint64_t problem_digest(const Problem& p) {
  std::uint64_t h = digest_rows(0x6d6f6f6e6570ull, p.routing);
  h = mix(h, p.tokens_per_expert.has_value());
  if (p.tokens_per_expert) h = digest_rows(h, *p.tokens_per_expert);
  // (a ragged step's counts; a full problem's digest stays what it was)
  if (p.tokens_per_rank) h = digest_rows(mix(h, 0x72616767ull), TokensPerExpert{*p.tokens_per_rank});
  return h;
}

RunFingerprint fingerprint_of(const PlanOptions& o, const std::string& mpi_world, const Problem& p) {
  RunFingerprint f;
  f.v[kVersion] = kLayout;
  f.v[kMode] = o.synthetic() ? 1 : 0;
  f.v[kSteps] = o.steps;
  f.v[kBackend] = o.backend ? static_cast<std::int64_t>(*o.backend) : -1;
  f.v[kWorld] = mpi_world == "shared" ? 1 : mpi_world == "rma" ? 2 : 0;
  const Config& c = p.config;
  f.v[kRanks] = c.ranks, f.v[kExperts] = c.experts, f.v[kTopk] = c.topk, f.v[kTokens] = c.tokens;
  f.v[kCopySlots] = c.copy_slots, f.v[kPadding] = c.token_padding;
  f.v[kHasTpe] = p.tokens_per_expert.has_value();
  // The synthetic routing's recipe (its digest covers the result).
  if (o.synthetic()) {
    std::memcpy(&f.v[kImbalance], &o.imbalance, sizeof o.imbalance);
    f.v[kSeed] = static_cast<std::int64_t>(o.seed);
  }
  f.v[kDigest] = static_cast<std::int64_t>(problem_digest(p));
  f.v[kEntries] = c.ranks * c.entries();
  return f;
}

std::string fingerprint_difference(const RunFingerprint& mine, const RunFingerprint& theirs, int rank) {
  const std::string them = "rank " + std::to_string(rank);
  if (theirs.v[kVersion] != mine.v[kVersion])
    return them + " runs a different build of moonep-plan than rank 0; every rank must run the same one";
  for (int i : {kMode, kSteps, kBackend, kWorld, kImbalance, kSeed}) {
    if (theirs.v[i] != mine.v[i]) {
      return them + " was started with " + option_value(theirs, i) + ", rank 0 with " + option_value(mine, i) +
             "; every rank must be started with the same options";
    }
  }
  for (int i = kRanks; i <= kHasTpe; ++i) {
    if (theirs.v[i] != mine.v[i]) {
      return them + " read a problem of " + config_of(theirs) + (theirs.v[kHasTpe] ? " with" : " without") +
             " tokens_per_expert, rank 0 one of " + config_of(mine) + (mine.v[kHasTpe] ? " with" : " without") +
             " tokens_per_expert; every rank must read the same problem file";
    }
  }
  if (theirs.v[kDigest] != mine.v[kDigest] || theirs.v[kEntries] != mine.v[kEntries]) {
    char digests[64];
    std::snprintf(digests, sizeof digests, "%016llx vs %016llx",
                  static_cast<unsigned long long>(theirs.v[kDigest]),
                  static_cast<unsigned long long>(mine.v[kDigest]));
    return them + " read a different routing than rank 0 (same " + config_of(mine) + ", digest " + digests +
           "); every rank must read the same problem file";
  }
  return "";
}

}  // namespace moonep::tools
