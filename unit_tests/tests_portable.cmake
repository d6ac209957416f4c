# The portable (Kokkos) planner and its in-process world.
moonep_add_test(test_portable_vs_reference test_portable_vs_reference.cpp)
moonep_add_test(test_portable_reuse test_portable_reuse.cpp)
moonep_add_test(test_portable_bad_input test_portable_bad_input.cpp)
moonep_add_test(test_portable_world test_portable_world.cpp)
