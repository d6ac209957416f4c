// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The one instantiation of the portable phases' kernels for every enabled
// execution space (see moonep/impl/portable_instances.hpp for why).
#define MOONEP_PORTABLE_INSTANTIATING
#include "moonep/impl/portable_instances.hpp"

namespace moonep::impl::portable {
MOONEP_PORTABLE_FOR_EACH_SPACE(MOONEP_PORTABLE_INSTANTIATE_SPACE)
}  // namespace moonep::impl::portable
