// moonep/error.hpp — the exceptions MoonEP throws.
#pragma once

#include <stdexcept>
#include <string>

namespace moonep {

// Bad input from the caller: a configuration, routing or tokens-per-expert
// that violates PLANNING.md "Bad input". The message is one line naming the
// field, rank and index. Thrown before any shared state is touched, so the
// object that threw stays usable.
class InputError : public std::invalid_argument {
 public:
  explicit InputError(const std::string& what) : std::invalid_argument(what) {}
};

// A failure of the machinery (device, MPI, a peer rank) rather than of input.
class RuntimeError : public std::runtime_error {
 public:
  explicit RuntimeError(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace moonep
