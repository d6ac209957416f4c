#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# scripts/demo.sh — builds moonep-plan and plans one realistic skewed step:
# a DeepSeek-V3-like MoE layer (256 experts, top-8) on 8 ranks with 4096
# tokens each. It prints the load of every rank before planning (plain
# expert parallelism) and after (exactly S*K everywhere), max/mean, experts
# copied, padding and time per step, and leaves the problem and plan files
# in build/demo/. Extra arguments go to moonep-plan (e.g. --imbalance 2,
# --ranks 64 --experts 256, --backend reference; see --help). Works from
# any directory.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install_deps.sh
source scripts/configure_build.sh
cmake --build "$build_dir" -j "$build_jobs" --target moonep-plan

demo="$(cd "$build_dir" && pwd)/demo"
tool="$(cd "$build_dir" && pwd)/src/tools/moonep-plan"
mkdir -p "$demo"
echo
"$tool" --save-problem "$demo/problem.json" --output "$demo/plan.json" "$@"
echo
echo "problem file: $demo/problem.json"
echo "plan file:    $demo/plan.json"
echo "plan the file again: $tool --input $demo/problem.json --output plan.json --summary"
