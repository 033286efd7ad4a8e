#ifndef LEGACY_BRIDGE_EXAMPLES_LIBPQ_SHIM_H
#define LEGACY_BRIDGE_EXAMPLES_LIBPQ_SHIM_H

// libpq, PostgreSQL's C client, as the PostgresClient example sees it. Only
// PostgresClient/Internal/Libpq.swift imports it.
#include <libpq-fe.h>

#endif
