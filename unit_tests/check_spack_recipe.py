#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Checks the Spack recipe without Spack: stands in minimal versions of the
modules it imports (spack.package and Spack's CMakePackage/CudaPackage),
loads the recipe, and checks what it declares the way the Kokkos-ecosystem
recipes (kokkos-kernels, ArborX, kokkos-fft, Cabana) do it:

  * the Spack 1.x repository layout (spack_repo/<namespace>/, repo.yaml api v2);
  * a numbered version equal to CMakeLists.txt's project VERSION, which
    is also CHANGELOG.md's first entry;
  * Kokkos bounded below by the minimum MoonEP's CMake accepts and above by
    the newest tested (MoonEP_KOKKOS_TESTED_UP_TO of the CMake module, which
    docs/building.md's tested table names); no Kokkos Kernels;
  * catch2 and nlohmann-json as build dependencies;
  * +cuda: kokkos+cuda with the same cuda_arch for every arch >= 90, a
    conflict for every older one and for cuda_arch=none, cuda@12:, and
    kokkos+wrapper with GCC (Kokkos' recipe refuses +cuda~wrapper there);
  * no dependency conditioned on itself (what `spack audit` rejects);
  * the serial/openmp variants reach Kokkos;
  * cmake_args: Kokkos_ROOT, CMAKE_CXX_COMPILER from kokkos_cxx only for a
    Kokkos with its wrapper (an external Kokkos has no kokkos_cxx: Spack
    raises NameError), BUILD_SHARED_LIBS, the CUDA architectures;
  * license("Apache-2.0 WITH LLVM-exception"), as the LICENSE file;
  * a documented `spack test` method.

  check_spack_recipe.py <moonep source dir> [--inject-regressions]

--inject-regressions puts back, in memory, what `spack audit` and the
issues found wrong in old recipes (a self-conditioned cuda_lambda
dependency, an unbounded Kokkos, Kokkos Kernels, kokkos_cxx asked of an
external Kokkos): the check must fail.
"""

import re
import sys
import types
from pathlib import Path

CUDA_ARCHS = ("70", "75", "80", "86", "89", "90", "90a", "100", "100a", "120")


class Recorder:
    def __init__(self):
        self.calls = []

    def directive(self, kind):
        def record(*args, **kwargs):
            self.calls.append((kind, args, kwargs))

        return record

    def of(self, kind):
        return [(a, k) for (c, a, k) in self.calls if c == kind]


REGRESSIONS = (
    ('requires("^kokkos+cuda_lambda", when="+cuda ^kokkos@:4")',
     'depends_on("kokkos+cuda_lambda", when="+cuda ^kokkos@:3")'),
    ('depends_on("kokkos@3.4:5.0")', 'depends_on("kokkos@3.4:")\n    depends_on("kokkos-kernels@3.4:")'),
    ('if spec.satisfies("^kokkos+wrapper"):', 'if True:'),
)


def load_recipe(path, inject=False):
    rec = Recorder()
    spack_package = types.ModuleType("spack.package")
    for kind in ("version", "variant", "depends_on", "conflicts", "requires", "maintainers",
                 "license", "patch", "provides"):
        setattr(spack_package, kind, rec.directive(kind))
    spack_package.which = lambda *a, **k: None
    spack_package.join_path = lambda *parts: "/".join(str(p) for p in parts)
    spack_package.__all__ = [n for n in dir(spack_package) if not n.startswith("_")]

    class CMakePackage:
        def define(self, name, value):
            if isinstance(value, bool):
                value = "ON" if value else "OFF"
            return f"-D{name}={value}"

        def define_from_variant(self, name, variant):
            return self.define(name, self.spec.satisfies("+" + variant))

    class CudaPackage:
        cuda_arch_values = CUDA_ARCHS

    modules = {
        "spack": types.ModuleType("spack"),
        "spack.package": spack_package,
        "spack_repo": types.ModuleType("spack_repo"),
        "spack_repo.builtin": types.ModuleType("spack_repo.builtin"),
        "spack_repo.builtin.build_systems": types.ModuleType("spack_repo.builtin.build_systems"),
        "spack_repo.builtin.build_systems.cmake": types.ModuleType("cmake"),
        "spack_repo.builtin.build_systems.cuda": types.ModuleType("cuda"),
    }
    modules["spack_repo.builtin.build_systems.cmake"].CMakePackage = CMakePackage
    modules["spack_repo.builtin.build_systems.cuda"].CudaPackage = CudaPackage
    sys.modules.update(modules)
    namespace = {}
    text = path.read_text()
    if inject:
        for old, new in REGRESSIONS:
            assert old in text, f"--inject-regressions: '{old}' not in the recipe"
            text = text.replace(old, new)
    exec(compile(text, str(path), "exec"), namespace)
    return rec, namespace["Moonep"], CMakePackage, CudaPackage


class FakeSpec:
    """A concrete spec: `on` holds the enabled variants, `archs` cuda_arch."""

    def __init__(self, on, archs=()):
        self.on = set(on)
        self.variants = {"cuda_arch": types.SimpleNamespace(value=tuple(archs))}

    def satisfies(self, constraint):
        # "+v", "~v", or a dependency's constraint ("^kokkos+wrapper") held in `on`.
        return all(
            (tok in self.on) if tok[0] == "^" else
            (tok[1:] in self.on) if tok[0] == "+" else (tok[1:] not in self.on)
            for tok in constraint.split()
        )

    def __getitem__(self, name):
        # "^name:external" in `on`: the dependency is an external.
        return types.SimpleNamespace(prefix=types.SimpleNamespace(bin=FakePath(f"/opt/{name}/bin")),
                                     external=f"^{name}:external" in self.on)


class FakePath(str):
    """Spack's Prefix: a path whose attributes are its entries."""

    def __getattr__(self, entry):
        return FakePath(f"{self}/{entry}")


def main():
    src = Path(sys.argv[1])
    errors = []

    def check(ok, what):
        if not ok:
            errors.append(what)

    repo = src / "spack" / "spack_repo" / "moonep"
    recipe = repo / "packages" / "moonep" / "package.py"
    check(recipe.is_file(), f"{recipe} missing (Spack 1.x layout spack_repo/<namespace>/)")
    repo_yaml = (repo / "repo.yaml").read_text()
    check(re.search(r"namespace:\s*moonep", repo_yaml), "repo.yaml: namespace moonep")
    check(re.search(r"api:\s*v2", repo_yaml), "repo.yaml: api v2.x (the Spack 1.x layout)")
    check(not (src / "spack" / "packages").exists(), "the pre-1.0 spack/packages/ is still there")

    inject = "--inject-regressions" in sys.argv[2:]
    rec, Moonep, CMakePackage, CudaPackage = load_recipe(recipe, inject)
    check(issubclass(Moonep, CMakePackage) and issubclass(Moonep, CudaPackage),
          "Moonep must be a CMakePackage and a CudaPackage")
    check(bool(Moonep.__doc__), "the recipe has no docstring")

    # Versions.
    cmake = (src / "CMakeLists.txt").read_text()
    project_version = re.search(r"project\(MoonEP VERSION ([0-9.]+)", cmake).group(1)
    versions = {a[0]: k for a, k in rec.of("version")}
    check(project_version in versions, f"no version('{project_version}') (CMakeLists.txt's)")
    check(versions.get(project_version, {}).get("tag") == f"v{project_version}",
          f"version {project_version} should fetch tag v{project_version}")
    changelog = src / "CHANGELOG.md"
    first = re.search(r"^## (\S+)", changelog.read_text(), re.M) if changelog.is_file() else None
    check(first is not None and first.group(1) == project_version,
          f"CHANGELOG.md's first entry should be {project_version} (CMakeLists.txt's), got "
          f"{first.group(1) if first else 'none'}")

    deps = [(a[0], k.get("when", ""), k.get("type")) for a, k in rec.of("depends_on")]
    names = [re.match(r"[a-z0-9-]+", d).group(0) for d, _, _ in deps]
    check("kokkos-kernels" not in names, "kokkos-kernels is a dependency (only the example uses it)")

    # Kokkos bounds: the CMake minimum and the newest tested Kokkos.
    compat = (src / "cmake" / "MoonEPKokkosCompat.cmake").read_text()
    cmake_min = re.search(r"MoonEP_KOKKOS_VERSION VERSION_LESS ([0-9.]+)", compat).group(1)
    newest = re.search(r"set\(MoonEP_KOKKOS_TESTED_UP_TO ([0-9.]+)\)", compat).group(1)
    building = (src / "docs" / "building.md").read_text()
    tested_section = building.split("## Tested Kokkos versions", 1)[1].split("\n## ", 1)[0]
    check(re.search(r"stands for [^|]*\b" + re.escape(newest) + r"\b", tested_section),
          f"docs/building.md's tested table names no build standing for Kokkos {newest}")
    ranges = [d for d, w, _ in deps if re.match(r"kokkos@", d) and not w]
    check(ranges == [f"kokkos@{cmake_min}:{newest}"],
          f"expected one depends_on('kokkos@{cmake_min}:{newest}'), got {ranges}")

    types_of = {re.match(r"[a-z0-9-]+", d).group(0): t for d, _, t in deps}
    check(types_of.get("catch2") == "build", "catch2 needs type='build'")
    check(types_of.get("nlohmann-json") == "build", "nlohmann-json is build-only")
    check(("catch2@2.13:", "+tests", "build") in deps, "catch2@2.13: only with +tests")

    # Self-referential conditions: `depends_on("x...", when="... ^x...")`.
    for d, w, _ in deps:
        name = re.match(r"[a-z0-9-]+", d).group(0)
        check(not re.search(r"\^" + re.escape(name) + r"\b", w),
              f"depends_on('{d}', when='{w}') is conditioned on itself")

    # CUDA.
    conflicts = [(a[0], k.get("when", "")) for a, k in rec.of("conflicts")]
    check(("+cuda", "cuda_arch=none") in conflicts, "no conflicts('+cuda', when='cuda_arch=none')")
    for arch in CUDA_ARCHS:
        if int(arch.rstrip("af")) >= 90:
            check((f"kokkos+cuda cuda_arch={arch}", f"+cuda cuda_arch={arch}", None) in deps,
                  f"cuda_arch={arch} does not reach kokkos+cuda cuda_arch={arch}")
        else:
            check((f"cuda_arch={arch}", "+cuda") in conflicts, f"cuda_arch={arch} is not refused")
    check(("cuda@12:", "+cuda", None) in deps, "no depends_on('cuda@12:', when='+cuda')")
    requires = [(a[0], k.get("when", "")) for a, k in rec.of("requires")]
    check(("^kokkos+cuda_lambda", "+cuda ^kokkos@:4") in requires,
          "Kokkos up to 4.x needs +cuda_lambda with +cuda")
    check(("kokkos+wrapper", "+cuda", None) in deps, "no depends_on('kokkos+wrapper', when='+cuda')")
    licenses = [a[0] for a, _ in rec.of("license")]
    check(licenses == ["Apache-2.0 WITH LLVM-exception"],
          f"expected license('Apache-2.0 WITH LLVM-exception'), got {licenses}")

    # Host backends passed to Kokkos.
    variants = {a[0]: k for a, k in rec.of("variant")}
    for backend in ("serial", "openmp"):
        check(backend in variants, f"no variant '{backend}'")
        check((f"kokkos+{backend}", f"+{backend}", None) in deps,
              f"variant {backend} does not reach kokkos+{backend}")
    check("shared" in variants and variants["shared"].get("default") is True,
          "variant shared (default on)")

    # cmake_args on two concrete specs: an external Kokkos (no wrapper), and
    # +cuda over a Kokkos with its nvcc_wrapper.
    pkg = Moonep.__new__(Moonep)

    class FakeKokkos:
        @property
        def kokkos_cxx(self):
            if "^kokkos+wrapper" not in pkg.spec.on:  # as Kokkos' recipe, outside a build
                raise NameError("name 'spack_cxx' is not defined")
            if "^kokkos:external" in pkg.spec.on:  # an external has no dependencies
                raise KeyError("No spec with name kokkos-nvcc-wrapper in kokkos")
            return "/opt/kokkos/bin/nvcc_wrapper"

    pkg.__class__.__getitem__ = lambda self, name: FakeKokkos()
    cases = ((["mpi", "shared", "serial"], ()), (["cuda", "serial", "^kokkos+wrapper"], ("90",)),
             (["cuda", "serial", "^kokkos+wrapper", "^kokkos:external"], ("90",)))
    for on, archs in cases:
        pkg.spec = FakeSpec(on, archs)
        what = "+" + "+".join(on)
        try:
            args = Moonep.cmake_args(pkg)
        except (NameError, KeyError) as e:
            check(False, f"{what}: cmake_args raised {type(e).__name__}: {e}")
            continue
        wrapper = "^kokkos+wrapper" in on
        check(("-DCMAKE_CXX_COMPILER=/opt/kokkos/bin/nvcc_wrapper" in args) == wrapper,
              f"{what}: CMAKE_CXX_COMPILER should be Kokkos' nvcc_wrapper exactly with ^kokkos+wrapper")
        check(any(a.startswith("-DKokkos_ROOT=") for a in args), f"{what}: no Kokkos_ROOT")
        check(f"-DBUILD_SHARED_LIBS={'ON' if 'shared' in on else 'OFF'}" in args,
              f"{what}: BUILD_SHARED_LIBS does not follow the variant")
        check(f"-DMoonEP_ENABLE_MPI={'ON' if 'mpi' in on else 'OFF'}" in args, f"{what}: MPI")
        if archs:
            check("-DMoonEP_CUDA_ARCHITECTURES=90" in args, f"{what}: CUDA architectures")

    tests = [n for n in vars(Moonep) if n.startswith("test_")]
    check(tests and all(getattr(Moonep, n).__doc__ for n in tests),
          "no documented test_* method for `spack test run`")

    if errors:
        print("Spack recipe check failed:\n  " + "\n  ".join(errors))
        return 1
    print(f"Spack recipe ok: {recipe}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
