/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Minimal userspace unit-test harness for the schedulers' decision logic.
 * Each test file defines TEST(name) functions and lists them in
 * UNIT_MAIN(...).  Output: one "PASS: file:name" or "FAIL: file:name" line
 * per test (what tests/run counts), exit status 1 if any failed.
 * Built by tests/run with -fsanitize=address,undefined.
 */
#ifndef _UNIT_H
#define _UNIT_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int unit_failed_checks;

#define CHECK(cond) do {							\
	if (!(cond)) {								\
		fprintf(stderr, "%s:%d: check failed: %s\n",			\
			__FILE__, __LINE__, #cond);				\
		unit_failed_checks++;						\
	}									\
} while (0)

#define CHECK_EQ(a, b) do {							\
	long long _a = (long long)(a), _b = (long long)(b);			\
	if (_a != _b) {								\
		fprintf(stderr, "%s:%d: %s == %lld, expected %s == %lld\n",	\
			__FILE__, __LINE__, #a, _a, #b, _b);			\
		unit_failed_checks++;						\
	}									\
} while (0)

#define TEST(name) static void name(void)

struct unit_test {
	const char *name;
	void (*fn)(void);
};

#define UNIT(name) { #name, name }

#define UNIT_MAIN(...)								\
int main(void)									\
{										\
	static const struct unit_test tests[] = { __VA_ARGS__ };		\
	int failed = 0;								\
	size_t i;								\
										\
	for (i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {		\
		int before = unit_failed_checks;				\
										\
		tests[i].fn();							\
		if (unit_failed_checks != before)				\
			failed++;						\
		printf("%s: %s:%s\n", unit_failed_checks != before ?		\
		       "FAIL" : "PASS", __FILE__, tests[i].name);		\
	}									\
	return failed ? 1 : 0;							\
}

#endif /* _UNIT_H */
