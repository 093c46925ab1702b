/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What every elevator of the project's sysfs stores share: the parsing
 * rule of every tunable ("one value per file; out of range, not a number or
 * empty fails with EINVAL and changes nothing").
 */
#ifndef _IOSCHED_SYSFS_H
#define _IOSCHED_SYSFS_H

#ifdef __KERNEL__
#include <linux/errno.h>
#include <linux/kernel.h>
#include <linux/string.h>
#else
#include "kshim.h"	/* tests/unit/iosched_sysfs_test.c */
#endif

/*
 * iosched_parse_uint() - one decimal number in [@min, @max], surrounding
 * whitespace allowed (echo's newline); anything else, including overflow
 * and embedded NULs, is -EINVAL and leaves *@res alone.
 */
static inline int iosched_parse_uint(const char *page, size_t count,
				     unsigned int min, unsigned int max,
				     unsigned int *res)
{
	char buf[24];
	unsigned int val;

	if (count >= sizeof(buf) || memchr(page, '\0', count))
		return -EINVAL;
	memcpy(buf, page, count);
	buf[count] = '\0';
	if (kstrtouint(strim(buf), 10, &val) || val < min || val > max)
		return -EINVAL;
	*res = val;
	return 0;
}

#endif /* _IOSCHED_SYSFS_H */
