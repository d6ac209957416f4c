# Reference planner, validation, plan comparison, synthetic routings.
moonep_add_test(test_reference test_reference_smoke.cpp)
