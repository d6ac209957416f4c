// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private: the texts of the file formats (docs/spec/formats.md) as
// producers for OutputFiles (output_set.hpp), so that a command can write
// a plan file and a problem file as one.
#pragma once

#include "moonep/host_plan.hpp"
#include "moonep/io.hpp"
#include "output_set.hpp"

namespace moonep::io {

// The plan file of `plan`, streamed; its shapes are checked here, before
// anything is written (what write_plan_file checks). `plan` must outlive
// the producer.
Produce plan_text(const HostPlan& plan);
// The problem file of `problem`, streamed; `problem` must outlive it.
Produce problem_text(const Problem& problem);

}  // namespace moonep::io
