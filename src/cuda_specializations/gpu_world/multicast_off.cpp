// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The NVLink multicast opt-in in a MoonEP built without it (the default;
// multicast.hpp): every world that asks is refused before anything exists.
#include "multicast.hpp"

namespace moonep::cuda::impl {

struct Multicast::State {};

Multicast::Multicast(const Vmm&, const std::vector<int>&, const std::vector<int>&, WorldPeers*, std::size_t,
                     const std::string& who) {
  throw RuntimeError(who +
                     ": this MoonEP was built without NVLink multicast (configure with "
                     "-DMoonEP_ENABLE_MULTICAST=ON to build it); no multicast object was created");
}
Multicast::~Multicast() = default;
std::size_t Multicast::bytes() const { return 0; }
void Multicast::bind(const SymmetricMapping&, const std::string&) {}
std::int32_t* Multicast::mapping() const { return nullptr; }

}  // namespace moonep::cuda::impl
