#ifndef LEGACY_BRIDGE_EXAMPLES_MOSQUITTO_SHIM_H
#define LEGACY_BRIDGE_EXAMPLES_MOSQUITTO_SHIM_H

// libmosquitto, as the MQTTClient example sees it. Only MQTTClient/Internal/Mosquitto.swift imports it.
#include <mosquitto.h>
#include <poll.h>

#endif
