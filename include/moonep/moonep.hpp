// moonep/moonep.hpp — everything MoonEP offers, in one include.
#pragma once

#include "moonep/moonep_config.hpp"

#include "moonep/backend.hpp"
#include "moonep/config.hpp"
#include "moonep/error.hpp"
#include "moonep/host_plan.hpp"
#include "moonep/io.hpp"
#include "moonep/reference.hpp"
#include "moonep/synthetic.hpp"
