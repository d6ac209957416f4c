// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/moonep.hpp — everything MoonEP offers, in one include.
#pragma once

#include "moonep/moonep_config.hpp"

#include "moonep/backend.hpp"
#include "moonep/config.hpp"
#include "moonep/error.hpp"
#include "moonep/host_plan.hpp"
#include "moonep/io.hpp"
#include "moonep/planner.hpp"
#include "moonep/reference.hpp"
#include "moonep/synthetic.hpp"
#include "moonep/world.hpp"

#if MOONEP_HAVE_MPI
#include "moonep/mpi_world.hpp"
#endif
#if MOONEP_HAVE_CUDA
#include "moonep/cuda_planner.hpp"
#include "moonep/gpu_world.hpp"
#endif
#if MOONEP_HAVE_CUDA && MOONEP_HAVE_MPI
#include "moonep/gpu_world_mpi.hpp"
#endif
