/*
 * SPDX-License-Identifier: Apache-2.0
 * The version Roost reports on the command line and in connection.start,
 * and the RabbitMQ release whose observable behaviour Roost follows (and
 * announces when server_properties.rabbitmq is true).
 */
#ifndef ROOST_BROKER_VERSION_H
#define ROOST_BROKER_VERSION_H

#include "roost-config.h"

#define ROOST_PRODUCT "Roost"
#define ROOST_VERSION PACKAGE_VERSION
#define ROOST_RABBITMQ_VERSION "3.10.8"

#endif
