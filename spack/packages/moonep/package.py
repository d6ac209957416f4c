# Spack recipe for MoonEP. Add this repository with
#   spack repo add <moonep checkout>/spack
# then `spack install moonep` (see spack/README.md).
#
# Keep the variants and cmake_args in sync with the options of the top-level
# CMakeLists.txt: unit_tests/check_spack_recipe.cmake compares the two and
# fails the test suite when they drift.

from spack.package import *


class Moonep(CMakePackage, CudaPackage):
    """MoonEP plans each expert-parallel Mixture-of-Experts step so that every
    rank receives exactly the same number of routed entries: work of
    overloaded ranks' experts moves to underloaded ranks, which fetch copies
    of those experts' weights. Kokkos planner for any backend, MPI worlds, and
    a one-kernel CUDA specialization for NVIDIA GPUs."""

    homepage = "https://github.com/moonep/moonep"
    git = "https://github.com/moonep/moonep.git"

    maintainers("moonep")

    version("main", branch="main")

    variant("mpi", default=True, description="MPI worlds: one rank per process")
    variant("tests", default=False, description="Build the Catch2 unit tests")

    depends_on("cxx", type="build")
    depends_on("cmake@3.18:", type="build")
    depends_on("nlohmann-json@3:", type="build")  # header-only, used privately

    depends_on("kokkos@3.4:")
    depends_on("kokkos-kernels@3.4:")
    depends_on("mpi", when="+mpi")
    depends_on("catch2@2.13:", when="+tests")

    # Kokkos and Kokkos Kernels must target the same device as MoonEP, the
    # way Cabana's recipe propagates it: +cuda and the same cuda_arch.
    depends_on("kokkos+cuda", when="+cuda")
    depends_on("kokkos-kernels+cuda", when="+cuda")
    depends_on("kokkos+cuda_lambda", when="+cuda ^kokkos@:3")
    for _arch in CudaPackage.cuda_arch_values:
        depends_on(f"kokkos cuda_arch={_arch}", when=f"+cuda cuda_arch={_arch}")
        depends_on(f"kokkos-kernels cuda_arch={_arch}", when=f"+cuda cuda_arch={_arch}")

    # The CUDA specialization uses sm_90 features (cooperative grid barrier
    # with system-scope atomics across NVLink peers, multimem broadcast) and
    # CUDA 12 APIs.
    conflicts("^cuda@:11", when="+cuda", msg="MoonEP's CUDA specialization needs CUDA 12 or newer")
    for _arch in CudaPackage.cuda_arch_values:
        if int(_arch.rstrip("af")) < 90:
            conflicts(
                f"cuda_arch={_arch}",
                when="+cuda",
                msg="MoonEP's CUDA specialization needs cuda_arch=90 or newer",
            )

    def cmake_args(self):
        spec = self.spec
        args = [
            self.define_from_variant("MoonEP_ENABLE_MPI", "mpi"),
            self.define_from_variant("MoonEP_ENABLE_CUDA", "cuda"),
            self.define_from_variant("MoonEP_ENABLE_TESTS", "tests"),
            self.define("MoonEP_ENABLE_PERF_TESTS", False),
            self.define("MoonEP_ENABLE_EXAMPLES", False),
        ]
        if spec.satisfies("+cuda"):
            archs = spec.variants["cuda_arch"].value
            args.append(self.define("MoonEP_CUDA_ARCHITECTURES", ";".join(archs)))
        return args
