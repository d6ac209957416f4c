// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private: NumPy .npy files (format versions 1.0 and 2.0), as moonep-layer
// reads and writes them: little-endian float32 ('<f4') or float64 ('<f8'),
// C order, any shape. Anything else (another dtype, big-endian, Fortran
// order, a truncated or malformed header, data of the wrong length) is
// refused with one InputError line naming the file and what is wrong.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace moonep::io {

struct NpyArray {
  std::vector<std::int64_t> shape;  // () for a scalar
  std::vector<double> values;       // C order; float32 values widened exactly
};

// Parses the bytes of a .npy file; `name` (e.g. "x file 'x.npy'") starts
// every error: "<name>: <what is wrong>".
NpyArray parse_npy(std::string_view bytes, const std::string& name);
// Reads and parses a file ("-" = standard input). `what` names the file's
// role in errors ("x file"), as read_file_text's errors do.
NpyArray read_npy(const std::string& path, const char* what);

// The bytes of a version 1.0 float32 file of this shape (values rounded to
// float, to nearest); the data starts at a multiple of 64 bytes.
std::string npy_float32_bytes(const std::vector<std::int64_t>& shape, const std::vector<double>& values);
// Writes them where `path` leads, all or nothing (write_output).
void write_npy(const std::string& path, const char* what, const std::vector<std::int64_t>& shape,
               const std::vector<double>& values);

}  // namespace moonep::io
