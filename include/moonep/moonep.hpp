// moonep/moonep.hpp — every public MoonEP header.
#pragma once

#include "moonep/backend.hpp"
#include "moonep/config.hpp"
#include "moonep/error.hpp"
#include "moonep/host_plan.hpp"
#include "moonep/moonep_config.hpp"
#include "moonep/planner.hpp"
#include "moonep/reference.hpp"
#include "moonep/synthetic.hpp"
#include "moonep/world.hpp"
