/* SPDX-License-Identifier: GPL-2.0 */
/*
 * FlashFQ decision logic, kept free of any elevator API so that tests/unit
 * can build it in userspace (with tests/unit/kshim.h) under ASan and UBSan.
 * The elevator glue in flashfq-iosched.c owns all locking and memory, the
 * requests and their lists; it tells this file the facts about each task
 * (how many requests it has queued, in the device and outstanding, and the
 * start tags at the heads of those) and this file keeps the derived state:
 * which tasks are active, the virtual time, the anticipation timers and the
 * dispatch decision.  Every function here is called with the glue's lock
 * held and does not sleep or allocate.
 *
 * FlashFQ (Shen and Park, "FlashFQ: A Fair Queueing I/O Scheduler for
 * Flash-Based SSDs", USENIX ATC 2013) is start-time fair queueing with
 * depth D (SFQ(D)) over tasks (I/O contexts), with three changes:
 *  - Min-SFQ(D) virtual time: the minimum start tag of any outstanding
 *    request, queued or in the device (not the start tag of the request
 *    last dispatched, which lets a backlogged task push it ahead of tasks
 *    whose requests are still in the device);
 *  - throttled dispatch: a request whose start tag is more than a
 *    threshold ahead of the most lagging task's progress waits (a task
 *    with requests outstanding, or one whose anticipation blocks:
 *    ffq_task_restrains());
 *  - anticipation: a task whose synchronous request completed and has
 *    nothing else outstanding keeps a hypothetical request (start tag: its
 *    last finish tag) for a while, so that it keeps its place in virtual
 *    time; for a shorter while that request may also hold back dispatch.
 *
 * Tags and virtual time are in "charge" units: nanoseconds of device time
 * (ffq_cost()) scaled by FFQ_WEIGHT_NORM / weight (ffq_charge()), i.e.
 * nanoseconds of device time of a task of normal weight.
 */
#ifndef _FLASHFQ_CORE_H
#define _FLASHFQ_CORE_H

#ifdef __KERNEL__
#include <linux/types.h>
#include <linux/ioprio.h>
#include <linux/stddef.h>
#else
#include "kshim.h"
#endif

/* Tunables: defaults and limits (sysfs, flashfq-iosched.c). */
#define FFQ_DEFAULT_DEPTH		16U
#define FFQ_MAX_DEPTH			256U	/* in-flight slots per device */
#define FFQ_DEFAULT_THROTTLE_US		100000U
#define FFQ_DEFAULT_ANTIC_US		20000U
#define FFQ_DEFAULT_ANTIC_BLOCK_US	2000U
#define FFQ_MAX_TIME_US			10000000U	/* 10 s */
#define FFQ_MAX_COST_NS			1000000000U	/* 1 s */

/*
 * Default costs, ns: the mean latency of one request at a time in steady
 * state (what `python3 -m bench calibrate flashfq --device DEV` measures)
 * on ssdsim with its default geometry and real-time timings.  Its 8 dies
 * work in parallel; a page read holds its die 60 us (array read 50,
 * transfer 10), a page program 510 us (transfer 10, program 500).  A 4 KiB
 * read is one page read, 60 us; a 128 KiB read 4 page reads on each die,
 * 240 us.  Writes go through the write buffer, which in steady state
 * drains at the dies' program rate: a 4 KiB write 510 / 8 us, a 128 KiB
 * write 4 programs on each die, 2040 us.  bench/suites/flashfq.py computes
 * the same for other ssdsim parameters (ssdsim_costs()).  Real drives
 * differ by an order of magnitude.
 */
#define FFQ_DEFAULT_COST_READ_4K	60000U
#define FFQ_DEFAULT_COST_READ_128K	240000U
#define FFQ_DEFAULT_COST_WRITE_4K	63750U
#define FFQ_DEFAULT_COST_WRITE_128K	2040000U

/* Weights: 1..8, FFQ_WEIGHT_NORM for every task unless ioprio_weights. */
#define FFQ_WEIGHT_NORM			4U
#define FFQ_WEIGHT_MAX			8U

/*
 * ffq_weight() - a request's weight from its I/O priority
 *
 * With @enabled clear (the default) every request has FFQ_WEIGHT_NORM.
 * Otherwise best-effort and real-time level L (0 highest .. 7) weigh
 * 8 - L, so the default level 4 weighs 4 and level 0 twice that; the idle
 * class weighs 1; no class (a task that never set one, whose kernel
 * default is level 4 of best effort) weighs FFQ_WEIGHT_NORM.
 */
static inline unsigned int ffq_weight(unsigned int ioprio, bool enabled)
{
	if (!enabled)
		return FFQ_WEIGHT_NORM;
	switch (IOPRIO_PRIO_CLASS(ioprio)) {
	case IOPRIO_CLASS_RT:
	case IOPRIO_CLASS_BE:
		return FFQ_WEIGHT_MAX - IOPRIO_PRIO_LEVEL(ioprio);
	case IOPRIO_CLASS_IDLE:
		return 1;
	default:
		return FFQ_WEIGHT_NORM;
	}
}

/* The four calibrated points of the cost model, ns. */
struct ffq_cost_model {
	u32 read_4k;
	u32 read_128k;
	u32 write_4k;
	u32 write_128k;
};

#define FFQ_COST_SMALL		4096U
#define FFQ_COST_LARGE		131072U

/*
 * ffq_cost() - device time of a request of @bytes, ns: the straight line
 * through the 4 KiB and 128 KiB points of its direction, extended on both
 * sides, and never below 1.  The glue passes what is neither a read nor a
 * write (discard, write zeroes) as a 4 KiB write.
 */
static inline u64 ffq_cost(const struct ffq_cost_model *m, bool write,
			   u32 bytes)
{
	s64 small = write ? m->write_4k : m->read_4k;
	s64 large = write ? m->write_128k : m->read_128k;
	s64 cost;

	cost = small + ((s64)bytes - FFQ_COST_SMALL) * (large - small) /
		(s64)(FFQ_COST_LARGE - FFQ_COST_SMALL);
	return cost < 1 ? 1 : (u64)cost;
}

/* ffq_charge() - what a request of @cost ns adds to its task's tags. */
static inline u32 ffq_charge(u64 cost, unsigned int weight)
{
	u64 c;

	if (!weight)
		weight = 1;
	c = cost * FFQ_WEIGHT_NORM / weight;
	if (c > U32_MAX)
		c = U32_MAX;
	return c ? (u32)c : 1;
}

/*
 * Learnt costs.  A device nobody calibrated is charged its own times,
 * learnt from the completions FlashFQ sees.  Calibration measures a
 * class's mean latency one request at a time in steady state; with up to
 * `depth` requests in the device a request's time there (its device time)
 * also holds its waits behind others, so each direction takes from it
 * what is its own:
 *  - A read's cost is its time on an idle die: the floor of reads' device
 *    times.  A read is never buffered, so time above the floor is a wait
 *    behind another request, which fair queueing must not charge the
 *    reader for (charging it would let the throttle give a writer the
 *    reader's share).
 *  - A write may go into a write buffer and cost its share of the drain,
 *    which its own time shows only when it waited for room.  With B bytes
 *    of writes in the device at its dispatch (its own b included) a write
 *    that waited waits for about B bytes to drain, so by Little's law its
 *    cost is b x (mean device time) / (mean B), the means taken over such
 *    writes (moving, 1/2^FFQ_LEARN_EWMA_SHIFT a sample).  A ratio of means,
 *    not a mean of ratios: a write dispatched before others but reaching
 *    the device after them (another CPU's hardware queue got there first)
 *    counts B too small for its time, which one ratio would charge in full
 *    and the sums balance with the others'.
 *    A write waited if its device time is at least 1/FFQ_LEARN_WAITED
 *    of the cost learnt and FFQ_LEARN_WAITED times the floor (a write
 *    that found room in the buffer shows its transfer).  A drain may
 *    free room for several writes at once (a program ends on every die
 *    together): the first waits for it and the next ones find room.
 *    So a sample of the means is a group: a write that waited, with
 *    the writes dispatched within 1/FFQ_LEARN_WAITED of its time after
 *    it completed that took under 1/FFQ_LEARN_WAITED of its time
 *    (their sums); taken alone, the one that waited would be charged
 *    its batch's drain.  A group is complete when the next write that
 *    waited comes within its window, and its writes are then the batch
 *    a drain frees; a group cut short by a write outside its window
 *    (the writer stopped, the throttle holds it) with fewer writes
 *    than the last complete group left part of its drain's room
 *    unused, and is not taken.  A write outside any group that found
 *    room says nothing of the drain and teaches the floor only, so a
 *    writer the throttle keeps below the drain rate leaves its cost as
 *    learnt (taken from it, it would fall to the transfer time, and
 *    the writer would get the reader's share until the buffer filled
 *    again).  On a device without a buffer, with fewer writes in it
 *    than dies, that mean is too small or missing: a write is a
 *    program, whose time is the floor of the writes dispatched alone
 *    in their direction; the larger of the two is taken.
 * A floor drops to a smaller sample at once and otherwise rises towards
 * the sample by 1/2^FFQ_LEARN_LEAK_SHIFT, so a device that slows down is
 * followed within a few thousand requests.  A sample teaches the point of
 * its direction nearer its size (4 KiB or 128 KiB, on a log scale),
 * scaled to that size along the default line.  A point with fewer than
 * FFQ_LEARN_MIN samples is its default scaled by the learnt/default ratio
 * of its direction's other point if that one has them, else of a point of
 * the other direction, else its default.
 * A point written in sysfs (calibrated) is charged as written; learning
 * goes on and takes over again when 0 is written.
 */
#define FFQ_LEARN_MIN			8U
#define FFQ_LEARN_LEAK_SHIFT		10
#define FFQ_LEARN_EWMA_SHIFT		4
#define FFQ_LEARN_WAITED		4U
#define FFQ_LEARN_RECHECK		16U

/* The cost model's points, in the order of struct ffq_cost_model. */
enum ffq_point {
	FFQ_PT_READ_4K,
	FFQ_PT_READ_128K,
	FFQ_PT_WRITE_4K,
	FFQ_PT_WRITE_128K,
	FFQ_NR_POINTS,
};

/* Where a point's cost in force comes from (sysfs cost_source). */
enum ffq_cost_src {
	FFQ_SRC_DEFAULT,	/* flashfq-core.h's default */
	FFQ_SRC_SCALED,		/* default x the other point's learnt ratio */
	FFQ_SRC_LEARNT,
	FFQ_SRC_SET,		/* written in sysfs (calibrated) */
};

static const struct ffq_cost_model ffq_default_costs = {
	.read_4k = FFQ_DEFAULT_COST_READ_4K,
	.read_128k = FFQ_DEFAULT_COST_READ_128K,
	.write_4k = FFQ_DEFAULT_COST_WRITE_4K,
	.write_128k = FFQ_DEFAULT_COST_WRITE_128K,
};

static inline u32 *ffq_point(struct ffq_cost_model *m, unsigned int pt)
{
	switch (pt) {
	case FFQ_PT_READ_4K:
		return &m->read_4k;
	case FFQ_PT_READ_128K:
		return &m->read_128k;
	case FFQ_PT_WRITE_4K:
		return &m->write_4k;
	default:
		return &m->write_128k;
	}
}

static inline u32 ffq_point_val(const struct ffq_cost_model *m,
				unsigned int pt)
{
	return *ffq_point((struct ffq_cost_model *)m, pt);
}

static inline bool ffq_point_write(unsigned int pt)
{
	return pt >= FFQ_PT_WRITE_4K;
}

/* One point's learning: ns at the point's size. */
struct ffq_learnt {
	u64 floor;	/* smallest device time (writes: alone); 0: none */
	/*
	 * Writes that waited for the drain, in groups ("Learnt costs"):
	 * moving means of a group's device time, ns, and of its bytes in the
	 * device at dispatch / own bytes, in units of 2^-FFQ_LEARN_Q_SHIFT
	 * (ffq_learnt_avg()); 0: none yet.
	 */
	u64 tsum;
	u64 qsum;
	u32 waited;	/* groups in those means, up to 2^FFQ_LEARN_EWMA_SHIFT */
	u32 samples;	/* saturating */
	u32 seen;	/* samples, wrapping: ffq_learn_sample()'s periodic look */
	/*
	 * The open group: its sums (0: none), writes, first write's device
	 * time and the end of its window, ns; writes in the last complete one.
	 */
	u64 group_t;
	u64 group_q;
	u32 group_n;
	u32 batch;
	u64 group_wait_ns;
	u64 group_end_ns;
};

#define FFQ_LEARN_Q_SHIFT		10

/* One step of a moving average over about 2^FFQ_LEARN_EWMA_SHIFT: 1/@n. */
static inline u64 ffq_learn_step(u64 avg, u64 x, u32 n)
{
	return x >= avg ? avg + (x - avg) / n : avg - (avg - x) / n;
}

/* The drain of a write at the point's size, ns (Little's law); 0 if none. */
static inline u64 ffq_learnt_avg(const struct ffq_learnt *p)
{
	return p->qsum ? (p->tsum << FFQ_LEARN_Q_SHIFT) / p->qsum : 0;
}

/* A learnt point's cost, ns, not clamped. */
static inline u64 ffq_learnt_ns(const struct ffq_learnt *p, bool write)
{
	u64 avg = write ? ffq_learnt_avg(p) : 0;

	return avg > p->floor ? avg : p->floor;
}

struct ffq_learn {
	struct ffq_learnt pt[FFQ_NR_POINTS];
};

/* The point a read (@write clear) or write of @bytes teaches. */
static inline unsigned int ffq_learn_point(bool write, u32 bytes)
{
	/* below the geometric mean of the two sizes: the small point */
	bool large = (u64)bytes * bytes >=
		(u64)FFQ_COST_SMALL * FFQ_COST_LARGE;

	return (write ? FFQ_PT_WRITE_4K : FFQ_PT_READ_4K) + large;
}

/*
 * Close @p's open group, if there is one: into the means if @complete (the
 * next write that waited came within its window; its writes are then the
 * batch) or if it has the last complete group's writes, else dropped.
 * Returns whether the means moved.
 */
static inline bool ffq_learn_close(struct ffq_learnt *p, bool complete)
{
	bool taken;

	if (!p->group_q)
		return false;
	if (complete)
		p->batch = p->group_n;
	taken = p->group_n >= p->batch;
	if (taken) {
		if (p->waited < (1U << FFQ_LEARN_EWMA_SHIFT))
			p->waited++;
		p->tsum = ffq_learn_step(p->tsum, p->group_t, p->waited);
		p->qsum = ffq_learn_step(p->qsum, p->group_q, p->waited);
	}
	p->group_t = 0;
	p->group_q = 0;
	p->group_n = 0;
	return taken;
}

/*
 * ffq_learn_sample() - teach @l one completion: a read (@write clear) or
 * write of @bytes, dispatched at @dispatch_ns with @dir_bytes bytes of its
 * direction in the device, its own included, and completed at @done_ns
 * (after @dispatch_ns; the clock of both is the caller's).  Returns
 * whether the point's cost should be looked at again (ffq_learn_cost()):
 * its floor dropped, its means moved, it has just FFQ_LEARN_MIN samples,
 * or one in FFQ_LEARN_RECHECK samples (a floor leaks up by at most
 * 1/2^FFQ_LEARN_LEAK_SHIFT a sample, so it takes over 60 samples to move
 * a cost in force by 1/16: ffq_learn_moved()).
 */
static inline bool ffq_learn_sample(struct ffq_learn *l, bool write,
				    u32 bytes, u64 dispatch_ns, u64 done_ns,
				    u64 dir_bytes)
{
	unsigned int pt = ffq_learn_point(write, bytes);
	struct ffq_learnt *p = &l->pt[pt];
	u64 at = ffq_cost(&ffq_default_costs, write, bytes);
	u64 to = ffq_point_val(&ffq_default_costs, pt);
	u64 device_ns = done_ns - dispatch_ns;
	bool in_window, moved;
	u64 ns, q;

	if (device_ns > FFQ_MAX_COST_NS * 16ULL)
		device_ns = FFQ_MAX_COST_NS * 16ULL;
	ns = at == to ? device_ns : device_ns * to / at;
	if (ns > FFQ_MAX_COST_NS * 16ULL)
		ns = FFQ_MAX_COST_NS * 16ULL;
	if (!ns)
		ns = 1;
	if (p->samples < U32_MAX)
		p->samples++;
	p->seen++;
	moved = p->samples == FFQ_LEARN_MIN || !(p->seen % FFQ_LEARN_RECHECK);
	if (!write || dir_bytes <= bytes) {
		if (!p->floor || ns < p->floor) {
			moved = true;
			p->floor = ns;
		} else if (ns - p->floor > (p->floor >> FFQ_LEARN_LEAK_SHIFT)) {
			p->floor += (p->floor >> FFQ_LEARN_LEAK_SHIFT) + 1;
		} else {
			p->floor = ns;
		}
	}
	if (!write)
		return moved;
	q = bytes && dir_bytes > bytes ?
		(dir_bytes << FFQ_LEARN_Q_SHIFT) / bytes :
		1ULL << FFQ_LEARN_Q_SHIFT;
	in_window = p->group_q && dispatch_ns <= p->group_end_ns;
	if (in_window && device_ns < p->group_wait_ns / FFQ_LEARN_WAITED) {
		/* found room the open group's drain freed */
		p->group_t += ns;
		p->group_q += q;
		p->group_n++;
	} else if (ns >= ffq_learnt_ns(p, true) / FFQ_LEARN_WAITED &&
		   ns / FFQ_LEARN_WAITED >= p->floor) {
		/* waited: a group of its own, open for its window */
		moved |= ffq_learn_close(p, in_window);
		p->group_t = ns;
		p->group_q = q;
		p->group_n = 1;
		p->group_wait_ns = device_ns;
		p->group_end_ns = done_ns + device_ns / FFQ_LEARN_WAITED;
	} else {
		moved |= ffq_learn_close(p, false);
	}
	return moved;
}

static inline u32 ffq_clamp_cost(u64 ns)
{
	if (ns < 1)
		return 1;
	return ns > FFQ_MAX_COST_NS ? FFQ_MAX_COST_NS : (u32)ns;
}

/*
 * ffq_learn_cost() - point @pt's cost in force and its source: @set's
 * value if written (non-zero), else learnt, scaled or default (above).
 */
static inline u32 ffq_learn_cost(const struct ffq_learn *l,
				 const struct ffq_cost_model *set,
				 unsigned int pt, enum ffq_cost_src *src)
{
	bool write = ffq_point_write(pt);
	u64 def = ffq_point_val(&ffq_default_costs, pt);
	unsigned int i, other;

	if (ffq_point_val(set, pt)) {
		*src = FFQ_SRC_SET;
		return ffq_point_val(set, pt);
	}
	if (l->pt[pt].samples >= FFQ_LEARN_MIN) {
		*src = FFQ_SRC_LEARNT;
		return ffq_clamp_cost(ffq_learnt_ns(&l->pt[pt], write));
	}
	/* the direction's other point first, then the other direction's */
	for (i = 0; i < 3; i++) {
		other = i == 0 ? pt ^ 1 : (pt ^ 2) ^ (i - 1);
		if (l->pt[other].samples < FFQ_LEARN_MIN)
			continue;
		*src = FFQ_SRC_SCALED;
		return ffq_clamp_cost(ffq_learnt_ns(&l->pt[other],
						    ffq_point_write(other)) *
				      def / ffq_point_val(&ffq_default_costs,
							  other));
	}
	*src = FFQ_SRC_DEFAULT;
	return def;
}

/*
 * ffq_learn_moved() - whether a point's cost in force should go from @old
 * to @cur: by 1/16 of @old or more (smaller moves are noise, and each
 * change is traced).
 */
static inline bool ffq_learn_moved(u32 old, u32 cur)
{
	u32 d = old > cur ? old - cur : cur - old;

	return d && d >= old / 16;
}

/*
 * ffq_cost_changes() - whether a point's cost in force, @cur, from @src
 * still, should become @val: a set value as written, a learnt or scaled
 * one when it moved (ffq_learn_moved()); a default never changes.
 */
static inline bool ffq_cost_changes(enum ffq_cost_src src, u32 cur, u32 val)
{
	switch (src) {
	case FFQ_SRC_DEFAULT:
		return false;
	case FFQ_SRC_SET:
		return cur != val;
	default:
		return ffq_learn_moved(cur, val);
	}
}

/*
 * Pairing heap of nodes with u64 keys (smallest first), intrusive and
 * allocation-free: insert O(1), remove any node O(log n) amortised.  Used
 * to keep the tasks ordered by head start tag, by outstanding start tag
 * (virtual time), by progress (throttle) and by anticipation deadline, so
 * that no decision scans the tasks.  Equal keys come out in no defined
 * order.
 */
struct ffq_hnode {
	u64 key;
	struct ffq_hnode *child;	/* first child */
	struct ffq_hnode *next;		/* next sibling */
	struct ffq_hnode *prev;		/* previous sibling, or the parent */
};

struct ffq_heap {
	struct ffq_hnode *root;
	unsigned int nr;
};

static inline bool ffq_hnode_linked(const struct ffq_heap *h,
				    const struct ffq_hnode *n)
{
	return n->prev || h->root == n;
}

/* Link two heap roots (either may be NULL); returns the new root. */
static inline struct ffq_hnode *ffq_meld(struct ffq_hnode *a,
					 struct ffq_hnode *b)
{
	struct ffq_hnode *t;

	if (!a)
		return b;
	if (!b)
		return a;
	if (b->key < a->key) {
		t = a;
		a = b;
		b = t;
	}
	b->prev = a;
	b->next = a->child;
	if (a->child)
		a->child->prev = b;
	a->child = b;
	a->next = NULL;
	a->prev = NULL;
	return a;
}

/* Two-pass pairing of a sibling list; returns the new root. */
static inline struct ffq_hnode *ffq_merge_pairs(struct ffq_hnode *first)
{
	struct ffq_hnode *a, *b, *rest, *stack = NULL, *res = NULL;

	while (first) {
		a = first;
		b = a->next;
		rest = b ? b->next : NULL;
		a->next = NULL;
		a->prev = NULL;
		if (b) {
			b->next = NULL;
			b->prev = NULL;
			a = ffq_meld(a, b);
		}
		a->next = stack;
		stack = a;
		first = rest;
	}
	while (stack) {
		a = stack;
		stack = a->next;
		a->next = NULL;
		res = ffq_meld(res, a);
	}
	return res;
}

static inline void ffq_heap_insert(struct ffq_heap *h, struct ffq_hnode *n,
				   u64 key)
{
	n->key = key;
	n->child = NULL;
	n->next = NULL;
	n->prev = NULL;
	h->root = ffq_meld(h->root, n);
	h->nr++;
}

static inline void ffq_heap_remove(struct ffq_heap *h, struct ffq_hnode *n)
{
	struct ffq_hnode *sub = ffq_merge_pairs(n->child);

	if (h->root == n) {
		h->root = sub;
	} else {
		if (n->prev->child == n)
			n->prev->child = n->next;
		else
			n->prev->next = n->next;
		if (n->next)
			n->next->prev = n->prev;
		h->root = ffq_meld(h->root, sub);
	}
	n->child = NULL;
	n->next = NULL;
	n->prev = NULL;
	h->nr--;
}

/*
 * Give @n, a member of @h, @key.  A node without children keeps the heap
 * order when its key grows (its parent's key is at most its old one), as
 * does a root without children (the only node) whatever its key: those
 * keys change in place.  Tags and deadlines only grow, so that is what
 * most updates are; the others are a removal and an insertion.
 */
static inline void ffq_heap_rekey(struct ffq_heap *h, struct ffq_hnode *n,
				  u64 key)
{
	if (n->key == key)
		return;
	if (!n->child && (key > n->key || h->root == n)) {
		n->key = key;
		return;
	}
	ffq_heap_remove(h, n);
	ffq_heap_insert(h, n, key);
}

static inline struct ffq_hnode *ffq_heap_min(const struct ffq_heap *h)
{
	return h->root;
}

/*
 * Make @n a member of @h with @key if @want, else not a member, where bit
 * @bit of *@in says whether it is one now and is kept in step: the
 * heap's own test (ffq_hnode_linked()) reads two pointers, which the
 * caller's bits spare on every update.
 */
static inline void ffq_heap_place(struct ffq_heap *h, struct ffq_hnode *n,
				  unsigned int *in, unsigned int bit,
				  bool want, u64 key)
{
	if (want) {
		if (*in & bit) {
			ffq_heap_rekey(h, n, key);
		} else {
			ffq_heap_insert(h, n, key);
			*in |= bit;
		}
	} else if (*in & bit) {
		ffq_heap_remove(h, n);
		*in &= ~bit;
	}
}

/* Bits of ffq_task.heaps: the heaps of struct ffq_sched it is in. */
#define FFQ_IN_READY	0x1U
#define FFQ_IN_VT	0x2U
#define FFQ_IN_PROG	0x4U
#define FFQ_IN_TIMER	0x8U
#define FFQ_IN_BLOCK	0x10U
#define FFQ_IN_PACE	0x20U

/* Bits of ffq_task.flags. */
#define FFQ_T_ANTIC	0x1U	/* a hypothetical request is outstanding */
#define FFQ_T_BLOCKING	0x2U	/* ... and may hold back dispatch */
#define FFQ_T_EXITED	0x4U	/* its I/O context exited: no new requests */

/*
 * A task (an I/O context on one device).  The glue sets the facts marked
 * (glue) and calls ffq_update(); the rest is this file's.
 */
struct ffq_task {
	struct ffq_hnode ready;		/* sched.ready while nr_queued */
	struct ffq_hnode vt;		/* sched.vt while active */
	struct ffq_hnode prog;		/* sched.prog while it restrains */
	struct ffq_hnode timer;		/* sched.timer while anticipated */
	struct ffq_hnode block;		/* sched.block while blocking */
	struct ffq_hnode pace;		/* sched.pace while it paces */

	u64 last_finish;	/* finish tag of its latest request */
	u64 last_tagged;	/* start tag of its latest request */
	u64 last_start;		/* start tag of its last dispatched request */
	u64 head_start;		/* (glue) start tag of its first queued one */
	u64 inflight_start;	/* (glue) start tag of its oldest in flight */
	u64 antic_start;	/* the hypothetical request's start tag */
	u64 block_until;	/* ns: anticipation blocks, then paces */
	u64 antic_until;	/* ns: anticipation ends then */
	u64 pace_mark;		/* sched.sent when its anticipation began */
	unsigned int nr_queued;	/* (glue) requests waiting in the scheduler */
	unsigned int nr_inflight; /* (glue) requests holding a depth slot */
	unsigned int nr_out;	/* (glue) requests inserted, not yet freed */
	unsigned int flags;	/* FFQ_T_* */
	unsigned int heaps;	/* FFQ_IN_*: kept by ffq_update() */
};

/*
 * Device-wide state.  @ready orders the tasks with queued requests by the
 * start tag of their first one (the dispatch order: a task's requests are
 * tagged in arrival order with non-decreasing tags, so its first queued
 * one has its smallest queued tag); @vt orders the active tasks by their
 * smallest outstanding start tag (ffq_task_vt_key()); @prog orders those
 * that restrain others (ffq_task_restrains()) by progress
 * (ffq_task_progress()); @timer orders the anticipated tasks by
 * their next deadline, @block the blocking ones by their hypothetical
 * start tag and @pace the others anticipated (ffq_task_paces()) by the
 * same.
 */
struct ffq_sched {
	struct ffq_heap ready;
	struct ffq_heap vt;
	struct ffq_heap prog;
	struct ffq_heap timer;
	struct ffq_heap block;
	struct ffq_heap pace;
	u64 vtime;		/* system virtual time, never decreasing */
	u64 max_finish;		/* largest finish tag given */
	u64 sent;		/* charge dispatched, ever (wraps) */
	u32 inflight;		/* (glue) requests holding a depth slot */
	struct ffq_task *deferred;	/* its update waits: ffq_defer() */
};

static inline void ffq_sched_init(struct ffq_sched *s)
{
	*s = (struct ffq_sched){ 0 };
}

static inline void ffq_task_init(struct ffq_task *t)
{
	*t = (struct ffq_task){ 0 };
}

#define ffq_container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))

static inline bool ffq_task_active(const struct ffq_task *t)
{
	return t->nr_out || (t->flags & FFQ_T_ANTIC);
}

/*
 * Does @t's progress hold back others' dispatch through the throttle?
 * While it has requests outstanding, or its anticipation blocks: holding
 * back dispatch for a task with nothing outstanding is not work-conserving,
 * which anticipation may be only for anticipation_block_us.  For the rest
 * of its anticipation the task keeps its place in virtual time (its next
 * request is tagged at its last finish tag and goes before the others'),
 * but others may run ahead meanwhile.  Without this a task that keeps
 * coming back within anticipation_us but uses less than its share (a
 * reader with think time, or one limited by its CPU) would hold every
 * other task to its own pace.
 */
static inline bool ffq_task_restrains(const struct ffq_task *t)
{
	return t->nr_out || (t->flags & FFQ_T_BLOCKING);
}

/*
 * A task's progress, for the throttle: the start tag of its first queued
 * request if it has one (the next it will be served at), else that of
 * its last dispatched request.  Counting a queued head as progress means
 * the most lagging task can always dispatch its own next request, so the
 * throttle can hold back others only while the laggard has nothing
 * queued, i.e. until its requests in the device complete and its
 * anticipation's blocking period (bounded) ends.
 */
static inline u64 ffq_task_progress(const struct ffq_task *t)
{
	return t->nr_queued ? t->head_start : t->last_start;
}

/*
 * Does @t pace the others?  While it is anticipated after its blocking
 * period (or without one): it no longer restrains them, but a request
 * more than the throttle ahead of its hypothetical start tag goes only
 * while the charge dispatched since its anticipation began is within the
 * throttle plus what the device's depth slots could have served since
 * its blocking ended, block_until (ffq_pick()).  Without this a task
 * coming back a little after its blocking period (a reader whose process
 * the CPU ran late) finds the device filled to depth with the others'
 * requests, all ahead of it in the device however far behind them in
 * virtual time.
 */
static inline bool ffq_task_paces(const struct ffq_task *t)
{
	return (t->flags & (FFQ_T_ANTIC | FFQ_T_BLOCKING)) == FFQ_T_ANTIC;
}

/*
 * An active task's smallest outstanding start tag: over its requests in
 * the device, its queued ones and its hypothetical one.  A task whose
 * only outstanding requests were requeued and bypass the scheduler (the
 * driver issues them again itself) has none of those: its last dispatched
 * start tag stands in.
 */
static inline u64 ffq_task_vt_key(const struct ffq_task *t)
{
	u64 key = U64_MAX;

	if (t->nr_inflight)
		key = t->inflight_start;
	if (t->nr_queued && t->head_start < key)
		key = t->head_start;
	if ((t->flags & FFQ_T_ANTIC) && t->antic_start < key)
		key = t->antic_start;
	return key == U64_MAX ? t->last_start : key;
}

/* The deadline of @t's anticipation: of its blocking period, or its end. */
static inline u64 ffq_task_deadline(const struct ffq_task *t)
{
	return (t->flags & FFQ_T_BLOCKING) ? t->block_until : t->antic_until;
}

/*
 * Min-SFQ(D) virtual time: the smallest outstanding start tag over the
 * active tasks.  With no task active the device is idle and virtual time
 * moves to the largest finish tag given, as in SFQ, so that tasks start
 * level after an idle period whatever their history.  It never goes back:
 * every outstanding tag was at least the virtual time when it was given,
 * and anticipation's start tag is a finish tag given earlier.
 */
static inline void ffq_advance_vtime(struct ffq_sched *s)
{
	struct ffq_hnode *n = ffq_heap_min(&s->vt);
	u64 v = n ? n->key : s->max_finish;

	if (v > s->vtime)
		s->vtime = v;
}

/*
 * ffq_update() - after the glue changed @t's facts, or this file its
 * anticipation: put @t in the heaps it belongs to with its current keys
 * and move virtual time.  Returns whether virtual time moved.  Inlined
 * always: the glue calls it three times a request (insert, dispatch,
 * completion), where a call's cost shows in the IOPS.
 */
static __always_inline bool ffq_update(struct ffq_sched *s,
				       struct ffq_task *t)
{
	unsigned int in = t->heaps, f = t->flags;
	bool active = ffq_task_active(t);
	bool restrains = ffq_task_restrains(t);
	u64 before = s->vtime;

	if (s->deferred == t)
		s->deferred = NULL;

	ffq_heap_place(&s->ready, &t->ready, &in, FFQ_IN_READY,
		       t->nr_queued, t->head_start);
	ffq_heap_place(&s->vt, &t->vt, &in, FFQ_IN_VT, active,
		       active ? ffq_task_vt_key(t) : 0);
	ffq_heap_place(&s->prog, &t->prog, &in, FFQ_IN_PROG, restrains,
		       restrains ? ffq_task_progress(t) : 0);
	if ((f & FFQ_T_ANTIC) ||
	    (in & (FFQ_IN_TIMER | FFQ_IN_BLOCK | FFQ_IN_PACE))) {
		ffq_heap_place(&s->timer, &t->timer, &in, FFQ_IN_TIMER,
			       f & FFQ_T_ANTIC, ffq_task_deadline(t));
		ffq_heap_place(&s->block, &t->block, &in, FFQ_IN_BLOCK,
			       (f & (FFQ_T_ANTIC | FFQ_T_BLOCKING)) ==
			       (FFQ_T_ANTIC | FFQ_T_BLOCKING), t->antic_start);
		ffq_heap_place(&s->pace, &t->pace, &in, FFQ_IN_PACE,
			       ffq_task_paces(t), t->antic_start);
	}
	t->heaps = in;

	ffq_advance_vtime(s);
	return s->vtime != before;
}

/*
 * ffq_settle() - do the deferred task's ffq_update() (ffq_defer()), if any.
 * Returns whether virtual time moved.
 */
static inline bool ffq_settle(struct ffq_sched *s)
{
	return s->deferred && ffq_update(s, s->deferred);
}

/*
 * ffq_defer() - instead of ffq_update() when ffq_complete() started @t's
 * anticipation: leave its places in the heaps (and virtual time) as they
 * were until ffq_settle(), or until its next request's ffq_update().  If
 * that request comes before anything else looks at the heaps, which is
 * how a lone synchronous task goes, its anticipation never enters the
 * heaps: the completion and the arrival make one update, where two would
 * make the same one through two more heaps.
 *
 * The same state follows either way.  Until then, @t's places are as
 * before its completion: in @vt under its oldest outstanding start tag (at
 * most antic_start, its last finish tag) and in @prog, and virtual time
 * was at most its last finish tag, so its next request is tagged as if
 * the update had been made (ffq_tag()); that request's update then puts
 * @t where the anticipation's start and cancel would have.  Everything
 * else that reads the heaps or virtual time (ffq_pick(), ffq_timer_due(),
 * another task's ffq_tag() or ffq_update(), ffq_retag()) must come after
 * ffq_settle(): the glue calls it first under its lock.  The deadline is
 * ffq_next_deadline()'s already.  Returns whether virtual time moved (in
 * settling another task deferred before).
 */
static inline bool ffq_defer(struct ffq_sched *s, struct ffq_task *t)
{
	bool moved = false;

	if (s->deferred && s->deferred != t)
		moved = ffq_update(s, s->deferred);
	s->deferred = t;
	return moved;
}

/*
 * ffq_tag() - tags for a request of @t arriving now with @charge:
 * start = max(virtual time, the task's last finish tag), finish = start +
 * charge.  Returns the start tag; the finish tag becomes the task's last.
 * A task that was idle starts at virtual time (no credit for its idle
 * time); a task anticipated since its last completion has virtual time at
 * most its last finish tag, so it resumes exactly where it was.
 */
static inline u64 ffq_tag(struct ffq_sched *s, struct ffq_task *t,
			  u32 charge)
{
	u64 start = s->vtime > t->last_finish ? s->vtime : t->last_finish;

	t->last_tagged = start;
	t->last_finish = start + charge;
	if (t->last_finish > s->max_finish)
		s->max_finish = t->last_finish;
	return start;
}

/*
 * ffq_retag() - a queued request of @t grew or shrank (a merge): its charge
 * changed from @old_charge to @new_charge; @latest: it is the task's
 * latest request.  The task's last finish tag moves by as much, so that
 * the task pays for what it gets, never below the latest request's start
 * tag.  A shrink of an earlier request is not given back: the requests
 * tagged after it keep their tags, and the next arrival must not be tagged
 * below them (a task's queue stays in tag order, each start at or after
 * the finish before it).  Returns the new charge, clamped to 1..U32_MAX.
 */
static inline u32 ffq_retag(struct ffq_sched *s, struct ffq_task *t,
			    u32 old_charge, u32 new_charge, bool latest)
{
	s64 delta = (s64)new_charge - (s64)old_charge;

	if (delta >= 0)
		t->last_finish += delta;
	else if (latest && (u64)-delta <= t->last_finish - t->last_tagged)
		t->last_finish += delta;
	else if (latest)
		t->last_finish = t->last_tagged;
	if (t->last_finish > s->max_finish)
		s->max_finish = t->last_finish;
	return new_charge ? new_charge : 1;
}

/*
 * ffq_arrive() - a new request of @t was queued (after ffq_tag()).  Ends
 * its anticipation, which it fulfilled; returns whether there was one.
 * The caller then updates the facts and calls ffq_update().
 */
static inline bool ffq_arrive(struct ffq_task *t)
{
	bool antic = t->flags & FFQ_T_ANTIC;

	t->flags &= ~(FFQ_T_ANTIC | FFQ_T_BLOCKING);
	return antic;
}

/*
 * ffq_dispatched() - @t's first queued request, tagged @start and charged
 * @charge, was sent.
 */
static inline void ffq_dispatched(struct ffq_sched *s, struct ffq_task *t,
				  u64 start, u32 charge)
{
	t->last_start = start;
	s->sent += charge;
}

/*
 * ffq_update_dispatched() - ffq_update() after ffq_dispatched(), once the
 * glue has updated the facts (one request fewer queued and one more in
 * flight, @head_start the next queued one's, @inflight_start the oldest in
 * flight's), doing only what a dispatch can change.  The task had a
 * request queued, so it had nr_out, and still has: it stays active and
 * restraining, in @vt and @prog; its flags are unchanged (a task with a
 * request queued is not anticipated: ffq_arrive()), so are its @timer and
 * @block places.  Its @ready place goes to its next queued request or
 * away, its progress to that request or to @start, and its smallest
 * outstanding tag stays as it was unless a requeue left its in-flight list
 * out of tag order.  Returns whether virtual time moved.  Called once a
 * request, and a third of FlashFQ's heap work, so it skips the tests
 * ffq_update() needs.
 */
static __always_inline bool ffq_update_dispatched(struct ffq_sched *s,
						  struct ffq_task *t)
{
	u64 before = s->vtime;

	ffq_heap_place(&s->ready, &t->ready, &t->heaps, FFQ_IN_READY,
		       t->nr_queued, t->head_start);
	ffq_heap_rekey(&s->prog, &t->prog, ffq_task_progress(t));
	ffq_heap_rekey(&s->vt, &t->vt, ffq_task_vt_key(t));
	ffq_advance_vtime(s);
	return s->vtime != before;
}

/*
 * ffq_complete() - one of @t's requests finished and the glue has updated
 * the facts.  If it was synchronous (the task may be waiting for it) and
 * the task has nothing else outstanding, start anticipating its next
 * request: a hypothetical request tagged with the task's last finish tag
 * stays outstanding until @now + @antic_ns, and may hold back dispatch
 * until @now + @block_ns (at most as long); it paces the others from then
 * (ffq_task_paces()).  Returns whether anticipation started; the caller
 * calls ffq_update().
 */
static inline bool ffq_complete(const struct ffq_sched *s,
				struct ffq_task *t, bool sync, u64 now,
				u64 antic_ns, u64 block_ns)
{
	if (!sync || t->nr_out || !antic_ns || (t->flags & FFQ_T_EXITED))
		return false;
	t->flags |= FFQ_T_ANTIC;
	t->antic_start = t->last_finish;
	t->antic_until = now + antic_ns;
	t->block_until = now + (block_ns < antic_ns ? block_ns : antic_ns);
	t->pace_mark = s->sent;
	if (block_ns)
		t->flags |= FFQ_T_BLOCKING;
	return true;
}

/*
 * ffq_exit() - @t's I/O context exited: it will queue nothing more, so any
 * anticipation ends.  Its requests still outstanding keep it active until
 * they are freed.  Returns whether an anticipation was cancelled; the
 * caller calls ffq_update().
 */
static inline bool ffq_exit(struct ffq_task *t)
{
	t->flags |= FFQ_T_EXITED;
	return ffq_arrive(t);
}

/*
 * ffq_next_deadline() - the earliest anticipation deadline, 0 if none;
 * also of a deferred task's (ffq_defer()).
 */
static inline u64 ffq_next_deadline(const struct ffq_sched *s)
{
	struct ffq_hnode *n = ffq_heap_min(&s->timer);
	u64 next = n ? n->key : 0;
	const struct ffq_task *d = s->deferred;

	if (d && (d->flags & FFQ_T_ANTIC) &&
	    (!next || ffq_task_deadline(d) < next))
		next = ffq_task_deadline(d);
	return next;
}

/* ffq_timer_due() - an anticipated task with a deadline at or before @now. */
static inline struct ffq_task *ffq_timer_due(const struct ffq_sched *s,
					     u64 now)
{
	struct ffq_hnode *n = ffq_heap_min(&s->timer);

	if (!n || n->key > now)
		return NULL;
	return ffq_container_of(n, struct ffq_task, timer);
}

enum ffq_timer_event {
	FFQ_TIMER_UNBLOCK,	/* anticipation stops blocking dispatch */
	FFQ_TIMER_EXPIRE,	/* anticipation ended without a request */
};

/*
 * ffq_timer_fire() - handle @t's due deadline (ffq_timer_due()): its
 * blocking period or its whole anticipation ended.  Updates the heaps.
 */
static inline enum ffq_timer_event ffq_timer_fire(struct ffq_sched *s,
						  struct ffq_task *t, u64 now)
{
	enum ffq_timer_event ev = FFQ_TIMER_UNBLOCK;

	if ((t->flags & FFQ_T_BLOCKING) && now < t->antic_until) {
		t->flags &= ~FFQ_T_BLOCKING;
	} else {
		t->flags &= ~(FFQ_T_ANTIC | FFQ_T_BLOCKING);
		ev = FFQ_TIMER_EXPIRE;
	}
	ffq_update(s, t);
	return ev;
}

/* ffq_pick() results. */
enum ffq_pick {
	FFQ_PICK_TASK,		/* dispatch the first queued request of *task */
	FFQ_PICK_EMPTY,		/* nothing queued */
	FFQ_PICK_FULL,		/* depth requests in the device */
	FFQ_PICK_ANTIC,		/* an anticipated request would go first */
	FFQ_PICK_THROTTLED,	/* the next request is too far ahead */
};

/*
 * ffq_pick() - what to dispatch: the queued request with the smallest
 * start tag (the first of the task at the top of @ready), if
 *  - fewer than @depth requests hold a slot in the device,
 *  - no blocking anticipated task has a smaller hypothetical start tag,
 *    or the device keeps a free slot for each blocking task after this
 *    dispatch: SFQ(D) would send the hypothetical request first and then
 *    this one as long as slots remain, so blocking only has to keep the
 *    anticipated tasks' slots (with the depth above the load, e.g. a fast
 *    device, anticipation then never idles the device),
 *  - its start tag is at most @throttle ahead of the smallest progress of
 *    any task that restrains others (@throttle in charge units; 0 turns
 *    the throttle off),
 *  - with requests in the device, if its start tag is more than @throttle
 *    ahead of the most lagging pacing task's hypothetical one, the charge
 *    sent since that task's anticipation began is at most @throttle plus
 *    what @depth slots serve from its block_until to @now (ns) at one charge
 *    unit a nanosecond each: others run ahead of an anticipated task at
 *    the device's pace, not all at once.  With the device empty it may go
 *    (a completion re-decides a held dispatch; nothing would with none in
 *    flight).  Of several pacing tasks only the most lagging is asked.
 * When the request with the smallest start tag may not go, none may: the
 * others have larger tags.  *@gap is set to how far ahead it is (of the
 * pacing task, if that holds it back).  __ffq_pick() decides for @first,
 * the smallest start tag queued; @now is read only for the pacing test,
 * which needs @throttle.
 */
static inline enum ffq_pick __ffq_pick(const struct ffq_sched *s, u64 first,
				       u32 depth, u64 throttle, u64 now,
				       u64 *gap)
{
	struct ffq_hnode *b = ffq_heap_min(&s->block);
	struct ffq_hnode *p = ffq_heap_min(&s->prog);
	struct ffq_hnode *q = ffq_heap_min(&s->pace);

	*gap = 0;
	if (s->inflight >= depth)
		return FFQ_PICK_FULL;
	if (b && b->key < first && s->inflight + s->block.nr >= depth)
		return FFQ_PICK_ANTIC;
	if (p && first > p->key)
		*gap = first - p->key;
	if (throttle && *gap > throttle)
		return FFQ_PICK_THROTTLED;
	if (throttle && q && s->inflight && first > q->key + throttle) {
		const struct ffq_task *pt =
			ffq_container_of(q, struct ffq_task, pace);
		u64 since = now > pt->block_until ? now - pt->block_until : 0;

		if (s->sent - pt->pace_mark > throttle + since * depth) {
			*gap = first - q->key;
			return FFQ_PICK_THROTTLED;
		}
	}
	return FFQ_PICK_TASK;
}

static inline enum ffq_pick ffq_pick(const struct ffq_sched *s, u32 depth,
				     u64 throttle, u64 now,
				     struct ffq_task **task, u64 *gap)
{
	struct ffq_hnode *r = ffq_heap_min(&s->ready);
	enum ffq_pick res;

	*task = NULL;
	*gap = 0;
	if (!r)
		return FFQ_PICK_EMPTY;
	res = __ffq_pick(s, r->key, depth, throttle, now, gap);
	if (res == FFQ_PICK_TASK)
		*task = ffq_container_of(r, struct ffq_task, ready);
	return res;
}

/*
 * ffq_pick_lone() - ffq_pick() for a request of @t, tagged @start and
 * charged @charge (ffq_tag(), ffq_arrive()), that arrives with nothing
 * queued, decided without putting @t in @ready to take it out again.  The
 * caller has set @t's facts as if the request were in flight (nr_inflight
 * and inflight_start count it, nr_queued 0, nr_out counts it) but not
 * s->inflight.  @t is updated with @start as its last dispatched tag: its
 * keys in @vt and @prog come out as the queued request would make them
 * (its smallest outstanding tag is its oldest in flight or @start, which
 * no tag of it exceeds; its progress is @start), nothing else in the heaps
 * differs, nor @sent or s->inflight, so __ffq_pick() on @start decides as
 * ffq_pick() would have on the state with the request queued.  On
 * FFQ_PICK_TASK the request is dispatched (ffq_dispatched(); the caller
 * counts it in s->inflight).  On any other result it is not: the caller
 * makes it queued as an insert would have (the facts back, last_start as
 * it was, ffq_update()).  Returns the decision.
 */
static inline enum ffq_pick ffq_pick_lone(struct ffq_sched *s,
					  struct ffq_task *t, u64 start,
					  u32 charge, u32 depth, u64 throttle,
					  u64 now, u64 *gap)
{
	enum ffq_pick res;

	t->last_start = start;
	ffq_update(s, t);
	res = __ffq_pick(s, start, depth, throttle, now, gap);
	if (res == FFQ_PICK_TASK)
		ffq_dispatched(s, t, start, charge);
	return res;
}

/*
 * Per-request state, in rq->elv.priv[1] (priv[0] holds the start tag):
 * bits 0..31 the request's charge, 32..47 its depth slot + 1 (0: none),
 * 48..63 FFQ_RQ_* flags.
 */
#define FFQ_RQ_OWNED	0x1U	/* inserted: counted in its task's nr_out */
#define FFQ_RQ_QUEUED	0x2U	/* on its task's queue */
#define FFQ_RQ_ON_RB	0x4U	/* on its task's sector-sorted tree */
#define FFQ_RQ_TAGGED	0x8U	/* has tags (kept across a requeue) */
#define FFQ_RQ_SYNC	0x10U	/* synchronous: completion may anticipate */
#define FFQ_RQ_REQUEUED	0x20U	/* requeued: its slot goes back at insert */

static inline u64 ffq_rq_word(u32 charge, unsigned int slot,
			      unsigned int flags)
{
	return (u64)charge | ((u64)(slot & 0xffff) << 32) |
		((u64)(flags & 0xffff) << 48);
}

static inline u32 ffq_rq_charge(u64 word)
{
	return (u32)word;
}

static inline unsigned int ffq_rq_slot(u64 word)
{
	return (word >> 32) & 0xffff;
}

static inline unsigned int ffq_rq_flags(u64 word)
{
	return (word >> 48) & 0xffff;
}

#endif /* _FLASHFQ_CORE_H */
