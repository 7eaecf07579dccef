/* The version Roost reports on the command line and, later, in
 * connection.start. */
#ifndef ROOST_BROKER_VERSION_H
#define ROOST_BROKER_VERSION_H

#include "roost-config.h"

#define ROOST_PRODUCT "Roost"
#define ROOST_VERSION PACKAGE_VERSION

#endif
