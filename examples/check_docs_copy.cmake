# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# docs/api.md shows examples/minimal/minimal.cpp between two marker lines;
# this test (cmake -P) fails when the two drift apart, so the documented
# program is always the one CTest compiles and runs.
#   -DDOC=docs/api.md -DSOURCE=examples/minimal/minimal.cpp -DNAME=examples/minimal/minimal.cpp
file(READ "${DOC}" doc)
file(READ "${SOURCE}" src)
set(begin "<!-- begin ${NAME} -->\n```cpp\n")
set(end "```\n<!-- end ${NAME} -->")
string(FIND "${doc}" "${begin}" b)
string(FIND "${doc}" "${end}" e)
if(b EQUAL -1 OR e EQUAL -1)
  message(FATAL_ERROR "${DOC}: no block between '<!-- begin ${NAME} -->' and '<!-- end ${NAME} -->'")
endif()
string(LENGTH "${begin}" blen)
math(EXPR start "${b} + ${blen}")
math(EXPR len "${e} - ${start}")
string(SUBSTRING "${doc}" ${start} ${len} shown)
if(NOT shown STREQUAL src)
  message(FATAL_ERROR "${DOC} shows a different ${NAME} than ${SOURCE}: copy the file into the block again")
endif()
message(STATUS "${DOC} shows ${NAME} as it is")
