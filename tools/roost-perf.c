/* Placeholder: roost-perf is being written. */
#include <stdio.h>

int
main(void)
{
    fprintf(stderr, "roost-perf: not written yet\n");
    return 1;
}
