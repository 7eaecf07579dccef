/*
 * roostd's entry point. For now it only reports its version: the broker
 * core (listener, connections, channels) arrives with issue 3.
 */
#include <stdio.h>
#include <string.h>

#include "broker/version.h"

int
main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--help") == 0) {
        printf("usage: roostd [--version]\n");
        return 0;
    }
    printf("%s %s\n", ROOST_PRODUCT, ROOST_VERSION);
    if (argc > 1 && strcmp(argv[1], "--version") == 0)
        return 0;
    printf("roostd: the broker core is not implemented yet; exiting\n");
    return 0;
}
