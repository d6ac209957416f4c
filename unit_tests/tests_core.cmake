# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Reference planner (the executable spec), validation, plan comparison,
# synthetic routings. support/plan_invariants.cpp is the reusable invariant
# checker, compiled once (moonep_plan_invariants); other backends' tests link it too.
moonep_add_test(test_reference
  test_reference_hand_cases.cpp
  test_reference_invariants.cpp
  test_reference_bad_input.cpp
  test_reference_plan_difference.cpp
  test_reference_synthetic.cpp
  test_reference_ragged.cpp
  $<TARGET_OBJECTS:moonep_plan_invariants>)
