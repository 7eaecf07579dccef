/* Placeholder: the random suite is being written. */
#include "tests/unit/testutil.h"

START_TEST(placeholder) { ck_assert(1); }
END_TEST

int
main(void)
{
    Suite *s = suite_create("random");
    TCase *tc = tcase_create("placeholder");
    tcase_add_test(tc, placeholder);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
