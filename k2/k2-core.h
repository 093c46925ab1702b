/* SPDX-License-Identifier: GPL-2.0 */
/*
 * K2 decision logic, kept free of any elevator API so that tests/unit can
 * build it in userspace (with tests/unit/kshim.h) under ASan and UBSan.
 * The elevator glue in k2-iosched.c owns all locking and memory; every
 * function here works on plain values the caller passes in.
 *
 * K2 (Miemietz, Weisse, Haertig: "K2: Work-Constraining Scheduling of NVMe-
 * Attached Storage", RTSS 2019) keeps one staging queue per real-time I/O
 * priority level and one for everything else, serves them in strict
 * priority order and dispatches only while fewer than a bound of requests
 * are in flight in the device.
 */
#ifndef _K2_CORE_H
#define _K2_CORE_H

#ifdef __KERNEL__
#include <linux/types.h>
#include <linux/ioprio.h>
#else
#include "kshim.h"
#endif

/* Staging queues: RT levels 0..7 (0 is served first), then all others. */
#define K2_NR_RT_QUEUES		8
#define K2_BE_QUEUE		8
#define K2_NR_QUEUES		9
#define K2_ALL_QUEUES_MASK	((1U << K2_NR_QUEUES) - 1)
#define K2_RT_QUEUES_MASK	((1U << K2_NR_RT_QUEUES) - 1)

/* Tunables: default bound, and the largest starvation_ms accepted. */
#define K2_DEFAULT_MAX_INFLIGHT	32U
#define K2_MAX_STARVATION_MS	60000U

/*
 * k2_ioprio_to_queue() - staging queue of an I/O priority value
 *
 * IOPRIO_CLASS_RT level N goes to queue N.  Everything else (BE, IDLE,
 * NONE, and any class the kernel may add) shares K2_BE_QUEUE.  The level is
 * the low bits of the priority data (IOPRIO_PRIO_LEVEL), so the hint bits
 * that newer kernels keep above it do not matter.  The public K2 code
 * derived the level with IOPRIO_PRIO_VALUE(), which put every RT level in
 * the same queue.
 */
static inline unsigned int k2_ioprio_to_queue(unsigned int ioprio)
{
	if (IOPRIO_PRIO_CLASS(ioprio) == IOPRIO_CLASS_RT)
		return IOPRIO_PRIO_LEVEL(ioprio);
	return K2_BE_QUEUE;
}

/*
 * k2_bound() - the bound in force: the max_inflight setting, clamped to the
 * scheduler queue depth (q->nr_requests), and never below one.  Applying the
 * clamp at use rather than when the depth changes lets a setting survive a
 * temporary reduction of nr_requests.
 */
static inline unsigned int k2_bound(unsigned int max_inflight,
				    unsigned long depth)
{
	unsigned int bound = max_inflight;

	if (depth < bound)
		bound = depth;
	return bound ? bound : 1;
}

/*
 * k2_be_wait() - how long the non-RT queue has been starved: the lesser of
 * the age of its oldest request and the time since it was last served.
 * Measured this way, a promotion (k2_pick_queue()) restarts the clock, so
 * a backlogged non-RT queue gets one request ahead of RT per starvation
 * period instead of taking over once its whole backlog has aged.
 */
static inline unsigned long k2_be_wait(unsigned long head_age,
				       unsigned long since_served)
{
	return head_age < since_served ? head_age : since_served;
}

/* k2_pick_queue() results that are not a queue index. */
#define K2_PICK_EMPTY		(-1)
#define K2_PICK_THROTTLED	(-2)

/*
 * k2_pick_queue() - which staging queue to dispatch from
 * @nonempty:	bit i set if staging queue i holds a request
 * @inflight:	requests counted in flight in the device
 * @bound:	the bound in force (k2_bound())
 * @be_wait:	how long K2_BE_QUEUE has been starved (k2_be_wait()), in
 *		any time unit
 * @starve_after: starvation after which its oldest request goes first,
 *		same unit; 0 disables the promotion (strict priority)
 * @promoted:	set when the choice overrode strict priority
 *
 * Returns a queue index, K2_PICK_EMPTY when nothing is queued, or
 * K2_PICK_THROTTLED when requests are queued but the bound is reached.  A
 * bound lowered below @inflight simply keeps returning K2_PICK_THROTTLED
 * until enough requests complete.
 */
static inline int k2_pick_queue(unsigned int nonempty, u32 inflight,
				u32 bound, unsigned long be_wait,
				unsigned long starve_after, bool *promoted)
{
	unsigned int i;

	*promoted = false;
	nonempty &= K2_ALL_QUEUES_MASK;
	if (!nonempty)
		return K2_PICK_EMPTY;
	if (inflight >= bound)
		return K2_PICK_THROTTLED;
	if ((nonempty & (1U << K2_BE_QUEUE)) && (nonempty & K2_RT_QUEUES_MASK) &&
	    starve_after && be_wait >= starve_after) {
		*promoted = true;
		return K2_BE_QUEUE;
	}
	for (i = 0; i < K2_NR_QUEUES; i++)
		if (nonempty & (1U << i))
			return i;
	return K2_PICK_EMPTY;
}

/*
 * The in-flight word.  The count and a recovery epoch share one 64-bit word
 * so that one compare-and-exchange changes them together: bits 0..31 count
 * the requests dispatched and not yet completed or requeued, bits 32..63
 * number the resets of a leaked count (k2_inflight_reset()).  A request
 * remembers the epoch it was counted in and gives its slot back only to
 * that epoch, so a reset can never be followed by requests that were
 * outstanding before it driving the new count below the truth.
 */
static inline u32 k2_inflight_count(u64 word)
{
	return (u32)word;
}

static inline u32 k2_inflight_epoch(u64 word)
{
	return (u32)(word >> 32);
}

static inline u64 k2_inflight_word(u32 epoch, u32 count)
{
	return ((u64)epoch << 32) | count;
}

/*
 * k2_inflight_inc() - take a slot: false (and *@new untouched) if @old
 * already counts @bound or more requests.
 */
static inline bool k2_inflight_inc(u64 old, u32 bound, u64 *new)
{
	u32 count = k2_inflight_count(old);

	if (count >= bound)
		return false;
	*new = k2_inflight_word(k2_inflight_epoch(old), count + 1);
	return true;
}

enum k2_dec_result {
	K2_DEC_OK,		/* *new is @old with one slot less */
	K2_DEC_STALE,		/* counted before the last reset: ignore */
	K2_DEC_UNDERFLOW,	/* the count is already zero: refuse */
};

/*
 * k2_inflight_dec() - give back a slot taken in @epoch.  Never goes below
 * zero; an underflow is an accounting bug the caller reports.
 */
static inline enum k2_dec_result k2_inflight_dec(u64 old, u32 epoch, u64 *new)
{
	u32 count = k2_inflight_count(old);

	if (k2_inflight_epoch(old) != epoch)
		return K2_DEC_STALE;
	if (!count)
		return K2_DEC_UNDERFLOW;
	*new = k2_inflight_word(epoch, count - 1);
	return K2_DEC_OK;
}

/* k2_inflight_reset() - forget every counted request: new epoch, zero. */
static inline u64 k2_inflight_reset(u64 old)
{
	return k2_inflight_word(k2_inflight_epoch(old) + 1, 0);
}

/*
 * Stall detection for a count that stays at the bound with nothing left to
 * complete (a leak).  Dispatch calls k2_stall_check() each time it finds the
 * bound reached; blk-mq re-runs a queue whose elevator has work but
 * dispatches nothing every few milliseconds, so the check keeps being made.
 * Any completion or requeue changes the in-flight word, any dispatch the
 * dispatch sequence; when neither has changed for @timeout, no request
 * has made progress for that long and the count is presumed leaked.  A
 * device that really holds every slot for that long (hung until its own
 * timeout) also trips it; the cost is that K2 then dispatches past the
 * bound until those requests end, which a hung device does not mind.
 */
struct k2_stall {
	u64 word;		/* in-flight word when the wait began */
	u64 seq;		/* dispatch sequence then */
	unsigned long since;	/* time then, same unit as @now */
	bool armed;		/* a wait is being timed */
};

static inline bool k2_stall_check(struct k2_stall *s, u64 word, u64 seq,
				  unsigned long now, unsigned long timeout)
{
	if (!s->armed || s->word != word || s->seq != seq) {
		s->armed = true;
		s->word = word;
		s->seq = seq;
		s->since = now;
		return false;
	}
	return now - s->since >= timeout;
}

static inline void k2_stall_disarm(struct k2_stall *s)
{
	s->armed = false;
}

/*
 * Per-request state, kept in rq->elv.priv[0] (the epoch of a counted
 * request in rq->elv.priv[1]): the staging queue index and three flags.
 */
#define K2_RQ_QUEUE_MASK	0x0fUL
#define K2_RQ_QUEUED		0x10UL	/* on a staging queue */
#define K2_RQ_ON_RB		0x20UL	/* on its queue's sector-sorted tree */
#define K2_RQ_COUNTED		0x40UL	/* holds a slot of the in-flight count */

static inline unsigned int k2_rq_state_queue(unsigned long state)
{
	unsigned int idx = state & K2_RQ_QUEUE_MASK;

	return idx < K2_NR_QUEUES ? idx : K2_BE_QUEUE;
}

#endif /* _K2_CORE_H */
