/* Placeholder: the queue integration suite is being written. */
#include <check.h>
#include <stdlib.h>

#include "tests/integration/harness.h"

START_TEST(placeholder) { ck_assert(1); }
END_TEST

int
main(void)
{
    Suite *s = suite_create("queue");
    TCase *tc = tcase_create("placeholder");
    tcase_add_test(tc, placeholder);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
