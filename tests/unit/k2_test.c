// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of K2's decision logic (k2/k2-core.h), built in userspace with
 * ASan and UBSan:
 *   cc -std=gnu11 -Wall -Wextra -Werror -g -fsanitize=address,undefined \
 *	-I tests/unit -I k2 tests/unit/k2_test.c -o /tmp/k2_test
 */
#include "unit.h"
#include "k2-core.h"

#define BE_BIT		(1U << K2_BE_QUEUE)
#define RT_BIT(l)	(1U << (l))

/* k2_pick_queue() with no starvation and no interest in the flag. */
static int pick(unsigned int nonempty, u32 inflight, u32 bound)
{
	bool promoted = true;
	int sel = k2_pick_queue(nonempty, inflight, bound, 0, 0, &promoted);

	CHECK(!promoted);
	return sel;
}

TEST(rt_levels_map_to_their_own_queue)
{
	int level;

	for (level = 0; level < IOPRIO_NR_LEVELS; level++)
		CHECK_EQ(k2_ioprio_to_queue(IOPRIO_PRIO_VALUE(IOPRIO_CLASS_RT,
							      level)), level);
}

/*
 * The public K2 code took IOPRIO_PRIO_VALUE() as the level, so every RT
 * level landed in one queue.  All eight must be distinct, 0 and 7 included.
 */
TEST(rt_levels_0_and_7_differ_public_k2_bug)
{
	unsigned int seen = 0;
	int level;

	CHECK(k2_ioprio_to_queue(IOPRIO_PRIO_VALUE(IOPRIO_CLASS_RT, 0)) !=
	      k2_ioprio_to_queue(IOPRIO_PRIO_VALUE(IOPRIO_CLASS_RT, 7)));
	for (level = 0; level < IOPRIO_NR_LEVELS; level++)
		seen |= 1U << k2_ioprio_to_queue(IOPRIO_PRIO_VALUE(IOPRIO_CLASS_RT,
								  level));
	CHECK_EQ(seen, K2_RT_QUEUES_MASK);
}

TEST(non_rt_classes_map_to_the_non_rt_queue)
{
	int level;

	CHECK_EQ(k2_ioprio_to_queue(0), K2_BE_QUEUE);
	for (level = 0; level < IOPRIO_NR_LEVELS; level++) {
		CHECK_EQ(k2_ioprio_to_queue(IOPRIO_PRIO_VALUE(IOPRIO_CLASS_NONE,
							      level)),
			 K2_BE_QUEUE);
		CHECK_EQ(k2_ioprio_to_queue(IOPRIO_PRIO_VALUE(IOPRIO_CLASS_BE,
							      level)),
			 K2_BE_QUEUE);
		CHECK_EQ(k2_ioprio_to_queue(IOPRIO_PRIO_VALUE(IOPRIO_CLASS_IDLE,
							      level)),
			 K2_BE_QUEUE);
	}
	/* Unknown and invalid classes are not real-time either. */
	CHECK_EQ(k2_ioprio_to_queue(4 << IOPRIO_CLASS_SHIFT), K2_BE_QUEUE);
	CHECK_EQ(k2_ioprio_to_queue(IOPRIO_CLASS_INVALID << IOPRIO_CLASS_SHIFT),
		 K2_BE_QUEUE);
	/* An out-of-range level gives the invalid class, not RT. */
	CHECK_EQ(k2_ioprio_to_queue(IOPRIO_PRIO_VALUE(IOPRIO_CLASS_RT, 8)),
		 K2_BE_QUEUE);
}

/* Hint bits (above the level) must not move a request to another queue. */
TEST(ioprio_hints_do_not_change_the_queue)
{
	CHECK_EQ(k2_ioprio_to_queue(IOPRIO_PRIO_VALUE_HINT(IOPRIO_CLASS_RT, 5, 3)),
		 5);
	CHECK_EQ(k2_ioprio_to_queue(IOPRIO_PRIO_VALUE_HINT(IOPRIO_CLASS_RT, 0,
							   IOPRIO_NR_HINTS - 1)),
		 0);
	CHECK_EQ(k2_ioprio_to_queue(IOPRIO_PRIO_VALUE_HINT(IOPRIO_CLASS_BE, 0, 7)),
		 K2_BE_QUEUE);
}

TEST(every_queue_index_is_in_range)
{
	unsigned int v;

	for (v = 0; v <= 0xffff; v++)
		CHECK(k2_ioprio_to_queue(v) < K2_NR_QUEUES);
}

/* The highest non-empty RT level goes first, the non-RT queue last. */
TEST(strict_priority_order)
{
	unsigned int mask, i;

	CHECK_EQ(pick(0, 0, 32), K2_PICK_EMPTY);
	for (mask = 1; mask <= K2_ALL_QUEUES_MASK; mask++) {
		int expect = -1;

		for (i = 0; i < K2_NR_QUEUES; i++) {
			if (mask & (1U << i)) {
				expect = i;
				break;
			}
		}
		CHECK_EQ(pick(mask, 0, 32), expect);
	}
	CHECK_EQ(pick(BE_BIT, 0, 32), K2_BE_QUEUE);
	CHECK_EQ(pick(BE_BIT | RT_BIT(7), 0, 32), 7);
	CHECK_EQ(pick(BE_BIT | RT_BIT(7) | RT_BIT(3), 0, 32), 3);
	/* Bits above the nine queues are ignored. */
	CHECK_EQ(pick(1U << K2_NR_QUEUES, 0, 32), K2_PICK_EMPTY);
}

TEST(bound_blocks_at_bound_and_allows_below)
{
	u32 bound;

	for (bound = 1; bound <= 64; bound++) {
		CHECK_EQ(pick(RT_BIT(0), bound, bound), K2_PICK_THROTTLED);
		CHECK_EQ(pick(BE_BIT, bound + 1, bound), K2_PICK_THROTTLED);
		CHECK_EQ(pick(RT_BIT(0), bound - 1, bound), 0);
		CHECK_EQ(pick(BE_BIT, bound - 1, bound), K2_BE_QUEUE);
	}
	/* Nothing queued is "empty", not "throttled", whatever the count. */
	CHECK_EQ(pick(0, 100, 1), K2_PICK_EMPTY);
}

/*
 * A bound lowered below the count keeps dispatch closed until completions
 * bring the count under the new bound.
 */
TEST(lowering_the_bound_below_inflight)
{
	u32 bound = 4, inflight = 10;
	u32 count = inflight, next;

	for (; inflight >= bound; inflight--) {
		CHECK_EQ(pick(RT_BIT(2), inflight, bound), K2_PICK_THROTTLED);
		CHECK(!k2_inflight_inc(count, bound, &next));
		CHECK(k2_inflight_dec(count, &next));
		CHECK_EQ(next, inflight - 1);
		count = next;
	}
	CHECK_EQ(count, 3);
	CHECK_EQ(pick(RT_BIT(2), count, bound), 2);
	CHECK(k2_inflight_inc(count, bound, &next));
	CHECK_EQ(next, 4);
	CHECK(!k2_inflight_inc(next, bound, &count));
}

TEST(bound_is_clamped_to_the_queue_depth)
{
	CHECK_EQ(k2_bound(K2_DEFAULT_MAX_INFLIGHT, 256), 32);
	CHECK_EQ(k2_bound(K2_DEFAULT_MAX_INFLIGHT, 16), 16);
	CHECK_EQ(k2_bound(200, 64), 64);
	CHECK_EQ(k2_bound(1, 64), 1);
	CHECK_EQ(k2_bound(0, 64), 1);
	CHECK_EQ(k2_bound(32, 0), 1);
	CHECK_EQ(k2_bound(32, 1UL << 40), 32);
}

TEST(starvation_off_is_strict_priority)
{
	bool promoted;

	CHECK_EQ(k2_pick_queue(BE_BIT | RT_BIT(0), 0, 32, (unsigned long)-1, 0,
			       &promoted), 0);
	CHECK(!promoted);
}

TEST(starvation_promotes_only_after_threshold)
{
	unsigned long t = 250;
	bool promoted;

	CHECK_EQ(k2_pick_queue(BE_BIT | RT_BIT(4), 0, 32, 0, t, &promoted), 4);
	CHECK(!promoted);
	CHECK_EQ(k2_pick_queue(BE_BIT | RT_BIT(4), 0, 32, t - 1, t, &promoted), 4);
	CHECK(!promoted);
	CHECK_EQ(k2_pick_queue(BE_BIT | RT_BIT(4), 0, 32, t, t, &promoted),
		 K2_BE_QUEUE);
	CHECK(promoted);
	CHECK_EQ(k2_pick_queue(BE_BIT | RT_BIT(0), 0, 32, t * 1000, t,
			       &promoted), K2_BE_QUEUE);
	CHECK(promoted);
	/* Alone, the non-RT queue is simply next: not a promotion. */
	CHECK_EQ(k2_pick_queue(BE_BIT, 0, 32, t * 1000, t, &promoted),
		 K2_BE_QUEUE);
	CHECK(!promoted);
	/* Without a non-RT request the age is meaningless. */
	CHECK_EQ(k2_pick_queue(RT_BIT(1), 0, 32, t * 1000, t, &promoted), 1);
	CHECK(!promoted);
}

TEST(starvation_wait_is_the_lesser_of_age_and_time_since_served)
{
	CHECK_EQ(k2_be_wait(100, 5), 5);
	CHECK_EQ(k2_be_wait(5, 100), 5);
	CHECK_EQ(k2_be_wait(0, 0), 0);
}

/*
 * RT and non-RT queues both permanently backlogged, the non-RT backlog
 * long overdue, one dispatch per time unit: the non-RT queue gets one
 * request per starvation period, not the whole device.
 */
TEST(starvation_promotes_once_per_period)
{
	const unsigned long t_starve = 20, steps = 1000, start = 5000;
	unsigned long now, served = start, be = 0, promoted_n = 0;
	bool promoted;

	for (now = start; now < start + steps; now++) {
		unsigned long wait = k2_be_wait(now, now - served);
		int sel = k2_pick_queue(BE_BIT | RT_BIT(0), 0, 1, wait, t_starve,
					&promoted);

		if (sel == K2_BE_QUEUE) {
			be++;
			served = now;
		}
		promoted_n += promoted;
		CHECK(sel == K2_BE_QUEUE || sel == 0);
	}
	/* served at start, so at start + 20, + 40, ..., + 980 */
	CHECK_EQ(be, (steps - 1) / t_starve);
	CHECK_EQ(promoted_n, be);

	/* Without RT work the non-RT queue gets every dispatch. */
	be = 0;
	for (now = start; now < start + steps; now++) {
		int sel = k2_pick_queue(BE_BIT, 0, 1, 0, t_starve, &promoted);

		be += sel == K2_BE_QUEUE;
		CHECK(!promoted);
	}
	CHECK_EQ(be, steps);
}

TEST(starvation_does_not_override_the_bound)
{
	bool promoted;

	CHECK_EQ(k2_pick_queue(BE_BIT | RT_BIT(0), 32, 32, 10000, 1, &promoted),
		 K2_PICK_THROTTLED);
	CHECK(!promoted);
}

/* RT keeps what is set, up to half; best effort the rest, at least one. */
TEST(best_effort_depth_leaves_rt_tags)
{
	CHECK_EQ(k2_be_depth(64, 256), 192);
	CHECK_EQ(k2_be_depth(0, 256), 256);
	CHECK_EQ(k2_rt_tags(128, 256), 128);
	CHECK_EQ(k2_be_depth(128, 256), 128);
	/* more than half is clamped, also after nr_requests shrinks */
	CHECK_EQ(k2_rt_tags(200, 256), 128);
	CHECK_EQ(k2_be_depth(200, 256), 128);
	CHECK_EQ(k2_rt_tags(64, 32), 16);
	CHECK_EQ(k2_be_depth(64, 32), 16);
	CHECK_EQ(k2_be_depth(64, 1), 1);
	CHECK_EQ(k2_be_depth(5, 0), 1);
	/* the default keeps three quarters for best effort */
	CHECK_EQ(k2_default_rt_tags(256), 64);
	CHECK_EQ(k2_be_depth(k2_default_rt_tags(64), 64), 48);
	CHECK_EQ(k2_be_depth(k2_default_rt_tags(2), 2), 2);
}

TEST(counter_never_underflows)
{
	u32 count = 0, next = 12345;

	CHECK(!k2_inflight_dec(count, &next));
	CHECK_EQ(next, 12345);
	CHECK(k2_inflight_inc(count, 32, &next));
	CHECK_EQ(next, 1);
	count = next;
	CHECK(k2_inflight_dec(count, &next));
	CHECK_EQ(next, 0);
	count = next;
	CHECK(!k2_inflight_dec(count, &next));
	CHECK_EQ(count, 0);
}

TEST(counter_increment_stops_at_bound)
{
	u32 count = 0, next;
	u32 i;

	for (i = 0; i < 32; i++) {
		CHECK(k2_inflight_inc(count, 32, &next));
		count = next;
	}
	CHECK_EQ(count, 32);
	CHECK(!k2_inflight_inc(count, 32, &next));
	/* The count never wraps. */
	CHECK(!k2_inflight_inc(U32_MAX, U32_MAX, &next));
}

/*
 * A stall check gives back only the slots of requests that no longer
 * exist, and only when no slot was given back while it looked.
 */
TEST(stall_recovers_only_lost_slots)
{
	u32 next = 777;

	/* every slot held by a request that exists: a slow device */
	CHECK(!k2_inflight_recover(4, 4, 4, &next));
	CHECK_EQ(next, 777);
	/* a request that gave its slot back late is found as well */
	CHECK(!k2_inflight_recover(4, 4, 5, &next));
	/* two slots lost */
	CHECK(k2_inflight_recover(4, 4, 2, &next));
	CHECK_EQ(next, 2);
	/* all lost */
	CHECK(k2_inflight_recover(4, 4, 0, &next));
	CHECK_EQ(next, 0);
	/* a completion during the walk: not stalled, nothing given back */
	next = 777;
	CHECK(!k2_inflight_recover(4, 3, 0, &next));
	CHECK_EQ(next, 777);
	CHECK(!k2_inflight_recover(0, 0, 0, &next));
}

TEST(stall_detected_only_without_progress)
{
	struct k2_stall s = { 0 };
	unsigned long t = 1000, timeout = 50;
	u32 word = 32;

	k2_stall_disarm(&s);
	CHECK(!k2_stall_check(&s, word, 5, t, timeout));
	CHECK(!k2_stall_check(&s, word, 5, t + timeout - 1, timeout));
	CHECK(k2_stall_check(&s, word, 5, t + timeout, timeout));

	/* A completion (count changed) restarts the wait. */
	CHECK(!k2_stall_check(&s, word - 1, 5, t + timeout + 1, timeout));
	CHECK(!k2_stall_check(&s, word - 1, 5, t + 2 * timeout, timeout));
	CHECK(k2_stall_check(&s, word - 1, 5, t + 2 * timeout + 1, timeout));

	/*
	 * A completion followed by a dispatch leaves the count as it was;
	 * the dispatch sequence tells it apart.
	 */
	k2_stall_disarm(&s);
	CHECK(!k2_stall_check(&s, word, 5, t, timeout));
	CHECK(!k2_stall_check(&s, word, 6, t + timeout, timeout));
	CHECK(!k2_stall_check(&s, word, 6, t + 2 * timeout - 1, timeout));
	CHECK(k2_stall_check(&s, word, 6, t + 2 * timeout, timeout));

	/* Time wraps. */
	k2_stall_disarm(&s);
	CHECK(!k2_stall_check(&s, word, 1, (unsigned long)-10, timeout));
	CHECK(k2_stall_check(&s, word, 1, timeout - 10, timeout));
}

TEST(request_state_queue_index)
{
	unsigned long i;

	for (i = 0; i < K2_NR_QUEUES; i++)
		CHECK_EQ(k2_rq_state_queue(i | K2_RQ_QUEUED | K2_RQ_COUNTED), i);
	/* A garbage index stays inside the queue array. */
	for (; i <= K2_RQ_QUEUE_MASK; i++)
		CHECK_EQ(k2_rq_state_queue(i), K2_BE_QUEUE);
	CHECK_EQ(K2_RQ_QUEUE_MASK & (K2_RQ_QUEUED | K2_RQ_ON_RB | K2_RQ_COUNTED),
		 0);
}

/*
 * A model of the accounting in k2-iosched.c: requests are dispatched while
 * k2_pick_queue() allows, each counted one carries K2_RQ_COUNTED, and
 * completion, requeue (prepared by the driver, which keeps the slot, or
 * not), loss (a request freed without finish_request, keeping a stale
 * flag) and stall checks happen in random order.  The count must always
 * be the requests that hold a slot plus the slots lost since the last
 * check, never fall below the holders, and never underflow.
 */
#define NREQ	96

struct model_rq {
	bool exists;		/* allocated, i.e. the stall check sees it */
	unsigned long state;
};

static u64 rng_state = 0x9e3779b97f4a7c15ULL;

static u32 rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (u32)(rng_state >> 11);
}

/* As k2_uncount(): false on an underflow, true otherwise. */
static bool model_uncount(u32 *count, struct model_rq *r)
{
	u32 next;

	if (!(r->state & K2_RQ_COUNTED))
		return true;
	r->state &= ~K2_RQ_COUNTED;
	if (!k2_inflight_dec(*count, &next))
		return false;
	*count = next;
	return true;
}

/* As k2_count_holders(). */
static u32 model_holders(const struct model_rq *rqs)
{
	u32 found = 0;
	int i;

	for (i = 0; i < NREQ; i++)
		if (rqs[i].exists && (rqs[i].state & K2_RQ_COUNTED))
			found++;
	return found;
}

TEST(accounting_model_stays_exact)
{
	struct model_rq rqs[NREQ] = { { 0 } };
	u32 count = 0, next, lost = 0, bound = 32, holders;
	int step, i;

	for (step = 0; step < 200000; step++) {
		struct model_rq *r = &rqs[rng() % NREQ];

		switch (rng() % 9) {
		case 0: case 1: case 2:	/* allocate and dispatch */
			if (r->exists)
				break;
			if (k2_pick_queue(BE_BIT, count, bound, 0, 0,
					  &(bool){ 0 }) < 0)
				break;
			CHECK(k2_inflight_inc(count, U32_MAX, &next));
			count = next;
			r->exists = true;
			r->state = K2_RQ_COUNTED;	/* prepare_request zeroed it */
			break;
		case 3: case 4:		/* finish_request, then freed */
			if (!r->exists)
				break;
			CHECK(model_uncount(&count, r));
			r->exists = false;
			/* a second finish (double call) must be a no-op */
			CHECK(model_uncount(&count, r));
			break;
		case 5:			/* requeue */
			if (!r->exists)
				break;
			if (rng() % 2)	/* not prepared: inserted again */
				CHECK(model_uncount(&count, r));
			/* else RQF_DONTPREP: keeps its slot, issued again */
			break;
		case 6:			/* bound changed */
			bound = 1 + rng() % 64;
			break;
		case 7:			/* rare loss: freed, no finish */
			if (r->exists && (r->state & K2_RQ_COUNTED) &&
			    rng() % 16 == 0) {
				r->exists = false;
				lost++;
			}
			break;
		case 8:			/* stall check */
			if (k2_inflight_recover(count, count,
						model_holders(rqs), &next)) {
				CHECK_EQ(count - next, lost);
				count = next;
				lost = 0;
			}
			break;
		}
		holders = model_holders(rqs);
		CHECK_EQ(count, holders + lost);
		if (count != holders + lost)
			break;
	}
	/* Everything completes and the last losses are recovered: zero. */
	for (i = 0; i < NREQ; i++) {
		if (rqs[i].exists)
			CHECK(model_uncount(&count, &rqs[i]));
		rqs[i].exists = false;
	}
	CHECK(k2_inflight_recover(count, count, 0, &next) == (lost > 0));
	if (lost)
		count = next;
	CHECK_EQ(count, 0);
}

/* The adaptive bound (target_latency_us) */

TEST(latency_buckets_are_ordered_and_within_an_eighth)
{
	unsigned int b, prev = 0;
	u64 us;

	for (us = 0; us < 20000000; us += us < 64 ? 1 : us / 7) {
		b = k2_lat_bucket(us);
		CHECK(b < K2_LAT_BUCKETS);
		CHECK(b >= prev);
		prev = b;
		if (b == K2_LAT_BUCKETS - 1)
			continue;
		/* the value stands for @us within 1/16 (half a bucket) */
		CHECK(k2_lat_value(b) * 16 <= us * 17 + 16);
		CHECK(k2_lat_value(b) * 16 + 16 >= us * 15);
		CHECK_EQ(k2_lat_bucket(k2_lat_value(b)), b);
	}
	CHECK_EQ(k2_lat_bucket(U64_MAX), K2_LAT_BUCKETS - 1);
	CHECK_EQ(k2_lat_bucket(0), 0);
	CHECK_EQ(k2_lat_bucket(7), 7);
	CHECK_EQ(k2_lat_value(k2_lat_bucket(1000)), 992);	/* 960..1023 */
	/* the target range is inside the histogram */
	CHECK(k2_lat_bucket(K2_MAX_TARGET_US) < K2_LAT_BUCKETS - 1);
}

TEST(latency_percentile_counts_from_the_top)
{
	u32 hist[K2_LAT_BUCKETS] = { 0 };
	unsigned int i;

	CHECK_EQ(k2_lat_percentile(hist, 0, K2_ADAPT_PERMILLE), 0);
	/* 998 samples at 100 us, one at 1 ms, one at 10 ms */
	hist[k2_lat_bucket(100)] = 998;
	hist[k2_lat_bucket(1000)] = 1;
	hist[k2_lat_bucket(10000)] = 1;
	/* 1000 samples: one lies above the 99.9th percentile */
	CHECK_EQ(k2_lat_bucket(k2_lat_percentile(hist, 1000, 999)),
		 k2_lat_bucket(1000));
	/* the maximum, then the median */
	CHECK_EQ(k2_lat_bucket(k2_lat_percentile(hist, 1000, 1000)),
		 k2_lat_bucket(10000));
	CHECK_EQ(k2_lat_bucket(k2_lat_percentile(hist, 1000, 500)),
		 k2_lat_bucket(100));
	/* fewer than 1000 samples: the 99.9th is their maximum */
	for (i = 0; i < K2_LAT_BUCKETS; i++)
		hist[i] = 0;
	hist[k2_lat_bucket(100)] = 150;
	hist[k2_lat_bucket(700)] = 1;
	CHECK_EQ(k2_lat_bucket(k2_lat_percentile(hist, 151, 999)),
		 k2_lat_bucket(700));
}

/* log2(@x) in double precision, without libm */
static double log2_exact(u64 x)
{
	double m = x, y, y2, term, ln = 0;
	int k = 0, i;

	while (m >= 2) {
		m /= 2;
		k++;
	}
	/* ln(m) = 2 atanh((m - 1) / (m + 1)), m in [1, 2) */
	y = (m - 1) / (m + 1);
	y2 = y * y;
	term = y;
	for (i = 1; i < 40; i += 2) {
		ln += term / i;
		term *= y2;
	}
	return k + 2 * ln / 0.69314718055994531;
}

TEST(log2_q8_is_within_a_tenth)
{
	u64 x;

	CHECK_EQ(k2_log2_q8(1), 0);
	CHECK_EQ(k2_log2_q8(2), 256);
	CHECK_EQ(k2_log2_q8(1024), 2560);
	CHECK_EQ(k2_log2_q8(3), 384);	/* 1.5: log2(3) is 1.585 */
	for (x = 1; x < 5000; x++) {
		double lg = log2_exact(x);

		CHECK(k2_log2_q8(x) <= lg * 256 + 0.5);
		CHECK(k2_log2_q8(x) + 0.09 * 256 >= lg * 256);
		CHECK(k2_log2_q8(x + 1) >= k2_log2_q8(x));
	}
}

/*
 * The adaptive estimate: the 99.9th percentile from 1000 samples up and
 * below 20; in between, the largest sample plus half the growth of an
 * exponential tail to the 99.9th percentile, m * ln(1000 / n) / 2, m the
 * mean excess over the 90th percentile.
 */
TEST(latency_tail_extends_the_largest_of_few_samples)
{
	u32 hist[K2_LAT_BUCKETS] = { 0 };
	u64 p90, top, m, want;
	unsigned int i;

	/* 15 samples: the largest */
	hist[k2_lat_bucket(100)] = 14;
	hist[k2_lat_bucket(700)] = 1;
	CHECK_EQ(k2_lat_tail(hist, 15), k2_lat_percentile(hist, 15, 999));
	/* 1000 samples: the 99.9th percentile */
	hist[k2_lat_bucket(100)] = 998;
	hist[k2_lat_bucket(1000)] = 1;
	hist[k2_lat_bucket(10000)] = 1;
	CHECK_EQ(k2_lat_tail(hist, 1000), k2_lat_percentile(hist, 1000, 999));
	/* all alike: nothing above the 90th percentile, nothing added */
	for (i = 0; i < K2_LAT_BUCKETS; i++)
		hist[i] = 0;
	hist[k2_lat_bucket(300)] = 125;
	CHECK_EQ(k2_lat_tail(hist, 125), k2_lat_value(k2_lat_bucket(300)));
	/* 125 samples: 100 at 200 us, 15 at 300, 10 at 400 */
	hist[k2_lat_bucket(300)] = 15;
	hist[k2_lat_bucket(200)] = 100;
	hist[k2_lat_bucket(400)] = 10;
	p90 = k2_lat_percentile(hist, 125, 900);
	top = k2_lat_percentile(hist, 125, 999);
	CHECK_EQ(k2_lat_bucket(p90), k2_lat_bucket(300));
	CHECK_EQ(k2_lat_bucket(top), k2_lat_bucket(400));
	m = top - p90;	/* only the 10 at 400 are above it */
	/* ln(1000 / 125) = ln 8 = 2.079 */
	want = top + m * 2.079 / 2;
	CHECK(k2_lat_tail(hist, 125) + 3 >= want);
	CHECK(k2_lat_tail(hist, 125) <= want + 3);
}

TEST(latency_fold_halves_the_past)
{
	u32 acc[K2_LAT_BUCKETS] = { 0 }, win[K2_LAT_BUCKETS] = { 0 };

	win[3] = 100;
	CHECK_EQ(k2_lat_fold(acc, win), 100);
	win[3] = 0;
	win[5] = 10;
	CHECK_EQ(k2_lat_fold(acc, win), 60);
	CHECK_EQ(acc[3], 50);
	CHECK_EQ(acc[5], 10);
	win[5] = 0;
	CHECK_EQ(k2_lat_fold(acc, win), 30);
}

TEST(adapt_window_needs_samples_and_twice_the_target)
{
	CHECK(!k2_adapt_window_done(1000000000ULL, K2_ADAPT_MIN_SAMPLES - 1,
				    0, 1000));
	CHECK(!k2_adapt_window_done(1999999, K2_ADAPT_MIN_SAMPLES, 0, 1000));
	CHECK(k2_adapt_window_done(2000000, K2_ADAPT_MIN_SAMPLES, 0, 1000));
	/* the largest target does not overflow */
	CHECK(!k2_adapt_window_done(2000ULL * K2_MAX_TARGET_US - 1, 1000, 0,
				    K2_MAX_TARGET_US));
}

TEST(adapt_window_ends_early_on_samples_over_the_target)
{
	u32 hist[K2_LAT_BUCKETS] = { 0 };

	/* three above the target end a window of fewer samples, not sooner */
	CHECK(k2_adapt_window_done(2000000, K2_ADAPT_EARLY_OVER,
				   K2_ADAPT_EARLY_OVER, 1000));
	CHECK(!k2_adapt_window_done(2000000, K2_ADAPT_MIN_SAMPLES - 1,
				    K2_ADAPT_EARLY_OVER - 1, 1000));
	CHECK(!k2_adapt_window_done(1999999, K2_ADAPT_EARLY_OVER,
				    K2_ADAPT_EARLY_OVER, 1000));
	/*
	 * and then the 99.9th percentile of up to 2999 samples (a window
	 * holds about K2_ADAPT_MIN_SAMPLES) is over it
	 */
	hist[k2_lat_bucket(100)] = 2999 - K2_ADAPT_EARLY_OVER;
	hist[k2_lat_bucket(2000)] = K2_ADAPT_EARLY_OVER;
	CHECK(k2_lat_percentile(hist, 2999, K2_ADAPT_PERMILLE) > 1000);
}

/*
 * k2_adapt_decide(): one window's estimate (of FULL samples, unless
 * stated) against a 1000 us target, and the bound and reason it gives.
 */
#define FULL	(2 * K2_ADAPT_MIN_SAMPLES)

static const struct decide_step {
	u32 bound, max, est_us, samples, why, next;
	u32 falls;	/* the falls in a row before it */
} decide_steps[] = {
	/* far above: at most halved */
	{ 32, 64, 10000, FULL, K2_ADAPT_DOWN, 16, 0 },
	/* in proportion to the overshoot: 32 * 1000 / 1250 = 25 */
	{ 32, 64, 1250, FULL, K2_ADAPT_DOWN, 25, 0 },
	/* barely above: still at least one less */
	{ 32, 64, 1001, FULL, K2_ADAPT_DOWN, 31, 0 },
	/* never below one */
	{ 1, 64, 5000, FULL, K2_ADAPT_DOWN, 1, 0 },
	/* the dead band holds */
	{ 8, 64, 1000, FULL, K2_ADAPT_HOLD, 8, 0 },
	{ 8, 64, 751, FULL, K2_ADAPT_HOLD, 8, 0 },
	/*
	 * at 3/4 or below: halfway toward 3/4 of the target, as if latency
	 * grew linearly with the bound (8 * 750 / 499 = 12: 10), one more at
	 * least (10 * 750 / 700 = 10), twice at most (2 * 750 / 250 = 6)
	 */
	{ 8, 64, 750, FULL, K2_ADAPT_UP, 9, 0 },
	{ 8, 64, 499, FULL, K2_ADAPT_UP_FAST, 10, 0 },
	{ 10, 64, 700, FULL, K2_ADAPT_UP, 11, 0 },
	{ 4, 64, 300, FULL, K2_ADAPT_UP_FAST, 7, 0 },
	{ 2, 64, 250, FULL, K2_ADAPT_UP_DOUBLE, 4, 0 },
	{ 4, 64, 0, FULL, K2_ADAPT_UP_DOUBLE, 8, 0 },
	/* from 1, twice when the room allows it (1 * 750 / 200 = 3: 2) */
	{ 1, 64, 200, FULL, K2_ADAPT_UP_DOUBLE, 2, 0 },
	{ 1, 64, 700, FULL, K2_ADAPT_UP, 2, 0 },
	/*
	 * an estimate of one window (after a fall, or at the start) is near
	 * the maximum of its samples, a lower percentile: one more only
	 */
	{ 8, 64, 250, K2_ADAPT_MIN_SAMPLES, K2_ADAPT_UP, 9, 0 },
	/*
	 * never above max_inflight, also when it was lowered; at it, a rise
	 * holds (the k2_adjust trace said up, from 32 to 32)
	 */
	{ 64, 64, 10, FULL, K2_ADAPT_HOLD, 64, 0 },
	{ 40, 64, 10, FULL, K2_ADAPT_UP_DOUBLE, 64, 0 },
	{ 64, 16, 10, FULL, K2_ADAPT_HOLD, 16, 0 },
	{ 63, 64, 740, FULL, K2_ADAPT_UP, 64, 0 },
	{ 64, 16, 800, FULL, K2_ADAPT_HOLD, 16, 0 },
	{ 64, 16, 2000, FULL, K2_ADAPT_DOWN, 8, 0 },
	/* a bound of 0 counts as 1: never 0 back */
	{ 0, 64, 10, FULL, K2_ADAPT_UP_DOUBLE, 2, 0 },
	{ 0, 64, 5000, FULL, K2_ADAPT_DOWN, 1, 0 },
	/*
	 * each fall in a row before doubles the cut: 32 * 1000 / 1250 = 25,
	 * a cut of 7, 14 after one fall; 17 * 1000 / 1001 = 16, a cut of
	 * one, two after one fall, four after two; sixteen times from
	 * K2_ADAPT_FALLS falls on; still at most to half, never below one
	 */
	{ 32, 64, 1250, FULL, K2_ADAPT_DOWN, 18, 1 },
	{ 17, 64, 1001, K2_ADAPT_EARLY_OVER, K2_ADAPT_DOWN, 15, 1 },
	{ 17, 64, 1001, K2_ADAPT_EARLY_OVER, K2_ADAPT_DOWN, 13, 2 },
	{ 64, 64, 1001, FULL, K2_ADAPT_DOWN, 48, K2_ADAPT_FALLS },
	{ 64, 64, 1001, FULL, K2_ADAPT_DOWN, 48, 100 },
	{ 11, 64, 1433, FULL, K2_ADAPT_DOWN, 5, 1 },
	{ 32, 64, 10000, FULL, K2_ADAPT_DOWN, 16, 1 },
	{ 3, 64, 1100, FULL, K2_ADAPT_DOWN, 1, 1 },
	{ 1, 64, 5000, FULL, K2_ADAPT_DOWN, 1, 3 },
	/* a rise or a hold is the same after falls */
	{ 8, 64, 499, FULL, K2_ADAPT_UP_FAST, 10, 2 },
	{ 8, 64, 900, FULL, K2_ADAPT_HOLD, 8, 1 },
};

TEST(adapt_steps)
{
	unsigned int i;

	for (i = 0; i < sizeof(decide_steps) / sizeof(decide_steps[0]); i++) {
		const struct decide_step *d = &decide_steps[i];
		u32 next;

		CHECK_EQ(k2_adapt_decide(d->bound, d->max, d->est_us,
					 d->samples, 1000, d->falls, &next),
			 d->why);
		CHECK_EQ(next, d->next);
	}
}

TEST(adapt_rate)
{
	/* 1 MiB (2048 sectors) in 1 s: 2048 / 976562 per 1024 ns, x 2^20 */
	CHECK_EQ(k2_adapt_rate(2048, 1000000000ULL), 2199);
	CHECK_EQ(k2_adapt_rate(2048, 500000000ULL), 4398);	/* twice */
	CHECK_EQ(k2_adapt_rate(0, 1000000000ULL), 0);
	CHECK_EQ(k2_adapt_rate(5, 0), 5ULL << 20);	/* no division by 0 */
	CHECK_EQ(k2_adapt_rate(1ULL << 43, 1ULL << 40), 1ULL << 33);
}

/*
 * k2_adapt_gain(): a climb is judged at the first window at twice its
 * base or more, against the base's rate (the mean of its windows); it is
 * kept when it bought an eighth more; if not, it holds for a second
 * window and is judged on the mean of the two: kept, or undone, and then
 * no raise goes above the base for K2_ADAPT_PROBE windows, after which it may
 * probe again; a probe that fails from the same base doubles the hold.
 * Each step is one window: the bound it ran at, its rate,
 * k2_adapt_decide()'s reason and next bound, and what k2_adapt_gain()
 * makes of them (-1: the state field is not checked).
 */
struct gain_step {
	u32 bound, rate, why, next;	/* in */
	u32 want_why, want_next;	/* out */
	int base, ceiling, hold;	/* state after */
};

static const struct gain_step gain_steps[] = {
	/* the first window is the base of a climb */
	{ 4, 1000, K2_ADAPT_UP_DOUBLE, 8, K2_ADAPT_UP_DOUBLE, 8, 4, -1, -1 },
	/* twice the base: +10 % on its first window is short, and it holds */
	{ 8, 1100, K2_ADAPT_UP, 9, K2_ADAPT_HOLD, 8, 4, -1, -1 },
	/*
	 * the mean of two windows, +12.5 %, is kept, and is the next climb's
	 * base
	 */
	{ 8, 1150, K2_ADAPT_UP, 9, K2_ADAPT_UP, 9, 8, -1, -1 },
	/* below twice the base nothing is judged, whatever the rate */
	{ 9, 500, K2_ADAPT_UP_FAST, 11, K2_ADAPT_UP_FAST, 11, 8, -1, -1 },
	{ 11, 1000, K2_ADAPT_UP_FAST, 13, K2_ADAPT_UP_FAST, 13, 8, -1, -1 },
	{ 13, 1100, K2_ADAPT_UP_FAST, 16, K2_ADAPT_UP_FAST, 16, 8, -1, -1 },
	/* 16: 1265 / 1125 < 9 / 8: held for a second window */
	{ 16, 1265, K2_ADAPT_UP, 17, K2_ADAPT_HOLD, 16, 8, 0, 0 },
	/* the two windows' mean, 1250, short too: back to the base, held */
	{ 16, 1235, K2_ADAPT_UP, 17, K2_ADAPT_NO_GAIN, 8, 8, 8, K2_ADAPT_PROBE },
	/* windows at the base: no raise, their rate averaged in */
	{ 8, 1325, K2_ADAPT_UP, 9, K2_ADAPT_HOLD, 8, 8, 8, 7 },
	{ 8, 1125, K2_ADAPT_UP, 9, K2_ADAPT_HOLD, 8, 8, 8, 6 },
	{ 8, 1125, K2_ADAPT_HOLD, 8, K2_ADAPT_HOLD, 8, 8, 8, 5 },
	/* a fall (no climb in doubt) is not changed; the next window is a base */
	{ 8, 10, K2_ADAPT_DOWN, 4, K2_ADAPT_DOWN, 4, 0, 8, 4 },
	/* below the ceiling, a raise goes up to it */
	{ 4, 600, K2_ADAPT_UP_DOUBLE, 8, K2_ADAPT_UP_DOUBLE, 8, 4, 8, 3 },
	/* 8 is twice 4: 680 / 600 is 13 % more, kept */
	{ 8, 680, K2_ADAPT_UP, 9, K2_ADAPT_HOLD, 8, 8, 8, 2 },
	{ 8, 680, K2_ADAPT_UP, 9, K2_ADAPT_HOLD, 8, 8, 8, 1 },
	/* the hold over, a raise (a probe) is let through */
	{ 8, 680, K2_ADAPT_UP, 9, K2_ADAPT_UP, 9, 8, 8, 0 },
	{ 9, 700, K2_ADAPT_UP_FAST, 16, K2_ADAPT_UP_FAST, 16, 8, 8, 0 },
	/* it fails from the same base: the hold is twice as long */
	{ 16, 700, K2_ADAPT_UP, 17, K2_ADAPT_HOLD, 16, 8, 8, 0 },
	{ 16, 700, K2_ADAPT_UP, 17, K2_ADAPT_NO_GAIN, 8, 8, 8,
	  2 * K2_ADAPT_PROBE },
};

/* Run @n steps from a fresh state. */
static void gain_run(const struct gain_step *steps, unsigned int n)
{
	struct k2_gain g = { 0 };
	unsigned int i;

	for (i = 0; i < n; i++) {
		const struct gain_step *st = &steps[i];
		u32 next = st->next;

		CHECK_EQ(k2_adapt_gain(&g, st->bound, st->rate, st->why, &next),
			 st->want_why);
		CHECK_EQ(next, st->want_next);
		if (st->base >= 0)
			CHECK_EQ(g.base, (u32)st->base);
		if (st->ceiling >= 0)
			CHECK_EQ(g.ceiling, (u32)st->ceiling);
		if (st->hold >= 0)
			CHECK_EQ(g.hold, (u32)st->hold);
	}
}

TEST(adapt_gain_steps)
{
	gain_run(gain_steps, sizeof(gain_steps) / sizeof(gain_steps[0]));
}

/*
 * A first window that falls short: the bound holds for the second (a
 * raise becomes a hold, no other decision changes); a fall then (a cut
 * by one, k2_adapt_lone()) undoes the climb as a failed judgement does.
 */
static const struct gain_step gain_fall_steps[] = {
	{ 4, 1000, K2_ADAPT_UP_DOUBLE, 8, K2_ADAPT_UP_DOUBLE, 8, 4, -1, -1 },
	{ 8, 1000, K2_ADAPT_UP, 9, K2_ADAPT_HOLD, 8, 4, -1, -1 },
	{ 8, 10, K2_ADAPT_DOWN, 7, K2_ADAPT_DOWN, 4, 0, 4, K2_ADAPT_PROBE },
};

static const struct gain_step gain_band_steps[] = {
	{ 4, 1000, K2_ADAPT_UP_DOUBLE, 8, K2_ADAPT_UP_DOUBLE, 8, 4, -1, -1 },
	/* in the band, a first window short: the band's hold, unchanged */
	{ 8, 1000, K2_ADAPT_HOLD, 8, K2_ADAPT_HOLD, 8, 4, -1, -1 },
	/* the second well above: the mean, 1150, is kept */
	{ 8, 1300, K2_ADAPT_UP, 9, K2_ADAPT_UP, 9, 8, -1, -1 },
	/* one window is enough to keep a climb: 16 at once (+13 %) */
	{ 16, 1300, K2_ADAPT_UP, 17, K2_ADAPT_UP, 17, 16, -1, -1 },
};

TEST(adapt_gain_judges_two_windows)
{
	gain_run(gain_fall_steps,
		 sizeof(gain_fall_steps) / sizeof(gain_fall_steps[0]));
	gain_run(gain_band_steps,
		 sizeof(gain_band_steps) / sizeof(gain_band_steps[0]));
}

/* The hold doubles up to K2_ADAPT_PROBE_MAX, and a kept climb resets it. */
TEST(adapt_gain_probe_backs_off)
{
	struct k2_gain g = { 0 };
	u32 next, want = K2_ADAPT_PROBE, i;

	next = 4;
	k2_adapt_gain(&g, 2, 1000, K2_ADAPT_UP_DOUBLE, &next);
	for (i = 0; i < 6; i++) {
		next = 5;
		CHECK_EQ(k2_adapt_gain(&g, 4, 1000, K2_ADAPT_UP, &next),
			 K2_ADAPT_HOLD);
		next = 5;
		CHECK_EQ(k2_adapt_gain(&g, 4, 1000, K2_ADAPT_UP, &next),
			 K2_ADAPT_NO_GAIN);
		CHECK_EQ(next, 2);
		CHECK_EQ(g.hold, want);
		want = 2 * want < K2_ADAPT_PROBE_MAX ? 2 * want
						       : K2_ADAPT_PROBE_MAX;
		g.hold = 0;
	}
	next = 4;
	CHECK_EQ(k2_adapt_gain(&g, 4, 2000, K2_ADAPT_UP, &next), K2_ADAPT_UP);
	CHECK_EQ(g.probe, 0);
	CHECK_EQ(g.base, 4);
	next = 8;
	CHECK_EQ(k2_adapt_gain(&g, 8, 2000, K2_ADAPT_UP, &next),
		 K2_ADAPT_UP);
	next = 8;
	CHECK_EQ(k2_adapt_gain(&g, 8, 2000, K2_ADAPT_UP, &next),
		 K2_ADAPT_NO_GAIN);
	CHECK_EQ(g.hold, K2_ADAPT_PROBE);
}

/*
 * k2_adapt_miss(), window by window: a fall remembers the bound it fell
 * from and holds raises below it for K2_ADAPT_PROBE windows, unless the
 * estimate scaled linearly to that bound is at 3/4 of the target or
 * below; a probe of the same bound that misses again doubles the hold; a
 * bound forgiven after meeting the target for as many windows as it was
 * held.  Target 1000 us.  (-1: the state field is not checked.)
 */
struct miss_step {
	u32 bound, est, why, next;	/* in */
	u32 want_why, want_next;	/* out */
	int miss, hold, probe;		/* state after */
};

static const struct miss_step miss_steps[] = {
	/* nothing remembered: nothing changed */
	{ 4, 500, K2_ADAPT_UP_FAST, 6, K2_ADAPT_UP_FAST, 6, 0, 0, 0 },
	/* a fall from 6 remembers 6 */
	{ 6, 1400, K2_ADAPT_DOWN, 4, K2_ADAPT_DOWN, 4, 6, K2_ADAPT_PROBE,
	  K2_ADAPT_PROBE },
	/* a raise to 6 or above stops at 5 */
	{ 4, 600, K2_ADAPT_UP_FAST, 6, K2_ADAPT_UP_FAST, 5, 6,
	  K2_ADAPT_PROBE - 1, K2_ADAPT_PROBE },
	/* from 5 it is held: 4 * 700 * 6 > 3 * 1000 * 5 ... */
	{ 5, 700, K2_ADAPT_UP, 6, K2_ADAPT_HOLD, 5, 6, K2_ADAPT_PROBE - 2, -1 },
	/* ... a raise below 6 is let through */
	{ 5, 700, K2_ADAPT_HOLD, 5, K2_ADAPT_HOLD, 5, 6, -1, -1 },
	/* an estimate that scales to 3/4 of the target at 6 lets it through */
	{ 5, 625, K2_ADAPT_UP, 6, K2_ADAPT_UP, 6, 6, -1, K2_ADAPT_PROBE },
	/* 6 misses again: the hold doubles */
	{ 6, 1100, K2_ADAPT_DOWN, 5, K2_ADAPT_DOWN, 5, 6,
	  2 * K2_ADAPT_PROBE, 2 * K2_ADAPT_PROBE },
	/* a lower bound that misses is remembered instead, held afresh */
	{ 5, 1100, K2_ADAPT_DOWN, 4, K2_ADAPT_DOWN, 4, 5, K2_ADAPT_PROBE,
	  K2_ADAPT_PROBE },
	/* no raise reaches it: not even from far below */
	{ 2, 200, K2_ADAPT_UP_DOUBLE, 4, K2_ADAPT_UP_DOUBLE, 4, 5, -1, -1 },
	{ 4, 740, K2_ADAPT_UP, 5, K2_ADAPT_HOLD, 4, 5, -1, -1 },
};

TEST(adapt_miss_steps)
{
	struct k2_miss m = { 0 };
	unsigned int i;

	for (i = 0; i < sizeof(miss_steps) / sizeof(miss_steps[0]); i++) {
		const struct miss_step *st = &miss_steps[i];
		u32 next = st->next;

		CHECK_EQ(k2_adapt_miss(&m, st->bound, st->est, 1000, st->why,
				       &next), st->want_why);
		CHECK_EQ(next, st->want_next);
		CHECK_EQ(m.bound, (u32)st->miss);
		if (st->hold >= 0)
			CHECK_EQ(m.hold, (u32)st->hold);
		if (st->probe >= 0)
			CHECK_EQ(m.probe, (u32)st->probe);
	}
}

/*
 * k2_adapt_lone(): a fall on fewer than K2_ADAPT_EARLY_OVER samples over
 * the target is a cut of one; on more, or any other decision, unchanged.
 */
TEST(adapt_lone)
{
	CHECK_EQ(k2_adapt_lone(16, 1, K2_ADAPT_DOWN, 8), 15);
	CHECK_EQ(k2_adapt_lone(16, K2_ADAPT_EARLY_OVER - 1, K2_ADAPT_DOWN, 8),
		 15);
	CHECK_EQ(k2_adapt_lone(16, K2_ADAPT_EARLY_OVER, K2_ADAPT_DOWN, 8), 8);
	/* an estimate over the target with no sample over it (bucket) */
	CHECK_EQ(k2_adapt_lone(16, 0, K2_ADAPT_DOWN, 15), 15);
	CHECK_EQ(k2_adapt_lone(1, 1, K2_ADAPT_DOWN, 1), 1);
	CHECK_EQ(k2_adapt_lone(16, 1, K2_ADAPT_HOLD, 16), 16);
	CHECK_EQ(k2_adapt_lone(16, 0, K2_ADAPT_UP_FAST, 20), 20);
}

/*
 * k2_adapt_slope(), window by window: the lowest bound with a settled
 * estimate is the reference; from twice its bound up, a rise goes where
 * the line through the two estimates reaches 3/4 of the target (twice
 * the bound at most, and twice it where the estimate has not grown), and
 * a hold becomes a rise of one while the line puts the next bound at 7/8
 * of the target or below; a fall forgets the reference.  Target 1000 us,
 * max_inflight 64; 200 samples are settled, 100 are not.
 */
struct slope_step {
	u32 bound, est, samples, why, next;	/* in */
	u32 want_why, want_next, ref;		/* out; ref: its bound after */
};

static const struct slope_step slope_steps[] = {
	/* no reference yet, and one window's estimate does not become it */
	{ 1, 400, 100, K2_ADAPT_UP_DOUBLE, 2, K2_ADAPT_UP_DOUBLE, 2, 0 },
	/* a settled one does; the rise is decide()'s */
	{ 2, 440, 200, K2_ADAPT_UP, 3, K2_ADAPT_UP, 3, 2 },
	/* below twice the reference: unchanged, the reference stays */
	{ 3, 480, 200, K2_ADAPT_UP, 4, K2_ADAPT_UP, 4, 2 },
	/* 60 us a bound from 2: 3/4 of the target at 4 + 190 / 60 = 7 */
	{ 4, 560, 200, K2_ADAPT_UP, 5, K2_ADAPT_UP_FAST, 7, 2 },
	/* ... where decide()'s rise is no lower: unchanged */
	{ 7, 680, 200, K2_ADAPT_UP, 8, K2_ADAPT_UP, 8, 2 },
	/* in the band, 60 us a bound: 860 us at 9, 7/8 of it or below */
	{ 8, 800, 200, K2_ADAPT_HOLD, 8, K2_ADAPT_UP, 9, 2 },
	/* ... 931 us at 10 is not */
	{ 9, 870, 200, K2_ADAPT_HOLD, 9, K2_ADAPT_HOLD, 9, 2 },
	/* ... nor on one window's estimate */
	{ 8, 800, 100, K2_ADAPT_HOLD, 8, K2_ADAPT_HOLD, 8, 2 },
	/* an estimate that has not grown: twice the bound */
	{ 4, 430, 200, K2_ADAPT_UP_FAST, 6, K2_ADAPT_UP_DOUBLE, 8, 2 },
	/* ... not above max_inflight */
	{ 40, 430, 200, K2_ADAPT_UP_FAST, 60, K2_ADAPT_UP_FAST, 64, 2 },
	/* a hold at max_inflight stays one */
	{ 64, 800, 200, K2_ADAPT_HOLD, 64, K2_ADAPT_HOLD, 64, 2 },
	/* a fall is unchanged and forgets the reference */
	{ 9, 1200, 200, K2_ADAPT_DOWN, 7, K2_ADAPT_DOWN, 7, 0 },
	{ 7, 600, 200, K2_ADAPT_UP, 8, K2_ADAPT_UP, 8, 7 },
	/* a settled estimate at a lower bound becomes the reference */
	{ 3, 380, 200, K2_ADAPT_UP_FAST, 5, K2_ADAPT_UP_FAST, 5, 3 },
};

TEST(adapt_slope_steps)
{
	struct k2_ref r = { 0 };
	unsigned int i;

	for (i = 0; i < sizeof(slope_steps) / sizeof(slope_steps[0]); i++) {
		const struct slope_step *st = &slope_steps[i];
		u32 next = st->next;

		CHECK_EQ(k2_adapt_slope(&r, st->bound, 64, st->est,
					st->samples, 1000, st->why, &next),
			 st->want_why);
		CHECK_EQ(next, st->want_next);
		CHECK_EQ(r.bound, st->ref);
	}
}

/*
 * The hold doubles up to K2_ADAPT_PROBE_MAX while the probes of the same
 * bound keep missing; a bound that then meets the target for as many
 * windows as it was held is forgotten, and not one window earlier.
 */
TEST(adapt_miss_probe_backs_off_and_is_forgiven)
{
	struct k2_miss m = { 0 };
	u32 next, want = K2_ADAPT_PROBE, i, w;

	for (i = 0; i < 6; i++) {
		next = 1;
		CHECK_EQ(k2_adapt_miss(&m, 2, 1500, 1000, K2_ADAPT_DOWN, &next),
			 K2_ADAPT_DOWN);
		CHECK_EQ(m.hold, want);
		CHECK_EQ(m.probe, want);
		/* the fall's window and want - 1 more under the hold */
		for (w = 1; w < want; w++) {
			next = 2;
			CHECK_EQ(k2_adapt_miss(&m, 1, 700, 1000, K2_ADAPT_UP,
					       &next), K2_ADAPT_HOLD);
			CHECK_EQ(next, 1);
		}
		next = 2;
		CHECK_EQ(k2_adapt_miss(&m, 1, 700, 1000, K2_ADAPT_UP, &next),
			 K2_ADAPT_UP);
		CHECK_EQ(next, 2);
		want = 2 * want < K2_ADAPT_PROBE_MAX ? 2 * want
						       : K2_ADAPT_PROBE_MAX;
	}
	CHECK_EQ(m.probe, K2_ADAPT_PROBE_MAX);
	for (w = 1; w < K2_ADAPT_PROBE_MAX; w++) {
		next = 2;
		k2_adapt_miss(&m, 2, 900, 1000, K2_ADAPT_HOLD, &next);
		CHECK_EQ(m.bound, 2);
		CHECK_EQ(m.met, w);
	}
	next = 3;
	CHECK_EQ(k2_adapt_miss(&m, 2, 700, 1000, K2_ADAPT_UP, &next),
		 K2_ADAPT_UP);
	CHECK_EQ(m.bound, 0);
	CHECK_EQ(m.probe, 0);
	CHECK_EQ(next, 3);
	/* forgotten: the next miss of 2 holds for K2_ADAPT_PROBE again */
	next = 1;
	k2_adapt_miss(&m, 2, 1500, 1000, K2_ADAPT_DOWN, &next);
	CHECK_EQ(m.hold, K2_ADAPT_PROBE);
}

TEST(adapt_in_force)
{
	CHECK_EQ(k2_adapt_in_force(4, 32, false), 4);
	CHECK_EQ(k2_adapt_in_force(4, 32, true), 32);
	CHECK_EQ(k2_adapt_in_force(40, 32, false), 32);
	CHECK_EQ(k2_adapt_in_force(0, 32, false), 1);
}

/*
 * A simulated device for the controller: NR_DIES dies of SVC_US per read;
 * a real-time read finds each of the other requests in flight on its die
 * with probability load / NR_DIES, and waits for those ahead of it, with
 * up to 25 % noise on every service.  Background work keeps the bound
 * full, and the device's rate is that of its busy dies, as if the bound's
 * requests fell on NR_DIES / load dies at random, with up to 5 % noise per
 * window (sim_rate()); a saturated device (@flat) gives the same rate
 * from bound 2 up, and a device of random reads (@fifth) a fifth more
 * per doubling of the bound, with up to 10 % noise (sim_rate_fifth()).
 */
#define NR_DIES		8
#define SVC_US		100
#define TARGET_US	600

static u64 sim_state = 88172645463325252ULL;

static u32 sim_rand(void)	/* xorshift64 */
{
	sim_state ^= sim_state << 13;
	sim_state ^= sim_state >> 7;
	sim_state ^= sim_state << 17;
	return sim_state >> 32;
}

static u64 sim_latency(u32 bound, unsigned int load_pct)
{
	u64 us = 0;
	u32 i, ahead = 1;

	for (i = 1; i < bound; i++)
		ahead += sim_rand() % (100 * NR_DIES) < load_pct;
	for (i = 0; i < ahead; i++)
		us += SVC_US + SVC_US * (sim_rand() % 1000) / 4000;
	return us;
}

/* A window's rate at @bound: busy dies per SVC_US, times 10^6. */
static u64 sim_rate(u32 bound, unsigned int load_pct, bool flat)
{
	double p = load_pct / (100.0 * NR_DIES), busy = 1;
	u32 i;

	if (flat && bound > 2)
		bound = 2;
	for (i = 0; i < bound; i++)
		busy *= 1 - p;
	busy = (1 - busy) / p;
	return busy * 1e6 * (0.95 + (sim_rand() % 1001) / 10000.0);
}

/*
 * A fifth more per doubling of the bound (random reads on ssdsim: 7.61
 * MiB/s at bound 16, 9.12 at 32), linear between powers of two, with up
 * to 10 % noise per window.
 */
static u64 sim_rate_fifth(u32 bound)
{
	double rate = 1e6;
	u32 p = 1;

	while (2 * p <= bound) {
		rate *= 1.2;
		p *= 2;
	}
	rate *= 1 + 0.2 * (bound - p) / p;
	return rate * (0.9 + (sim_rand() % 2001) / 10000.0);
}

struct sim_run {
	u32 bound;
	u32 acc[K2_LAT_BUCKETS];
	u64 samples;		/* real-time samples so far */
	struct k2_gain gain;
	struct k2_miss miss;
	struct k2_ref ref;
	u32 falls;		/* k2_adapt_falls() */
	bool flat;		/* sim_rate(): saturated from bound 2 */
	bool fifth;		/* sim_rate_fifth() */
	bool programs;		/* sim_latency_programs() */
	bool rare;		/* sim_latency_rare() */
	bool fixed;		/* sim_latency_fixed() */
	bool tail;		/* sim_latency_tail() */
	unsigned int stall;	/* every stall-th window: one sample at 4x */
	unsigned int windows;	/* windows so far */
};

/*
 * A read behind page programs (ssdsim under random writes): it waits for
 * one program at bound 1 and for two from bound 2 up, a fixed part that
 * the bound hardly changes (5 us more per request), with up to 10 %
 * noise.  Only bound 1 meets TARGET_US (at 80 to 88 % of it, in the band
 * where the bound holds), and every other bound misses it by a fifth or
 * more, so that a cut in proportion to the overshoot is too small.
 */
static u64 sim_latency_programs(u32 bound)
{
	u64 us = bound == 1 ? 480 : 700 + 5 * (u64)bound;

	return us + us * (sim_rand() % 1001) / 10000;
}

/*
 * A read behind page programs now and then (ssdsim's second half of the
 * changing-load run): at bound 1 it takes 60 to 72 % of TARGET_US, so that
 * the bound may rise; from bound 2 up the same, but one read in 300 takes
 * 1.4 times the target, so that the 99.9th percentile misses it, while a
 * window of K2_ADAPT_MIN_SAMPLES holds none of them with probability 0.72.
 */
static u64 sim_latency_rare(u32 bound)
{
	if (bound > 1 && sim_rand() % 300 == 0)
		return TARGET_US * 14 / 10;
	return TARGET_US * 6 / 10 + TARGET_US * (sim_rand() % 1201) / 10000;
}

/*
 * A fixed part that dominates (ssdsim's random reads at time_scale 50 in
 * a TCG guest: RT p99.9 10.5 ms at bound 1, 18 ms at 8, 27.4 ms at 16):
 * at most 40 % of TARGET_US at bound 1 and 4.3 % more per other request
 * in flight, at 85 to 100 % of that, so that the best bound is 14, while
 * the estimate at bounds 2 to 8 is 45 to 70 % of the target and its
 * linear projection (through the origin) puts 3/4 of the target only a
 * few bounds higher.
 */
static u64 sim_latency_fixed(u32 bound)
{
	u64 top = TARGET_US * (400 + 43 * ((u64)bound - 1)) / 1000;

	return top * (850 + sim_rand() % 151) / 1000;
}

/*
 * An exponential tail on a fixed part (ssdsim's random reads at
 * time_scale 50 beside three best-effort readers, in the k2 suite's
 * adaptive run: at bound 21, p90 18.9 ms, p99 29.7, p99.9 44.1, the tail
 * growing by about as much per decade of probability): a quarter of
 * TARGET_US plus an exponential delay of mean TARGET_US * bound / 110
 * (geometric, in steps of 1 us), so that the 99.9th percentile, the fixed
 * part and 6.9 means, meets the target up to bound 11, where the largest
 * of a window's 100-200 samples (about 5 means) is at 3/4 of it.  Unlike
 * the plants above, whose noise is bounded, such a window's largest
 * sample is about its 99.5th percentile, well below the 99.9th.
 */
static u64 sim_latency_tail(u32 bound)
{
	/* each microsecond ends the delay with probability 1 / mean */
	u32 p = 1000000U * 110 / (TARGET_US * bound);
	u64 us = TARGET_US / 4;

	while (sim_rand() % 1000000 >= p)
		us++;
	return us;
}

/* One sample of @r's plant at @bound (not a host stall). */
static u64 sim_sample(const struct sim_run *r, u32 bound,
		      unsigned int load_pct)
{
	return r->programs ? sim_latency_programs(bound) :
	       r->rare ? sim_latency_rare(bound) :
	       r->fixed ? sim_latency_fixed(bound) :
	       r->tail ? sim_latency_tail(bound) :
	       sim_latency(bound, load_pct);
}

/* The true 99.9th percentile of @r's plant at @bound: 20000 samples. */
static u64 sim_p999(const struct sim_run *r, u32 bound,
		    unsigned int load_pct)
{
	u32 hist[K2_LAT_BUCKETS] = { 0 };
	unsigned int i;

	for (i = 0; i < 20000; i++)
		hist[k2_lat_bucket(sim_sample(r, bound, load_pct))]++;
	return k2_lat_percentile(hist, 20000, 999);
}

/* The largest bound whose true 99.9th percentile meets the target. */
static u32 sim_best_bound(const struct sim_run *r, unsigned int load_pct,
			  u32 max)
{
	u32 b = 1;

	while (b < max && sim_p999(r, b + 1, load_pct) <= TARGET_US)
		b++;
	return b;
}

/*
 * One window as the glue runs it (samples counted, with those above the
 * target, until k2_adapt_window_done(); time taken as long enough);
 * returns the decision.
 */
static enum k2_adapt_reason sim_window(struct sim_run *r,
				       unsigned int load_pct, u32 max,
				       u32 *all)
{
	u32 win[K2_LAT_BUCKETS] = { 0 };
	enum k2_adapt_reason why;
	unsigned int i = 0, over = 0;
	u64 lat, est, total;
	u32 next;

	while (!k2_adapt_window_done(2000ULL * TARGET_US, i, over, TARGET_US)) {
		lat = sim_sample(r, r->bound, load_pct);
		if (r->stall && !i && ++r->windows % r->stall == 0)
			lat = 4 * TARGET_US;	/* the host stalled */
		win[k2_lat_bucket(lat)]++;
		over += lat > TARGET_US;
		if (all)
			all[k2_lat_bucket(lat)]++;
		i++;
	}
	r->samples += i;
	total = k2_lat_fold(r->acc, win);
	est = k2_lat_tail(r->acc, total);
	why = k2_adapt_decide(r->bound, max, est, total, TARGET_US,
			      over >= K2_ADAPT_EARLY_OVER ? r->falls : 0, &next);
	next = k2_adapt_lone(r->bound, over, why, next);
	why = k2_adapt_slope(&r->ref, r->bound, max, est, total, TARGET_US,
			     why, &next);
	why = k2_adapt_gain(&r->gain, r->bound,
			    r->fifth ? sim_rate_fifth(r->bound) :
			    sim_rate(r->bound, load_pct, r->flat), why, &next);
	why = k2_adapt_miss(&r->miss, r->bound, est, TARGET_US, why, &next);
	r->bound = next;
	r->falls = k2_adapt_falls(r->falls, why, over);
	if (why == K2_ADAPT_DOWN)
		memset(r->acc, 0, sizeof(r->acc));
	return why;
}

/*
 * @warmup windows, then 200 settled ones: each settled window's bound
 * counted in @at (indexed 1..64), its samples in @all and @total;
 * returns how many of them undid a climb.
 */
static unsigned int sim_settle(struct sim_run *r, unsigned int load_pct,
			       unsigned int warmup, u32 *at, u32 *all,
			       u64 *total)
{
	unsigned int w, no_gain = 0;

	for (w = 0; w < warmup; w++)
		sim_window(r, load_pct, 64, NULL);
	for (w = 0; w < 200; w++) {
		u64 before = r->samples;

		no_gain += sim_window(r, load_pct, 64, all) == K2_ADAPT_NO_GAIN;
		*total += r->samples - before;
		at[r->bound]++;
	}
	return no_gain;
}

/*
 * From bound 1 the controller reaches the bound that meets the target and
 * stays near it: over 200 settled windows the bound stays within a band
 * of the best fixed bound (half of it to two above), and the 99.9th
 * percentile of all their samples is within 20 % of the target.
 */
TEST(adapt_converges_and_stays_in_band)
{
	struct sim_run r = { .bound = 1 };
	u32 all[K2_LAT_BUCKETS] = { 0 };
	u32 best = sim_best_bound(&r, 100, 64), lo = 64, hi = 1, at[65] = { 0 };
	u64 total = 0, p;
	unsigned int w, b, settled = 0;

	CHECK(best > 2 && best < 32);	/* a plant worth controlling */
	for (w = 0; w < 40 && r.bound < best; w++)
		sim_window(&r, 100, 64, NULL);
	printf("adapt: from bound 1 to the best fixed bound in %u windows\n", w);
	CHECK(w <= 10);
	sim_settle(&r, 100, 0, at, all, &total);
	for (b = 1; b <= 64; b++) {
		if (!at[b])
			continue;
		lo = b < lo ? b : lo;
		hi = b;
		settled += at[b];
	}
	p = k2_lat_percentile(all, total, 999);
	printf("adapt: best fixed bound %u; settled bounds %u..%u; "
	       "p99.9 %llu us for a target of %u us\n", best, lo, hi,
	       (unsigned long long)p, TARGET_US);
	CHECK(lo * 2 >= best);
	CHECK(hi <= best + 2);
	CHECK(p * 10 <= TARGET_US * 12);
	CHECK(settled == 200);
}

/*
 * A step in background load (a quarter of the device, then all of it,
 * then a quarter again): the bound falls within a few windows of the rise
 * and climbs back after the fall.
 */
TEST(adapt_follows_a_step_in_load)
{
	struct sim_run r = { .bound = 1 };
	u32 light = sim_best_bound(&r, 25, 64), heavy = sim_best_bound(&r, 100, 64);
	unsigned int w;

	CHECK(light > heavy + 4);
	for (w = 0; w < 100; w++)
		sim_window(&r, 25, 64, NULL);
	CHECK(r.bound * 2 >= light && r.bound <= light + 2);
	for (w = 0; w < 8 && r.bound > heavy + 2; w++)
		sim_window(&r, 100, 64, NULL);
	printf("adapt: load step up: bound %u after %u windows (best %u)\n",
	       r.bound, w, heavy);
	CHECK(r.bound <= heavy + 2);
	for (w = 0; w < 100; w++)
		sim_window(&r, 100, 64, NULL);
	CHECK(r.bound * 2 >= heavy && r.bound <= heavy + 2);
	for (w = 0; w < 60 && r.bound * 2 < light; w++)
		sim_window(&r, 25, 64, NULL);
	printf("adapt: load step down: bound %u after %u windows (best %u)\n",
	       r.bound, w, light);
	CHECK(r.bound * 2 >= light);
}

/*
 * A step to a load under which nearly every real-time request misses the
 * target at the old bound (another request ahead on its die with
 * probability 1/2, where it was 1/32): windows end after
 * K2_ADAPT_EARLY_OVER samples, and the bound is down near the new best
 * after fewer samples than two full windows hold, where full windows
 * would have taken one each per fall.
 */
TEST(adapt_falls_after_few_samples_when_most_miss)
{
	struct sim_run r = { .bound = 1 };
	u32 heavy = sim_best_bound(&r, 400, 64);
	unsigned int w, falls = 0;
	u64 step;

	for (w = 0; w < 100; w++)
		sim_window(&r, 25, 64, NULL);
	CHECK(r.bound > 4 * heavy);
	step = r.samples;
	CHECK_EQ(sim_window(&r, 400, 64, NULL), K2_ADAPT_DOWN);
	printf("adapt: severe load step: first fall after %llu samples\n",
	       (unsigned long long)(r.samples - step));
	CHECK(r.samples - step <= 2 * K2_ADAPT_EARLY_OVER);
	for (w = 0; w < 16 && r.bound > heavy + 2; w++)
		falls += sim_window(&r, 400, 64, NULL) == K2_ADAPT_DOWN;
	printf("adapt: severe load step: bound %u (best %u) after %llu samples, "
	       "%u more falls\n", r.bound, heavy,
	       (unsigned long long)(r.samples - step), falls);
	CHECK(r.bound <= heavy + 2);
	CHECK(r.samples - step < 2 * K2_ADAPT_MIN_SAMPLES);
}

/*
 * A saturated device (random writes behind page programs): the rate is
 * the same from bound 2 up, while latency still grows with the bound.
 * The target allows a bound well above 2, yet over 200 settled windows
 * the controller spends nine in ten of them at 2 and at most one in eight
 * above; it still probes (twice the bound) at least once in
 * K2_ADAPT_PROBE_MAX + 4 windows, and the real-time 99.9th percentile is
 * below bound 3's, far below the target.
 */
TEST(adapt_stays_where_a_raise_buys_no_bandwidth)
{
	struct sim_run r = { .bound = 1, .flat = true };
	u32 all[K2_LAT_BUCKETS] = { 0 };
	u32 best = sim_best_bound(&r, 100, 64), at[65] = { 0 };
	u64 total = 0, p;
	unsigned int no_gain;

	CHECK(best >= 5);
	no_gain = sim_settle(&r, 100, 20, at, all, &total);
	p = k2_lat_percentile(all, total, 999);
	printf("adapt: saturated device: best fixed bound for latency %u; "
	       "windows at 1/2/3/4+: %u/%u/%u/%u; %u raises undone; "
	       "p99.9 %llu us (bound 2: %llu, 3: %llu) for a target of %u us\n",
	       best, at[1], at[2], at[3], 200 - at[1] - at[2] - at[3],
	       no_gain, (unsigned long long)p,
	       (unsigned long long)sim_p999(&r, 2, 100),
	       (unsigned long long)sim_p999(&r, 3, 100), TARGET_US);
	CHECK(at[2] >= 180);
	CHECK(at[1] + at[2] >= 200 - 200 / 8);
	CHECK(no_gain >= 200 / (K2_ADAPT_PROBE_MAX + 4));
	CHECK(p <= sim_p999(&r, 3, 100));
}

/*
 * A device that gains a fifth per doubling of the bound, with up to 10 %
 * noise per window: a step of one above 8 gains less than the noise, a
 * doubling more.  Over 200 settled windows the bound stays near the best
 * for the target (at least three quarters of it on average, above half
 * of it in nine windows in ten), and the real-time 99.9th percentile is
 * within 20 % of the target.
 */
TEST(adapt_climbs_where_a_doubling_buys_a_fifth)
{
	struct sim_run r = { .bound = 1, .fifth = true };
	u32 all[K2_LAT_BUCKETS] = { 0 };
	u32 best = sim_best_bound(&r, 25, 64), at[65] = { 0 };
	u64 total = 0, sum = 0, p;
	unsigned int b, low = 0, no_gain;

	CHECK(best >= 16);
	no_gain = sim_settle(&r, 25, 40, at, all, &total);
	for (b = 1; b <= 64; b++) {
		sum += b * at[b];
		low += 2 * b <= best ? at[b] : 0;
	}
	p = k2_lat_percentile(all, total, 999);
	printf("adapt: a fifth per doubling: best fixed bound %u; mean bound "
	       "%.1f, %u windows at half of it or below, %u climbs undone; "
	       "p99.9 %llu us for a target of %u us\n", best, sum / 200.0,
	       low, no_gain, (unsigned long long)p, TARGET_US);
	CHECK(4 * sum >= 3 * best * 200);
	CHECK(low <= 20);
	CHECK(p * 10 <= TARGET_US * 12);
}

/*
 * Under a fixed part that only bound 1 escapes (sim_latency_programs()),
 * from bound 17: nearly every sample misses, windows end early, and the
 * cut doubles with each fall in a row, so that the bound is at 1 after
 * four windows, where proportional cuts (0.7 to 0.8 each) took seven.
 */
TEST(adapt_cuts_deeper_when_falls_repeat)
{
	struct sim_run r = { .bound = 17, .flat = true, .programs = true };
	unsigned int w, falls = 0;

	for (w = 0; w < 16 && r.bound > 1; w++) {
		u64 before = r.samples;

		CHECK_EQ(sim_window(&r, 100, 64, NULL), K2_ADAPT_DOWN);
		CHECK(r.samples - before <= 2 * K2_ADAPT_EARLY_OVER);
		falls++;
	}
	printf("adapt: fixed part: bound 1 from 17 after %u falls, %llu samples\n",
	       falls, (unsigned long long)r.samples);
	CHECK_EQ(r.bound, 1);
	CHECK(falls <= 4);
	/* and there it stays: bound 1 meets the target */
	for (w = 0; w < 8; w++) {
		CHECK_EQ(sim_window(&r, 100, 64, NULL), K2_ADAPT_HOLD);
		CHECK_EQ(r.bound, 1);
	}
}

/*
 * Where only one read in 300 misses the target at bound 2 and up
 * (sim_latency_rare()), and bound 1 meets it at 60-72 % of it, most
 * windows at 2 see no slow read, and bound 1's estimates (at most 72 %)
 * invite a rise after every fall.  The memory of the miss keeps raises
 * below 2 for K2_ADAPT_PROBE windows, doubling, so that over 400 settled
 * windows fewer than one in three are at 2 or above (62 to 110 with
 * seven seeds, 35 to 90 when the gain check judged one window; 322
 * without the memory), and the 99.9th percentile of all their samples
 * meets the target (432 us with each seed; 864 without).
 */
TEST(adapt_seldom_probes_a_bound_whose_misses_are_rare)
{
	struct sim_run r = { .bound = 1, .flat = true, .rare = true };
	u32 all[K2_LAT_BUCKETS] = { 0 }, at[65] = { 0 };
	u64 total = 0, p;
	unsigned int above;

	sim_state = 88172645463325252ULL;	/* whatever ran before */
	sim_settle(&r, 100, 20, at, all, &total);
	sim_settle(&r, 100, 0, at, all, &total);
	above = 400 - at[1];
	p = k2_lat_percentile(all, total, 999);
	printf("adapt: rare misses at 2: %u of 400 windows at 2 or above; "
	       "p99.9 %llu us for a target of %u us\n", above,
	       (unsigned long long)p, TARGET_US);
	CHECK(above * 3 < 400);
	CHECK(p <= TARGET_US);
}

/*
 * Where a fixed part dominates (sim_latency_fixed()), from bound 1: the
 * climb to the best bound's three quarters takes few windows (a 24 s run
 * of the k2 suite on ssdsim holds about 20 of 1.3 s), and over 200
 * settled windows the bound is at least three quarters of the best on
 * average, the 99.9th percentile within the target.  (Before the slope
 * check (k2_adapt_slope()) the band held the bound at 10.)  Then with a
 * stall of the host every fifth window, one sample at 4 times the target
 * (a window holds about K2_ADAPT_MIN_SAMPLES), the mean bound stays above
 * half the best: each stall costs a fall of one (k2_adapt_lone()), where
 * the proportional cut halved the bound (a mean of 5.3).  (Not more: the
 * fall forgets the slope's reference, and the band holds the bound where
 * the fall left it, a stall every 20 windows took the mean to 10.0.)
 */
TEST(adapt_climbs_fast_where_a_fixed_part_dominates)
{
	struct sim_run r = { .bound = 1, .fixed = true };
	u32 all[K2_LAT_BUCKETS] = { 0 }, at[65] = { 0 }, best;
	u64 total = 0, sum = 0, p;
	unsigned int w, b;

	sim_state = 88172645463325252ULL;
	best = sim_best_bound(&r, 100, 64);
	for (w = 0; w < 40 && 4 * r.bound < 3 * best; w++)
		sim_window(&r, 100, 64, NULL);
	sim_settle(&r, 100, 0, at, all, &total);
	for (b = 1; b <= 64; b++)
		sum += b * at[b];
	p = k2_lat_percentile(all, total, 999);
	printf("adapt: fixed part: best fixed bound %u, three quarters of it "
	       "after %u windows; mean bound %.1f; p99.9 %llu us for a target "
	       "of %u us\n", best, w, sum / 200.0, (unsigned long long)p,
	       TARGET_US);
	CHECK(w <= 10);
	CHECK(4 * sum >= 3 * best * 200);
	CHECK(p <= TARGET_US);

	/* a host stall every fifth window: one sample at 4x the target */
	memset(at, 0, sizeof(at));
	r.stall = 5;
	sim_settle(&r, 100, 0, at, all, &total);
	for (b = 1, sum = 0; b <= 64; b++)
		sum += b * at[b];
	printf("adapt: fixed part, a stall every 5 windows: mean bound %.1f\n",
	       sum / 200.0);
	CHECK(2 * sum >= best * 200);
}

/*
 * Under an exponential tail (sim_latency_tail()), the estimate of a
 * window of 150 samples is nearer the true 99.9th percentile than their
 * largest, on average over 400 windows, and not above it by more than
 * its histogram bucket's width (an eighth: the true value is a bucket's
 * middle too).
 */
TEST(latency_tail_nears_the_99_9th_percentile_of_an_exponential_tail)
{
	struct sim_run r = { .tail = true };
	u64 truth, sum_top = 0, sum_est = 0;
	unsigned int w, i;

	sim_state = 88172645463325252ULL;
	truth = sim_p999(&r, 11, 100);
	for (w = 0; w < 400; w++) {
		u32 hist[K2_LAT_BUCKETS] = { 0 };

		for (i = 0; i < 150; i++)
			hist[k2_lat_bucket(sim_sample(&r, 11, 100))]++;
		sum_top += k2_lat_percentile(hist, 150, 999);
		sum_est += k2_lat_tail(hist, 150);
	}
	printf("tail: 99.9th percentile %llu us; over 400 windows of 150 "
	       "samples, largest %llu us, estimate %llu us on average\n",
	       (unsigned long long)truth, (unsigned long long)sum_top / 400,
	       (unsigned long long)sum_est / 400);
	truth *= 400;
	CHECK(truth > sum_top);
	CHECK(truth - sum_top > (sum_est > truth ? sum_est - truth :
					   truth - sum_est));
	truth /= 400;
	CHECK(sum_est / 400 * 8 <= truth * 9);
}

/*
 * An exponential tail (sim_latency_tail()): over 200 settled windows the
 * 99.9th percentile of all their samples meets the target, and the bound
 * is at least half the best fixed bound on average (measured: 544 us, a
 * histogram bucket of 512-575, and a mean bound of 10.0 against a best
 * of 11; on the largest sample alone, k2_lat_tail() before, 608 us and
 * 12.1).  And the k2 suite's runs on ssdsim (24 s, about 16 windows
 * after a ramp of 4): of 200 such runs from bound 1, at most 6 end with
 * a 99.9th percentile above 1.2 of the target (2 measured; 20 on the
 * largest sample alone, where test_bench.py's adaptive test failed once
 * in a make check here at 1.23).
 */
TEST(adapt_meets_the_target_under_an_exponential_tail)
{
	struct sim_run r = { .bound = 1, .tail = true, .fifth = true };
	u32 all[K2_LAT_BUCKETS] = { 0 }, at[65] = { 0 }, best;
	u64 total = 0, sum = 0, p;
	unsigned int b, w, run, over = 0;

	sim_state = 88172645463325252ULL;
	best = sim_best_bound(&r, 100, 64);
	sim_settle(&r, 100, 20, at, all, &total);
	for (b = 1; b <= 64; b++)
		sum += b * at[b];
	p = k2_lat_percentile(all, total, 999);
	printf("adapt: exponential tail: best fixed bound %u (p99.9 %llu us; "
	       "next %llu); mean bound %.1f; p99.9 %llu us for a target of %u us\n",
	       best, (unsigned long long)sim_p999(&r, best, 100),
	       (unsigned long long)sim_p999(&r, best + 1, 100), sum / 200.0,
	       (unsigned long long)p, TARGET_US);
	CHECK(p <= TARGET_US);
	CHECK(2 * sum >= best * 200);

	for (run = 0; run < 200; run++) {
		struct sim_run one = { .bound = 1, .tail = true, .fifth = true };
		u64 before;

		memset(all, 0, sizeof(all));
		sim_state = 88172645463325252ULL + run * 7919;
		for (w = 0; w < 4; w++)
			sim_window(&one, 100, 64, NULL);
		before = one.samples;
		for (w = 0; w < 16; w++)
			sim_window(&one, 100, 64, all);
		p = k2_lat_percentile(all, one.samples - before, 999);
		over += p * 10 > TARGET_US * 12;
	}
	printf("adapt: exponential tail: %u of 200 runs of 16 windows above "
	       "1.2 of the target\n", over);
	CHECK(over <= 6);
}

UNIT_MAIN(
	UNIT(rt_levels_map_to_their_own_queue),
	UNIT(rt_levels_0_and_7_differ_public_k2_bug),
	UNIT(non_rt_classes_map_to_the_non_rt_queue),
	UNIT(ioprio_hints_do_not_change_the_queue),
	UNIT(every_queue_index_is_in_range),
	UNIT(strict_priority_order),
	UNIT(bound_blocks_at_bound_and_allows_below),
	UNIT(lowering_the_bound_below_inflight),
	UNIT(bound_is_clamped_to_the_queue_depth),
	UNIT(starvation_off_is_strict_priority),
	UNIT(starvation_promotes_only_after_threshold),
	UNIT(starvation_wait_is_the_lesser_of_age_and_time_since_served),
	UNIT(starvation_promotes_once_per_period),
	UNIT(starvation_does_not_override_the_bound),
	UNIT(best_effort_depth_leaves_rt_tags),
	UNIT(counter_never_underflows),
	UNIT(counter_increment_stops_at_bound),
	UNIT(stall_recovers_only_lost_slots),
	UNIT(stall_detected_only_without_progress),
	UNIT(request_state_queue_index),
	UNIT(accounting_model_stays_exact),
	UNIT(latency_buckets_are_ordered_and_within_an_eighth),
	UNIT(latency_percentile_counts_from_the_top),
	UNIT(log2_q8_is_within_a_tenth),
	UNIT(latency_tail_extends_the_largest_of_few_samples),
	UNIT(latency_fold_halves_the_past),
	UNIT(adapt_window_needs_samples_and_twice_the_target),
	UNIT(adapt_window_ends_early_on_samples_over_the_target),
	UNIT(adapt_steps),
	UNIT(adapt_rate),
	UNIT(adapt_gain_steps),
	UNIT(adapt_gain_judges_two_windows),
	UNIT(adapt_gain_probe_backs_off),
	UNIT(adapt_miss_steps),
	UNIT(adapt_lone),
	UNIT(adapt_slope_steps),
	UNIT(adapt_miss_probe_backs_off_and_is_forgiven),
	UNIT(adapt_in_force),
	UNIT(adapt_converges_and_stays_in_band),
	UNIT(adapt_follows_a_step_in_load),
	UNIT(adapt_falls_after_few_samples_when_most_miss),
	UNIT(adapt_stays_where_a_raise_buys_no_bandwidth),
	UNIT(adapt_climbs_where_a_doubling_buys_a_fifth),
	UNIT(adapt_cuts_deeper_when_falls_repeat),
	UNIT(adapt_seldom_probes_a_bound_whose_misses_are_rare),
	UNIT(adapt_climbs_fast_where_a_fixed_part_dominates),
	UNIT(latency_tail_nears_the_99_9th_percentile_of_an_exponential_tail),
	UNIT(adapt_meets_the_target_under_an_exponential_tail)
)
