// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of iosched_parse_uint() (elevator/iosched-sysfs.h), the parsing
 * rule every tunable of the project's elevators follows: one decimal number
 * in [min, max], surrounding whitespace allowed; anything else, including
 * overflow and embedded NULs, is -EINVAL and leaves the result alone.
 */
#include "unit.h"
#include "iosched-sysfs.h"

#define UNTOUCHED	0xdeadbeefU

/* Parse the C string @s (without its NUL) as sysfs passes a write. */
static int parse(const char *s, unsigned int min, unsigned int max,
		 unsigned int *res)
{
	*res = UNTOUCHED;
	return iosched_parse_uint(s, strlen(s), min, max, res);
}

static void refused(const char *s, unsigned int min, unsigned int max)
{
	unsigned int v;

	CHECK_EQ(parse(s, min, max, &v), -EINVAL);
	CHECK_EQ(v, UNTOUCHED);
}

static void accepted(const char *s, unsigned int min, unsigned int max,
		     unsigned int want)
{
	unsigned int v;

	CHECK_EQ(parse(s, min, max, &v), 0);
	CHECK_EQ(v, want);
}

TEST(values_in_range_are_taken)
{
	accepted("5", 1, 10, 5);
	accepted("5\n", 1, 10, 5);	/* echo's newline */
	accepted("  7 \n", 1, 10, 7);
	accepted("\t3\t", 0, 10, 3);
	accepted("+4", 0, 10, 4);	/* kstrtouint()'s optional plus */
	accepted("010", 0, 10, 10);	/* decimal: not octal */
	accepted("4294967295", 0, 4294967295U, 4294967295U);
}

TEST(the_bounds_are_inclusive)
{
	accepted("1", 1, 10, 1);
	accepted("10", 1, 10, 10);
	refused("0", 1, 10);
	refused("11", 1, 10);
	accepted("0", 0, 0, 0);
	refused("1", 0, 0);
}

TEST(what_is_not_one_number_is_refused)
{
	refused("", 0, 10);
	refused(" ", 0, 10);
	refused("\n", 0, 10);
	refused("-1", 0, 10);
	refused("abc", 0, 10);
	refused("1x", 0, 10);
	refused("0x5", 0, 10);
	refused("1 2", 0, 10);
	refused("1.5", 0, 10);
	refused("++1", 0, 10);
}

TEST(overflow_is_refused)
{
	refused("4294967296", 0, 4294967295U);
	refused("18446744073709551616", 0, 4294967295U);
	refused("99999999999999999999999", 0, 4294967295U);
}

TEST(embedded_nul_and_long_writes_are_refused)
{
	unsigned int v = UNTOUCHED;
	char big[64];

	/* "5\0" and "5\06": sysfs passes the whole write, NULs included */
	CHECK_EQ(iosched_parse_uint("5\0", 2, 0, 10, &v), -EINVAL);
	CHECK_EQ(iosched_parse_uint("5\0006", 3, 0, 10, &v), -EINVAL);
	CHECK_EQ(v, UNTOUCHED);
	/* 23 characters fit the buffer, 24 do not, whatever they are */
	memset(big, ' ', sizeof(big));
	big[22] = '7';
	CHECK_EQ(iosched_parse_uint(big, 23, 0, 10, &v), 0);
	CHECK_EQ(v, 7);
	v = UNTOUCHED;
	CHECK_EQ(iosched_parse_uint(big, 24, 0, 10, &v), -EINVAL);
	CHECK_EQ(v, UNTOUCHED);
}

TEST(the_input_is_not_written)
{
	const char page[] = " 9\n";
	unsigned int v;

	CHECK_EQ(iosched_parse_uint(page, sizeof(page) - 1, 0, 10, &v), 0);
	CHECK(!memcmp(page, " 9\n", sizeof(page)));
}

UNIT_MAIN(UNIT(values_in_range_are_taken),
	  UNIT(the_bounds_are_inclusive),
	  UNIT(what_is_not_one_number_is_refused),
	  UNIT(overflow_is_refused),
	  UNIT(embedded_nul_and_long_writes_are_refused),
	  UNIT(the_input_is_not_written))
