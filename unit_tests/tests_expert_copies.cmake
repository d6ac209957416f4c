# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The portable expert copies (moonep/expert_copies.hpp: fetch, reduce)
# against the reference on every host execution space.
moonep_add_test(test_expert_copies test_expert_copies.cpp)
