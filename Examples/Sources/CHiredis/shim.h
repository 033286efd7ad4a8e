#ifndef LEGACY_BRIDGE_EXAMPLES_HIREDIS_SHIM_H
#define LEGACY_BRIDGE_EXAMPLES_HIREDIS_SHIM_H

// hiredis's asynchronous API, as the RedisClient example sees it. Only
// RedisClient/Internal/Hiredis.swift imports it.
#include <hiredis/hiredis.h>
#include <hiredis/async.h>

#endif
