#ifndef LEGACY_BRIDGE_EXAMPLES_SQLITE_SHIM_H
#define LEGACY_BRIDGE_EXAMPLES_SQLITE_SHIM_H

// SQLite, as the SQLiteDatabase example sees it. Only SQLiteDatabase/Internal/SQLite.swift imports it.
#include <sqlite3.h>

#endif
