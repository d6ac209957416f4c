#!/bin/sh
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# fake_moonep_plan.sh MODE — stands in for moonep-plan in the tests of
# run_cli_case.cmake itself (cli_runner_* in tests_cli.cmake): writes to
# stderr what MODE names, as a dependency (Kokkos' OpenMP warning) and
# moonep-plan would, and exits as moonep-plan would.
warn() {
  printf '%s\n' 'Kokkos::OpenMP::initialize WARNING: OMP_PROC_BIND environment variable not set' \
    '  For unit testing set OMP_PROC_BIND=false' >&2
}
error_line() {
  printf '%s\n' 'moonep-plan: error: p.json: routing[2][7]: expected an integer expert id, got "x"' >&2
}
case "$1" in
  warning_then_error) warn; error_line; exit 2 ;;
  error_then_warning) error_line; warn; exit 2 ;;
  warning_only) warn; exit 2 ;;
  two_errors) warn; error_line; error_line; exit 2 ;;
  partial_error) warn; printf 'moonep-plan: error: p.json: routing[2][7]: expected' >&2; exit 2 ;;
  error_mid_line) printf '[1,0]<stderr>: ' >&2; error_line; exit 2 ;;
  success_warning) warn; echo ok; exit 0 ;;
  success_moonep_line) warn; printf '%s\n' 'moonep-plan: note: not an error, still not expected' >&2; echo ok; exit 0 ;;
  *) echo "fake_moonep_plan.sh: unknown mode '$1'" >&2; exit 99 ;;
esac
