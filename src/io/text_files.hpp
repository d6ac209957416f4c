// Private: whole-file reads and all-or-nothing writes.
#pragma once

#include <string>

namespace moonep::io {

// The file's bytes. InputError "cannot read <what> 'path': <reason>".
std::string read_text_file(const std::string& path, const char* what);

// Writes text to a temporary file next to `path`, then renames it over
// `path`: readers see the old file or the complete new one, never a partial
// one, and on failure (RuntimeError) nothing is left behind. "-" writes to
// standard output.
void write_text_file_atomically(const std::string& path, const std::string& text,
                                const char* what);

}  // namespace moonep::io
