// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private: several output files written as one, and checked before the work
// that produces them. moonep-plan's --output and --save-problem go through
// it; any command writing files (moonep-layer's .npy outputs) should too.
//
//   io::OutputFiles out;
//   out.add(o.output, "plan file", "--output");          // "" = no such output
//   out.add(o.save_problem, "problem file", "--save-problem");
//   out.check();             // before planning: exits early on a bad path
//   ... the long work ...
//   out.write({plan_text, problem_text});   // all or nothing
//
// check(): every path resolves as output_file.hpp says (a directory, block
// device or socket refused; a missing directory or one that takes no new
// file found by creating, and at once removing, the temporary file the
// write will use); two outputs naming one file (through links, hard links
// or "." and "..") or both standard output: InputError naming both options
// (exit 2). Other failures: RuntimeError "cannot write <what> '<path>': ...".
//
// write(): the regular files' texts go to temporary files beside them
// (hidden, ".<name>.tmp.<pid>.<n>", shortened to fit the file system's
// name limit), each complete and on disk before any is put in place; then
// the outputs written in place (standard output, devices, FIFOs); then
// every temporary file is renamed over its target, with the signals of
// signal_cleanup.hpp held back, and a rename that fails undoes the ones
// before it (the old files are kept as hard links until all succeeded). A
// failure anywhere before the renames leaves every target as it was and no
// temporary file; so does SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE or
// SIGXFSZ at any point (the process then ends by the signal).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "json_writer.hpp"

namespace moonep::io {

// Hands a file's text to the sink it is given, piece by piece (the sink
// throws to stop it).
using Produce = std::function<void(const TextOut::Sink&)>;

class OutputFiles {
 public:
  // `what` names the file in messages ("plan file"), `option` the option
  // that gave the path ("--output"). An empty path is no output: its index
  // is returned all the same and its text never asked for.
  std::size_t add(const std::string& path, const std::string& what, const std::string& option);
  void check() const;
  // texts[i] produces output i's text (entries of empty paths may be empty
  // functions). Checks again first: the paths may have changed.
  void write(const std::vector<Produce>& texts) const;

 private:
  struct Entry {
    std::string path, what, option;
  };
  std::vector<Entry> entries_;
};

}  // namespace moonep::io
