#ifndef LEGACY_BRIDGE_EXAMPLES_CARES_SHIM_H
#define LEGACY_BRIDGE_EXAMPLES_CARES_SHIM_H

// c-ares, as the DNSResolver example sees it. Only DNSResolver/Internal/Ares.swift imports it.
#include <ares.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>

#endif
