/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Userspace stand-ins for the few kernel definitions that the schedulers'
 * pure-logic headers (k2/k2-core.h, ...) use when built outside the kernel
 * (no __KERNEL__).  Only plain types and macros; nothing that behaves
 * differently from the kernel.
 */
#ifndef _KSHIM_H
#define _KSHIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef int8_t s8;
typedef int16_t s16;
typedef int32_t s32;
typedef int64_t s64;

#ifndef U32_MAX
#define U32_MAX		((u32)~0U)
#endif
#ifndef U64_MAX
#define U64_MAX		((u64)~0ULL)
#endif

/* include/asm-generic/bitops/fls64.h: last set bit, 1-based; 0 for 0 */
static inline int fls64(u64 x)
{
	return x ? 64 - __builtin_clzll(x) : 0;
}

/* include/asm-generic/bitops/__ffs.h: first set bit, 0-based; undefined for 0 */
static inline unsigned long __ffs(unsigned long word)
{
	return __builtin_ctzl(word);
}

/*
 * I/O priorities, as include/uapi/linux/ioprio.h of Linux 6.12 defines them
 * (6.1.192 has the same values).  Copied rather than included because the
 * build host's <linux/ioprio.h> may predate IOPRIO_PRIO_LEVEL and the hints.
 */
#ifndef IOPRIO_CLASS_SHIFT
#define IOPRIO_CLASS_SHIFT	13
#define IOPRIO_NR_CLASSES	8
#define IOPRIO_CLASS_MASK	(IOPRIO_NR_CLASSES - 1)
#define IOPRIO_PRIO_MASK	((1UL << IOPRIO_CLASS_SHIFT) - 1)

#define IOPRIO_PRIO_CLASS(ioprio)	\
	(((ioprio) >> IOPRIO_CLASS_SHIFT) & IOPRIO_CLASS_MASK)
#define IOPRIO_PRIO_DATA(ioprio)	((ioprio) & IOPRIO_PRIO_MASK)

enum {
	IOPRIO_CLASS_NONE	= 0,
	IOPRIO_CLASS_RT		= 1,
	IOPRIO_CLASS_BE		= 2,
	IOPRIO_CLASS_IDLE	= 3,

	/* Special class to indicate an invalid ioprio value */
	IOPRIO_CLASS_INVALID	= 7,
};

#define IOPRIO_LEVEL_NR_BITS		3
#define IOPRIO_NR_LEVELS		(1 << IOPRIO_LEVEL_NR_BITS)
#define IOPRIO_LEVEL_MASK		(IOPRIO_NR_LEVELS - 1)
#define IOPRIO_PRIO_LEVEL(ioprio)	((ioprio) & IOPRIO_LEVEL_MASK)

#define IOPRIO_BE_NR			IOPRIO_NR_LEVELS

#define IOPRIO_NORM	4
#define IOPRIO_BE_NORM	IOPRIO_NORM

#define IOPRIO_HINT_SHIFT		IOPRIO_LEVEL_NR_BITS
#define IOPRIO_HINT_NR_BITS		10
#define IOPRIO_NR_HINTS			(1 << IOPRIO_HINT_NR_BITS)
#define IOPRIO_HINT_MASK		(IOPRIO_NR_HINTS - 1)
#define IOPRIO_PRIO_HINT(ioprio)	\
	(((ioprio) >> IOPRIO_HINT_SHIFT) & IOPRIO_HINT_MASK)

#define IOPRIO_BAD_VALUE(val, max) ((val) < 0 || (val) >= (max))

static inline u16 ioprio_value(int prioclass, int priolevel, int priohint)
{
	if (IOPRIO_BAD_VALUE(prioclass, IOPRIO_NR_CLASSES) ||
	    IOPRIO_BAD_VALUE(priolevel, IOPRIO_NR_LEVELS) ||
	    IOPRIO_BAD_VALUE(priohint, IOPRIO_NR_HINTS))
		return IOPRIO_CLASS_INVALID << IOPRIO_CLASS_SHIFT;

	return (prioclass << IOPRIO_CLASS_SHIFT) |
		(priohint << IOPRIO_HINT_SHIFT) | priolevel;
}

#define IOPRIO_PRIO_VALUE(prioclass, priolevel)			\
	ioprio_value(prioclass, priolevel, 0)
#define IOPRIO_PRIO_VALUE_HINT(prioclass, priolevel, priohint)	\
	ioprio_value(prioclass, priolevel, priohint)
#endif /* IOPRIO_CLASS_SHIFT */

/*
 * The kernel's string parsing that elevator/iosched-sysfs.h uses, written
 * to behave as Linux 6.12's does: isspace() of include/linux/ctype.h (its
 * table also counts 0xa0 as a space), strim() of lib/string_helpers.c and
 * kstrtouint() of lib/kstrtox.c (decimal only: the one base the project
 * parses; an optional '+', digits, one optional newline; -ERANGE past
 * UINT_MAX, -EINVAL for anything else).
 */
#include <errno.h>
#include <limits.h>
#include <string.h>

static inline bool kshim_isspace(unsigned char c)
{
	return c == ' ' || (c >= '\t' && c <= '\r') || c == 0xa0;
}

static inline char *strim(char *s)
{
	size_t size = strlen(s);
	char *end;

	if (!size)
		return s;
	end = s + size - 1;
	while (end >= s && kshim_isspace(*end))
		end--;
	*(end + 1) = '\0';
	while (kshim_isspace(*s))
		s++;
	return s;
}

static inline int kstrtouint(const char *s, unsigned int base, unsigned int *res)
{
	unsigned long long v = 0;
	bool overflow = false;
	unsigned int n = 0;

	if (base != 10)
		return -EINVAL;	/* not needed by the project: not written */
	if (*s == '+')
		s++;
	for (; *s >= '0' && *s <= '9'; s++, n++) {
		if (v > (ULLONG_MAX - (unsigned int)(*s - '0')) / 10)
			overflow = true;
		v = v * 10 + (unsigned int)(*s - '0');
	}
	if (overflow)
		return -ERANGE;
	if (!n)
		return -EINVAL;
	if (*s == '\n')
		s++;
	if (*s)
		return -EINVAL;
	if (v > UINT_MAX)
		return -ERANGE;
	*res = (unsigned int)v;
	return 0;
}

/*
 * The kernel's doubly linked list (include/linux/list.h), the operations
 * elevator/iosched-inbox.h uses, and its atomics as GCC's sequentially
 * consistent builtins: xchg() and a successful try_cmpxchg() are full
 * barriers in the kernel too.
 */
struct list_head {
	struct list_head *next, *prev;
};

#define LIST_HEAD_INIT(name)	{ &(name), &(name) }
#define LIST_HEAD(name)		struct list_head name = LIST_HEAD_INIT(name)
#define container_of(ptr, type, member)	\
	((type *)((char *)(ptr) - offsetof(type, member)))
#define list_entry(ptr, type, member)	container_of(ptr, type, member)
#define list_first_entry(ptr, type, member)	\
	list_entry((ptr)->next, type, member)
#define list_next_entry(pos, member)	\
	list_entry((pos)->member.next, typeof(*(pos)), member)
#define list_for_each_entry_safe(pos, n, head, member)			\
	for (pos = list_first_entry(head, typeof(*pos), member),	\
	     n = list_next_entry(pos, member);				\
	     &pos->member != (head);					\
	     pos = n, n = list_next_entry(n, member))

static inline void INIT_LIST_HEAD(struct list_head *list)
{
	list->next = list;
	list->prev = list;
}

static inline bool list_empty(const struct list_head *head)
{
	return head->next == head;
}

static inline void list_add_tail(struct list_head *new, struct list_head *head)
{
	struct list_head *prev = head->prev;

	new->next = head;
	new->prev = prev;
	prev->next = new;
	head->prev = new;
}

#define READ_ONCE(x)	__atomic_load_n(&(x), __ATOMIC_RELAXED)
#define xchg(ptr, v)	__atomic_exchange_n(ptr, v, __ATOMIC_SEQ_CST)
#define try_cmpxchg(ptr, oldp, new)	\
	__atomic_compare_exchange_n(ptr, oldp, new, false, __ATOMIC_SEQ_CST, \
				    __ATOMIC_RELAXED)

/* The kernel's atomic_t (cars-core.h's die counts), the same builtins. */
typedef struct {
	int counter;
} atomic_t;

static inline int atomic_read(const atomic_t *v)
{
	return __atomic_load_n(&v->counter, __ATOMIC_RELAXED);
}

static inline void atomic_set(atomic_t *v, int i)
{
	__atomic_store_n(&v->counter, i, __ATOMIC_RELAXED);
}

static inline void atomic_inc(atomic_t *v)
{
	__atomic_fetch_add(&v->counter, 1, __ATOMIC_RELAXED);
}

#endif /* _KSHIM_H */
