# CTest smoke test of run_sweeps.sh (cmake -P): runs the driver in --smoke
# mode and checks the CSV it writes — the header names every common column
# and every row fills all of them. No timing is asserted.
#   -DDRIVER=run_sweeps.sh -DBUILD_DIR=<build> -DOUT_DIR=<scratch dir>
file(REMOVE_RECURSE "${OUT_DIR}")
execute_process(COMMAND sh "${DRIVER}" --smoke --build "${BUILD_DIR}" --out "${OUT_DIR}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "run_sweeps.sh --smoke exited with ${rc}")
endif()

set(csv "${OUT_DIR}/sweeps.csv")
if(NOT EXISTS "${csv}")
  message(FATAL_ERROR "run_sweeps.sh wrote no ${csv}")
endif()
file(STRINGS "${csv}" lines)
list(LENGTH lines n)
if(n LESS 2)
  message(FATAL_ERROR "${csv}: a header and at least one row expected, got ${n} lines")
endif()

set(columns machine backend world kokkos_version git_revision R E K S B tp imbalance
            time_per_step_us entries_per_s)
list(GET lines 0 header)
string(REPLACE "," ";" header_list "${header}")
if(NOT header_list STREQUAL columns)
  message(FATAL_ERROR "${csv}: header is '${header}', expected '${columns}' joined by commas")
endif()

list(LENGTH columns ncol)
list(SUBLIST lines 1 -1 rows)
foreach(row IN LISTS rows)
  # The machine field may be quoted (a comma in a CPU name): fold it first.
  string(REGEX REPLACE "^\"([^\"]|\"\")*\"" "machine" fields "${row}")
  if(fields MATCHES "(^|,)(,|$)")
    message(FATAL_ERROR "${csv}: empty field in row '${row}'")
  endif()
  string(REPLACE "," ";" field_list "${fields}")
  list(LENGTH field_list nf)
  if(NOT nf EQUAL ncol)
    message(FATAL_ERROR "${csv}: ${nf} fields instead of ${ncol} in row '${row}'")
  endif()
  # Numbers where numbers belong: R..tp integers, the rest positive reals.
  list(SUBLIST field_list 5 6 ints)
  foreach(v IN LISTS ints)
    if(NOT v MATCHES "^[0-9]+$")
      message(FATAL_ERROR "${csv}: '${v}' is not a count in row '${row}'")
    endif()
  endforeach()
  list(SUBLIST field_list 11 3 reals)
  foreach(v IN LISTS reals)
    if(NOT v MATCHES "^[0-9.]+(e[-+]?[0-9]+)?$")
      message(FATAL_ERROR "${csv}: '${v}' is not a number in row '${row}'")
    endif()
  endforeach()
endforeach()
message(STATUS "${csv}: header and ${n} lines, every column filled")
