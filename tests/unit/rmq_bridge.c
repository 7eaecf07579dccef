#include "tests/unit/rmq_bridge.h"
int rmq_bridge_placeholder;
