// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// NumPy .npy reading and writing (src/io/npy.hpp): the bytes numpy writes
// are read back (versions 1.0 and 2.0, float32 and float64, any shape), our
// own files round-trip and have numpy's layout, and every malformed or
// unsupported header is refused with one line naming the file and what is
// wrong.
#include "catch2_compat.hpp"

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "io/npy.hpp"
#include "moonep/error.hpp"

namespace {

using moonep::io::parse_npy;

// A file's bytes with this header text (padded as numpy pads it) and data.
std::string npy(const std::string& dict, const std::string& data, int major = 1) {
  std::string header = dict;
  const std::size_t prefix = major == 1 ? 10 : 12;
  header.append((64 - (prefix + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  const std::size_t n = header.size();
  out += static_cast<char>(n & 0xff);
  out += static_cast<char>((n >> 8) & 0xff);
  if (major == 2) {
    out += '\0';
    out += '\0';
  }
  return out + header + data;
}

template <class F>
std::string bytes_of(const std::vector<F>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(F));
}

std::string error_of(const std::string& bytes) {
  try {
    parse_npy(bytes, "x file 'x.npy'");
  } catch (const moonep::InputError& e) {
    return e.what();
  }
  return "(nothing thrown)";
}

}  // namespace

TEST_CASE("npy: numpy's own headers are read, float32 and float64, versions 1.0 and 2.0") {
  // Exactly what numpy 1.26 writes for np.arange(6, dtype='<f4').reshape(2, 3).
  const std::vector<float> f = {0, 1, 2, 3, 4.5f, -5};
  const auto a = parse_npy(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", bytes_of(f)), "a");
  CHECK(a.shape == std::vector<std::int64_t>{2, 3});
  CHECK(a.values == std::vector<double>{0, 1, 2, 3, 4.5, -5});
  const std::vector<double> d = {0.1, -2};
  const auto b = parse_npy(npy("{\"shape\":(2,),\"fortran_order\":False,\"descr\":\"<f8\"}", bytes_of(d), 2), "b");
  CHECK(b.shape == std::vector<std::int64_t>{2});
  CHECK(b.values == d);
  const auto scalar = parse_npy(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", bytes_of(std::vector<float>{7})), "s");
  CHECK(scalar.shape.empty());
  CHECK(scalar.values == std::vector<double>{7});
  const auto empty = parse_npy(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 0, 2), }", ""), "e");
  CHECK(empty.values.empty());
}

TEST_CASE("npy: written files have numpy's layout and round-trip") {
  const std::string bytes = moonep::io::npy_float32_bytes({2, 1, 2}, {1.5, -0.0, 3, 1e-3});
  CHECK(bytes.substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
  const std::size_t header = static_cast<unsigned char>(bytes[8]) + 256u * static_cast<unsigned char>(bytes[9]);
  CHECK((10 + header) % 64 == 0);
  CHECK(bytes.substr(10, header).rfind("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 1, 2), }", 0) == 0);
  CHECK(bytes.back() != '\n');
  CHECK(bytes[10 + header - 1] == '\n');
  const auto a = parse_npy(bytes, "round trip");
  CHECK(a.shape == std::vector<std::int64_t>{2, 1, 2});
  CHECK(a.values == std::vector<double>{1.5, -0.0, 3, static_cast<float>(1e-3)});
  CHECK(std::signbit(a.values[1]));
  CHECK(moonep::io::npy_float32_bytes({4}, {1, 2, 3, 4}).find("'shape': (4,), }") != std::string::npos);

  const auto dir = std::filesystem::temp_directory_path() / ("moonep_npy_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "a.npy").string();
  moonep::io::write_npy(path, "output file", {3}, {1, 2, 3});
  CHECK(moonep::io::read_npy(path, "input").values == std::vector<double>{1, 2, 3});
  std::filesystem::remove_all(dir);
}

TEST_CASE("npy: malformed and unsupported files are refused, naming the file and the problem") {
  const std::string f4 = bytes_of(std::vector<float>{1, 2});
  const std::string ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  CHECK(error_of(npy(ok, f4)) == "(nothing thrown)");
  CHECK(error_of("") == "x file 'x.npy': not a .npy file (it does not start with \\x93NUMPY)");
  CHECK(error_of("PK\x03\x04 a zip") == "x file 'x.npy': not a .npy file (it does not start with \\x93NUMPY)");
  std::string v3 = npy(ok, f4);
  v3[6] = 3;
  CHECK(error_of(v3) == "x file 'x.npy': .npy format version 3.0 is not supported (1.0 or 2.0)");
  CHECK(error_of(npy(ok, f4).substr(0, 9)) == "x file 'x.npy': truncated .npy header");
  CHECK(error_of(npy(ok, f4).substr(0, 40)).find("x file 'x.npy': truncated .npy header (it says ") == 0);
  CHECK(error_of(npy("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", f4)) ==
        "x file 'x.npy': dtype '>f4' is not supported (little-endian float32 '<f4' or float64 '<f8')");
  CHECK(error_of(npy("{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }", f4)).find("dtype '<i8'") !=
        std::string::npos);
  CHECK(error_of(npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", f4)) ==
        "x file 'x.npy': Fortran order is not supported (write a C-order array)");
  CHECK(error_of(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", f4)) ==
        "x file 'x.npy': holds 8 data bytes, its shape and dtype need 12");
  CHECK(error_of(npy(ok, f4 + "x")) == "x file 'x.npy': holds 9 data bytes, its shape and dtype need 8");
  const std::string m = "x file 'x.npy': malformed .npy header: ";
  CHECK(error_of(npy("{'descr': '<f4', 'shape': (2,), }", f4)) == m + "missing key 'fortran_order'");
  CHECK(error_of(npy("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", f4)) ==
        m + "key 'descr' appears twice");
  CHECK(error_of(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", f4)) == m + "unknown key 'x'");
  CHECK(error_of(npy("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}", f4)) ==
        m + "fortran_order must be True or False");
  CHECK(error_of(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}", f4)) ==
        m + "shape must be a tuple of non-negative integers");
  CHECK(error_of(npy("{'descr': '<f4', 'fortran_order': False, 'shape': [2]}", f4)) ==
        m + "expected '(' to open the shape tuple");
  CHECK(error_of(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}", f4)) ==
        m + "expected ')' to close the shape tuple");
  CHECK(error_of(npy("{'descr': '<f4, 'fortran_order': False, 'shape': (2,)}", f4)).find(m) == 0);
  CHECK(error_of(npy("'descr': '<f4'", f4)) == m + "expected '{' at the start of the header dict");
  CHECK(error_of(npy(ok + " extra", f4)) == m + "text after the header dict");
  CHECK(error_of(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", f4)) ==
        m + "a shape dimension is too large");
  CHECK(error_of(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16)}", f4)) ==
        "x file 'x.npy': shape too large");
}

TEST_CASE("npy: an unreadable file is an input error naming it") {
  try {
    moonep::io::read_npy("/nonexistent/dir/x.npy", "x file");
    FAIL("nothing thrown");
  } catch (const moonep::InputError& e) {
    CHECK(std::string(e.what()).find("x file '/nonexistent/dir/x.npy'") != std::string::npos);
  }
}
