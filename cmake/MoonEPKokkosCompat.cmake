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
# After inclusion: targets Kokkos::kokkos and Kokkos::kokkoskernels exist,
# MoonEP_KOKKOS_VERSION holds the Kokkos version string.

find_package(Kokkos REQUIRED)

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
      message(FATAL_ERROR "MoonEP: Kokkos::kokkos points at a missing include "
        "directory and Kokkos_INCLUDE_DIRS (${Kokkos_INCLUDE_DIRS}) holds no "
        "Kokkos_Core.hpp. Set CMAKE_PREFIX_PATH to a complete Kokkos install.")
    endif()
    message(STATUS "MoonEP: fixing Kokkos::kokkos include dirs -> ${_moonep_fixed_inc}")
    set_target_properties(Kokkos::kokkos PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${_moonep_fixed_inc}")
  endif()
else()
  message(FATAL_ERROR "MoonEP: find_package(Kokkos) succeeded but defined no Kokkos::kokkos target")
endif()

# Version: upstream sets Kokkos_VERSION; TriBITS sets it from the config-version file.
if(Kokkos_VERSION)
  set(MoonEP_KOKKOS_VERSION "${Kokkos_VERSION}")
else()
  set(MoonEP_KOKKOS_VERSION "unknown")
endif()
if(MoonEP_KOKKOS_VERSION VERSION_LESS 3.4)
  message(FATAL_ERROR "MoonEP needs Kokkos >= 3.4, found ${MoonEP_KOKKOS_VERSION}")
endif()

find_package(KokkosKernels QUIET)
if(NOT TARGET Kokkos::kokkoskernels)
  if(TARGET trilinos_kokkoskernels)
    add_library(Kokkos::kokkoskernels INTERFACE IMPORTED)
    set_target_properties(Kokkos::kokkoskernels PROPERTIES
      INTERFACE_LINK_LIBRARIES "trilinos_kokkoskernels;Kokkos::kokkos")
    message(STATUS "MoonEP: using Debian's trilinos_kokkoskernels as Kokkos::kokkoskernels")
  elseif(KokkosKernels_FOUND)
    message(FATAL_ERROR "MoonEP: KokkosKernels was found but exports neither "
      "Kokkos::kokkoskernels nor trilinos_kokkoskernels")
  endif()
endif()
if(TARGET Kokkos::kokkoskernels)
  set(MoonEP_HAVE_KOKKOSKERNELS ON)
else()
  set(MoonEP_HAVE_KOKKOSKERNELS OFF)
  message(STATUS "MoonEP: Kokkos Kernels not found; the MoE layer example is skipped")
endif()
