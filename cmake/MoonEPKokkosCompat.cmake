# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# MoonEPKokkosCompat.cmake — find Kokkos and Kokkos Kernels, and paper over
# the packaging quirks of Debian's Trilinos build (Kokkos 3.4.01):
#   * its imported target Kokkos::kokkos names "<prefix>/include" as include
#     directory, which does not exist (the headers are in /usr/include/trilinos);
#     CMake refuses to use an imported target with a missing include dir.
#   * Kokkos Kernels exports only the bare target `trilinos_kokkoskernels`,
#     not `Kokkos::kokkoskernels`.
# Upstream Kokkos 4.x/5.x and Kokkos Kernels installs (Spack, source builds)
# need none of this; every fix below is a no-op there.
#
# One Kokkos per binary: Kokkos Kernels is used only if it was built for the
# Kokkos found here. Debian's trilinos_kokkoskernels only with Debian's own
# (Trilinos-packaged) Kokkos; with any other Kokkos, only a Kokkos Kernels of
# the same major.minor version (KokkosKernels_ROOT or CMAKE_PREFIX_PATH),
# else none: linking Debian's Kokkos Kernels beside, say, Kokkos 4.6 would
# put two Kokkos runtimes in one program.
#
# After inclusion: target Kokkos::kokkos exists, MoonEP_KOKKOS_VERSION holds
# the Kokkos version string, MoonEP_HAVE_KOKKOSKERNELS is ON when target
# Kokkos::kokkoskernels may be linked (OFF: MoonEP_KOKKOSKERNELS_WHY_NOT
# says why).
#
# MoonEP's build includes it as is: Kokkos is required, a problem is a
# configure error. MoonEPConfig.cmake finds Kokkos itself first and sets
# MoonEP_COMPAT_SOFT: then a problem leaves its message in
# MoonEP_COMPAT_ERROR and the inclusion ends, for find_package(MoonEP) to
# report it as "not found" (silently under QUIET) instead of stopping.

set(MoonEP_COMPAT_ERROR "")
macro(_moonep_compat_fail)
  string(CONCAT _moonep_compat_msg ${ARGN})
  if(MoonEP_COMPAT_SOFT)
    set(MoonEP_COMPAT_ERROR "${_moonep_compat_msg}")
    return()
  endif()
  message(FATAL_ERROR "${_moonep_compat_msg}")
endmacro()

if(NOT Kokkos_FOUND)
  find_package(Kokkos REQUIRED)
endif()

if(TARGET Kokkos::kokkos)
  get_target_property(_moonep_kokkos_inc Kokkos::kokkos INTERFACE_INCLUDE_DIRECTORIES)
  set(_moonep_fixed_inc "")
  set(_moonep_needs_fix OFF)
  foreach(_dir IN LISTS _moonep_kokkos_inc)
    if(_dir MATCHES "^\\$<" OR EXISTS "${_dir}")
      list(APPEND _moonep_fixed_inc "${_dir}")
    else()
      set(_moonep_needs_fix ON)
    endif()
  endforeach()
  if(_moonep_needs_fix)
    # TriBITS' config sets Kokkos_INCLUDE_DIRS to the real header location.
    foreach(_dir IN LISTS Kokkos_INCLUDE_DIRS)
      get_filename_component(_dir "${_dir}" REALPATH)
      if(EXISTS "${_dir}/Kokkos_Core.hpp")
        list(APPEND _moonep_fixed_inc "${_dir}")
      endif()
    endforeach()
    if(NOT _moonep_fixed_inc)
      _moonep_compat_fail("MoonEP: Kokkos::kokkos points at a missing include "
        "directory and Kokkos_INCLUDE_DIRS (${Kokkos_INCLUDE_DIRS}) holds no "
        "Kokkos_Core.hpp. Set CMAKE_PREFIX_PATH to a complete Kokkos install.")
    endif()
    if(NOT MoonEP_FIND_QUIETLY)
      message(STATUS "MoonEP: fixing Kokkos::kokkos include dirs -> ${_moonep_fixed_inc}")
    endif()
    set_target_properties(Kokkos::kokkos PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${_moonep_fixed_inc}")
  endif()
else()
  _moonep_compat_fail("MoonEP: find_package(Kokkos) succeeded but defined no Kokkos::kokkos target")
endif()

# Version: upstream sets Kokkos_VERSION; TriBITS sets it from the config-version file.
if(Kokkos_VERSION)
  set(MoonEP_KOKKOS_VERSION "${Kokkos_VERSION}")
else()
  set(MoonEP_KOKKOS_VERSION "unknown")
endif()
if(MoonEP_KOKKOS_VERSION VERSION_LESS 3.4)
  _moonep_compat_fail("MoonEP needs Kokkos >= 3.4, found ${MoonEP_KOKKOS_VERSION}")
endif()
# The newest Kokkos tested (docs/building.md#tested-kokkos-versions: Kokkos'
# development line of 2025-06, which stands for 4.7 and 5.0; the Spack
# recipe's range ends there too). A newer one is used, with a note saying so
# (MoonEP's own configure only: find_package(MoonEP) stays quiet).
set(MoonEP_KOKKOS_TESTED_UP_TO 5.0)
string(REGEX MATCH "^[0-9]+\\.[0-9]+" _moonep_kokkos_tested_mm "${MoonEP_KOKKOS_VERSION}")
if(NOT MoonEP_COMPAT_SOFT AND _moonep_kokkos_tested_mm VERSION_GREATER MoonEP_KOKKOS_TESTED_UP_TO)
  message(STATUS "MoonEP: Kokkos ${MoonEP_KOKKOS_VERSION} is newer than the newest tested "
                 "(${MoonEP_KOKKOS_TESTED_UP_TO}.x); please report what fails")
endif()

# Debian's Kokkos is packaged inside Trilinos (TriBITS), whose config
# defines bare trilinos_* targets; upstream/Spack Kokkos defines none.
if(TARGET trilinos_kokkoscore)
  set(_moonep_kokkos_trilinos ON)
else()
  set(_moonep_kokkos_trilinos OFF)
endif()

set(MoonEP_HAVE_KOKKOSKERNELS OFF)
set(MoonEP_KOKKOSKERNELS_WHY_NOT "")
string(REGEX MATCH "^([0-9]+)\\.([0-9]+)" _moonep_kokkos_mm "${MoonEP_KOKKOS_VERSION}")
set(_moonep_kokkos_major "${CMAKE_MATCH_1}")
set(_moonep_kokkos_minor "${CMAKE_MATCH_2}")
if(_moonep_kokkos_trilinos)
  # Debian's KokkosKernels config has no version file: ask for no version.
  find_package(KokkosKernels QUIET)
else()
  # A version keeps CMake from even loading a Kokkos Kernels config of
  # another version (and Debian's, which has no version file).
  if(CMAKE_VERSION VERSION_GREATER_EQUAL 3.19)
    math(EXPR _moonep_kokkos_next "${_moonep_kokkos_minor} + 1")
    find_package(KokkosKernels
      ${_moonep_kokkos_mm}...<${_moonep_kokkos_major}.${_moonep_kokkos_next} QUIET)
  else()
    find_package(KokkosKernels ${_moonep_kokkos_mm} QUIET)
  endif()
endif()

if(KokkosKernels_FOUND AND TARGET Kokkos::kokkoskernels AND NOT TARGET trilinos_kokkoskernels)
  # An upstream Kokkos Kernels: its major.minor must be Kokkos'.
  string(REGEX MATCH "^[0-9]+\\.[0-9]+" _moonep_kk_mm "${KokkosKernels_VERSION}")
  if(_moonep_kk_mm STREQUAL _moonep_kokkos_mm)
    set(MoonEP_HAVE_KOKKOSKERNELS ON)
  else()
    string(CONCAT MoonEP_KOKKOSKERNELS_WHY_NOT "Kokkos Kernels ${KokkosKernels_VERSION} "
      "(${KokkosKernels_DIR}) was not built for Kokkos ${MoonEP_KOKKOS_VERSION}")
  endif()
elseif(KokkosKernels_FOUND AND TARGET trilinos_kokkoskernels)
  if(_moonep_kokkos_trilinos)
    if(NOT TARGET Kokkos::kokkoskernels)
      add_library(Kokkos::kokkoskernels INTERFACE IMPORTED)
      set_target_properties(Kokkos::kokkoskernels PROPERTIES
        INTERFACE_LINK_LIBRARIES "trilinos_kokkoskernels;Kokkos::kokkos")
      if(NOT MoonEP_FIND_QUIETLY)
        message(STATUS "MoonEP: using Debian's trilinos_kokkoskernels as Kokkos::kokkoskernels")
      endif()
    endif()
    set(MoonEP_HAVE_KOKKOSKERNELS ON)
  else()
    string(CONCAT MoonEP_KOKKOSKERNELS_WHY_NOT "Debian's trilinos_kokkoskernels "
      "(${KokkosKernels_DIR}) goes with Debian's Kokkos only, not Kokkos "
      "${MoonEP_KOKKOS_VERSION}")
  endif()
elseif(KokkosKernels_FOUND)
  _moonep_compat_fail("MoonEP: KokkosKernels was found but exports neither "
    "Kokkos::kokkoskernels nor trilinos_kokkoskernels")
else()
  set(MoonEP_KOKKOSKERNELS_WHY_NOT "no Kokkos Kernels")
  if(NOT _moonep_kokkos_trilinos)
    string(APPEND MoonEP_KOKKOSKERNELS_WHY_NOT " ${_moonep_kokkos_mm}.x")
  endif()
  string(APPEND MoonEP_KOKKOSKERNELS_WHY_NOT " found for Kokkos ${MoonEP_KOKKOS_VERSION}")
  # What find_package looked at and turned down: another version, or
  # Debian's, which has no version file.
  set(_moonep_kk_seen "")
  foreach(_cfg _ver IN ZIP_LISTS KokkosKernels_CONSIDERED_CONFIGS KokkosKernels_CONSIDERED_VERSIONS)
    if(_cfg)
      get_filename_component(_cfg "${_cfg}" DIRECTORY)
      get_filename_component(_cfg "${_cfg}" REALPATH)
      if(NOT _ver OR _ver STREQUAL "unknown")
        set(_ver "no version file")
      else()
        set(_ver "version ${_ver}")
      endif()
      list(APPEND _moonep_kk_seen "${_cfg} (${_ver})")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES _moonep_kk_seen)
  if(_moonep_kk_seen)
    string(REPLACE ";" ", " _moonep_kk_seen "${_moonep_kk_seen}")
    string(APPEND MoonEP_KOKKOSKERNELS_WHY_NOT " (passed over: ${_moonep_kk_seen})")
  endif()
  string(APPEND MoonEP_KOKKOSKERNELS_WHY_NOT "; set KokkosKernels_ROOT to a matching one")
endif()
# For find_package(MoonEP); MoonEP's own build says it where it skips the
# example that needs Kokkos Kernels (examples/CMakeLists.txt).
if(NOT MoonEP_HAVE_KOKKOSKERNELS AND NOT MoonEP_FIND_QUIETLY AND NOT PROJECT_NAME STREQUAL "MoonEP")
  message(STATUS "MoonEP: not using Kokkos Kernels: ${MoonEP_KOKKOSKERNELS_WHY_NOT}")
endif()
