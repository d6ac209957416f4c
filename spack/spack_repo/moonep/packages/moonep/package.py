# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Spack recipe for MoonEP, in the repository layout of Spack 1.x (package
# API v2). Add this repository with
#   spack repo add <moonep checkout>/spack/spack_repo/moonep
# then `spack install moonep` (see spack/README.md).
#
# Keep the variants and cmake_args in sync with the options of the top-level
# CMakeLists.txt: unit_tests/check_spack_recipe.cmake and
# unit_tests/check_spack_recipe.py compare the two and check the directives.

import json

from spack_repo.builtin.build_systems.cmake import CMakePackage
from spack_repo.builtin.build_systems.cuda import CudaPackage

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

    license("Apache-2.0 WITH LLVM-exception")

    version("main", branch="main")
    version("0.1.0", tag="v0.1.0")

    variant("mpi", default=True, description="MPI worlds: one rank per process")
    variant("shared", default=True, description="Build shared libraries")
    variant("tests", default=False, description="Build the Catch2 unit tests")
    # Host backends of the Kokkos MoonEP is built with (MoonEP itself has no
    # option for them: it plans on Kokkos' default execution space).
    variant("serial", default=True, description="Require Kokkos' Serial backend")
    variant("openmp", default=False, description="Require Kokkos' OpenMP backend")

    depends_on("cxx", type="build")
    depends_on("cmake@3.18:", type="build")
    depends_on("nlohmann-json@3:", type="build")  # header-only, used privately
    depends_on("catch2@2.13:", type="build", when="+tests")

    # Tested (docs/building.md#tested-kokkos-versions): Kokkos 3.4.01 (Debian),
    # 4.6.01, and Kokkos' development line of 2025-06-20 (4.6.99) with what 5.0
    # turns on by default: C++20, the mdspan-based View, no deprecated code; it
    # stands for 4.7 and 5.0. Kokkos' recipe refuses CUDA 13 up to 4.7.00, so
    # +cuda concretizes with CUDA 12 (Kokkos up to 5.0) and 13 (4.7.01 to 5.0).
    # spack/test_spack.sh (Spack 1.2.0.dev0, builtin packages of 2026-07) checks
    # that: `+cuda cuda_arch=90` gives kokkos@5.0.2+cuda+wrapper with CUDA 13.0.88
    # (and 12 with ^cuda@12), and installs and tests moonep over Kokkos 3.4.01.
    depends_on("kokkos@3.4:5.0")
    depends_on("kokkos+serial", when="+serial")
    depends_on("kokkos+openmp", when="+openmp")
    depends_on("mpi", when="+mpi")

    # The CUDA specialization uses sm_90 features (cooperative grid barrier
    # with system-scope atomics across NVLink peers, multimem broadcast) and
    # CUDA 12 APIs. Kokkos targets the same GPU as MoonEP: +cuda and the same
    # cuda_arch, the way ArborX and Cabana propagate them.
    depends_on("cuda@12:", when="+cuda")
    conflicts("+cuda", when="cuda_arch=none", msg="+cuda needs a cuda_arch (90 or newer)")
    for _arch in CudaPackage.cuda_arch_values:
        if int(_arch.rstrip("af")) < 90:
            conflicts(
                f"cuda_arch={_arch}",
                when="+cuda",
                msg="MoonEP's CUDA specialization needs cuda_arch=90 or newer",
            )
        else:
            depends_on(f"kokkos+cuda cuda_arch={_arch}", when=f"+cuda cuda_arch={_arch}")
    # Device lambdas: a variant of Kokkos up to 4.x (always on from 5.0).
    requires("^kokkos+cuda_lambda", when="+cuda ^kokkos@:4")
    # MoonEP's CUDA builds compile through Kokkos' nvcc_wrapper (the only way
    # tested), and Kokkos' recipe refuses +cuda ~wrapper with GCC at build time.
    depends_on("kokkos+wrapper", when="+cuda")

    def cmake_args(self):
        spec = self.spec
        args = [
            self.define("Kokkos_ROOT", spec["kokkos"].prefix),
            self.define_from_variant("BUILD_SHARED_LIBS", "shared"),
            self.define_from_variant("MoonEP_ENABLE_MPI", "mpi"),
            self.define_from_variant("MoonEP_ENABLE_CUDA", "cuda"),
            self.define_from_variant("MoonEP_ENABLE_TESTS", "tests"),
            self.define("MoonEP_ENABLE_PERF_TESTS", False),
            self.define("MoonEP_ENABLE_EXAMPLES", False),
            # NVLink multicast has never been run: not offered as a variant.
            self.define("MoonEP_ENABLE_MULTICAST", False),
        ]
        # nvcc_wrapper where Kokkos was built with it; otherwise Spack's compiler
        # (the default). Only a Kokkos with its wrapper has kokkos_cxx to ask: for
        # any other, Kokkos' recipe returns Spack's compiler wrapper, which an
        # external Kokkos (a cluster's module) never gets (NameError); an external
        # Kokkos built +wrapper has its own bin/nvcc_wrapper, but no
        # kokkos-nvcc-wrapper dependency to ask.
        if spec.satisfies("^kokkos+wrapper"):
            kokkos = spec["kokkos"]
            if kokkos.external:
                cxx = join_path(kokkos.prefix.bin, "nvcc_wrapper")
            else:
                cxx = self["kokkos"].kokkos_cxx
            args.append(self.define("CMAKE_CXX_COMPILER", cxx))
        if spec.satisfies("+cuda"):
            archs = spec.variants["cuda_arch"].value
            args.append(self.define("MoonEP_CUDA_ARCHITECTURES", ";".join(archs)))
            args.append(self.define("CMAKE_CUDA_COMPILER", spec["cuda"].prefix.bin.nvcc))
        return args

    def test_moonep_plan(self):
        """plan a small synthetic step with the installed moonep-plan"""
        moonep_plan = which(self.prefix.bin.join("moonep-plan"), required=True)
        # Standard output only: Kokkos may print notices on standard error.
        out = moonep_plan("--version", output=str.split)
        assert out.startswith(f"moonep-plan {self.spec.version}") or self.spec.satisfies(
            "@main"
        ), out
        shape = "--ranks 2 --experts 4 --topk 2 --tokens 8 --copy-slots 1 --token-padding 4"
        summary = json.loads(moonep_plan(*shape.split(), "--steps", "1", "--json", output=str))
        # Every rank receives exactly S*K = 16 entries, whatever the routing.
        assert summary["load_after"] == [16, 16], summary
