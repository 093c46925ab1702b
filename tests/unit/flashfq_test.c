// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of FlashFQ's decision logic (flashfq/flashfq-core.h), built in
 * userspace with ASan and UBSan:
 *   cc -std=gnu11 -Wall -Wextra -Werror -g -fsanitize=address,undefined \
 *	-I tests/unit -I flashfq tests/unit/flashfq_test.c \
 *	-o /tmp/flashfq_test
 *
 * Besides the pure helpers, a small model of the elevator glue drives the
 * core the way flashfq-iosched.c does: per task a FIFO of queued requests
 * and a list of requests in the device in dispatch order, the facts set
 * from those before every ffq_update(), a device that completes each
 * request its service time after dispatch (up to depth at once, so out of
 * order when service times differ) and a virtual clock in ns.  Like the
 * glue, the model can post completions and exits instead of applying them
 * (sim.posted), for the next section under the lock to apply in order,
 * each with its own time, and then end what is due (sim_drain()).
 */
#include "unit.h"
#include "flashfq-core.h"

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

/* Knuth's MMIX LCG with a fixed seed: the same run every time. */
static u64 rng_state;

static void rng_seed(u64 seed)
{
	rng_state = seed;
}

static u32 rng(void)
{
	rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
	return (u32)(rng_state >> 33);
}

static u64 rng64(void)
{
	u64 hi = rng();

	return hi << 32 | rng();
}

/* ---- pairing heap ---- */

#define HN	200

/*
 * Heap order and back links under @n; returns the number of nodes, or
 * stops early past HN of them (a cycle).
 */
static unsigned int heap_walk(const struct ffq_hnode *n, unsigned int *bad)
{
	const struct ffq_hnode *c, *back = n;
	unsigned int count = 1;

	for (c = n->child; c && count <= HN; back = c, c = c->next) {
		if (c->prev != back || c->key < n->key)
			(*bad)++;
		count += heap_walk(c, bad);
	}
	return count;
}

/* @h holds exactly the nodes marked in @in, with the keys in @keys. */
static bool heap_ok(const struct ffq_heap *h, const struct ffq_hnode *nodes,
		    const bool *in, const u64 *keys)
{
	int before = unit_failed_checks;
	unsigned int i, count = 0, bad = 0;
	u64 min = U64_MAX;

	for (i = 0; i < HN; i++) {
		CHECK_EQ(ffq_hnode_linked(h, &nodes[i]), in[i]);
		if (!in[i])
			continue;
		CHECK(nodes[i].key == keys[i]);
		count++;
		if (keys[i] < min)
			min = keys[i];
	}
	CHECK_EQ(h->nr, count);
	if (!count) {
		CHECK(!h->root);
		return unit_failed_checks == before;
	}
	CHECK(h->root && h->root->key == min);
	if (h->root) {
		CHECK(!h->root->prev && !h->root->next);
		CHECK_EQ(heap_walk(h->root, &bad), count);
	}
	CHECK_EQ(bad, 0);
	return unit_failed_checks == before;
}

static u64 heap_rand_key(void)
{
	switch (rng() % 8) {
	case 0:
		return rng64();		/* anything, U64_MAX possible */
	case 1:
		return rng() % 2 ? 0 : U64_MAX;
	default:
		return rng() % 64;	/* many equal keys */
	}
}

TEST(heap_root_and_inner_removal)
{
	struct ffq_hnode n[5] = { { 0 } };
	struct ffq_heap h = { 0 };
	static const u64 key[] = { 5, 3, 8, 1, 7 };
	unsigned int i, in2, in3;

	for (i = 0; i < 5; i++) {
		CHECK(!ffq_hnode_linked(&h, &n[i]));
		ffq_heap_insert(&h, &n[i], key[i]);
		CHECK(ffq_hnode_linked(&h, &n[i]));
	}
	CHECK_EQ(h.nr, 5);
	CHECK(ffq_heap_min(&h) == &n[3]);
	/* a node that is not the root */
	ffq_heap_remove(&h, &n[2]);
	CHECK(!ffq_hnode_linked(&h, &n[2]));
	CHECK_EQ(h.nr, 4);
	CHECK(ffq_heap_min(&h) == &n[3]);
	/* the root */
	ffq_heap_remove(&h, &n[3]);
	CHECK(!ffq_hnode_linked(&h, &n[3]));
	CHECK(ffq_heap_min(&h) == &n[1]);
	/* a key raised above the others, one lowered below them */
	ffq_heap_rekey(&h, &n[1], 100);
	CHECK(ffq_heap_min(&h) == &n[4] || ffq_heap_min(&h) == &n[0]);
	CHECK_EQ(ffq_heap_min(&h)->key, 5);
	ffq_heap_rekey(&h, &n[4], 2);
	CHECK(ffq_heap_min(&h) == &n[4]);
	/* placing a node not in the heap inserts it, taking it out of it
	 * does nothing; the membership bit follows */
	in2 = 0;
	ffq_heap_place(&h, &n[2], &in2, 0x4, true, 0);
	CHECK(ffq_heap_min(&h) == &n[2] && in2 == 0x4);
	in3 = 0x1;
	ffq_heap_place(&h, &n[3], &in3, 0x4, false, 0);
	CHECK_EQ(h.nr, 4);
	CHECK_EQ(in3, 0x1);
	ffq_heap_place(&h, &n[2], &in2, 0x4, false, 0);
	ffq_heap_place(&h, &n[2], &in2, 0x4, false, 0);
	CHECK_EQ(h.nr, 3);
	CHECK_EQ(in2, 0);
	CHECK(ffq_heap_min(&h) == &n[4]);
	/* a lone root */
	ffq_heap_remove(&h, &n[4]);
	ffq_heap_remove(&h, &n[0]);
	CHECK(ffq_heap_min(&h) == &n[1]);
	CHECK(ffq_hnode_linked(&h, &n[1]));
	ffq_heap_remove(&h, &n[1]);
	CHECK(!ffq_hnode_linked(&h, &n[1]));
	CHECK(!h.root);
	CHECK_EQ(h.nr, 0);
}

TEST(heap_rekey_changes_a_leaf_or_lone_root_in_place)
{
	struct ffq_hnode n[3] = { 0 };
	struct ffq_heap h = { 0 };

	ffq_heap_insert(&h, &n[0], 10);
	ffq_heap_rekey(&h, &n[0], 3);		/* the only node: any key */
	CHECK(h.root == &n[0] && n[0].key == 3 && h.nr == 1);
	ffq_heap_insert(&h, &n[1], 20);		/* a child of n[0] */
	ffq_heap_insert(&h, &n[2], 30);
	CHECK(h.root == &n[0] && n[2].prev == &n[0] && n[1].prev == &n[2]);
	ffq_heap_rekey(&h, &n[2], 35);		/* a leaf grows: in place */
	CHECK(h.root == &n[0] && n[2].prev == &n[0] && n[2].key == 35);
	ffq_heap_rekey(&h, &n[1], 1);		/* a leaf shrinks below the root */
	CHECK(h.root == &n[1] && h.nr == 3);
	ffq_heap_rekey(&h, &n[1], 50);		/* a root with children grows */
	CHECK(h.root == &n[0] && n[0].key == 3 && h.nr == 3);
}

/*
 * Random insert, remove (root or not), set and pop over HN nodes, checked
 * against a brute-force minimum, count and the full tree after every one.
 */
TEST(heap_random_against_brute_force)
{
	static struct ffq_hnode nodes[HN];
	static bool in[HN];
	static u64 keys[HN];
	struct ffq_heap h = { 0 };
	unsigned int op, i, nr = 0, pops = 0, inner = 0, grown = 0, bit;
	u64 last;

	memset(nodes, 0, sizeof(nodes));
	memset(in, 0, sizeof(in));
	rng_seed(1);
	for (op = 0; op < 20000; op++) {
		struct ffq_hnode *root = h.root;
		u64 key = heap_rand_key();

		i = rng() % HN;
		switch (rng() % 11) {
		case 0: case 1: case 2:		/* insert */
			if (in[i])
				break;
			ffq_heap_insert(&h, &nodes[i], key);
			in[i] = true;
			keys[i] = key;
			nr++;
			break;
		case 3: case 4:			/* remove any */
			if (!in[i])
				break;
			inner += root != &nodes[i];
			ffq_heap_remove(&h, &nodes[i]);
			in[i] = false;
			nr--;
			break;
		case 5: case 6:			/* place, in or not */
			nr += !in[i];
			bit = in[i];
			ffq_heap_place(&h, &nodes[i], &bit, 1, true, key);
			CHECK_EQ(bit, 1);
			in[i] = true;
			keys[i] = key;
			break;
		case 7:				/* the same key again */
			if (!in[i])
				break;
			ffq_heap_rekey(&h, &nodes[i], keys[i]);
			CHECK(h.root == root);
			break;
		case 8:				/* pop the minimum */
			if (!root)
				break;
			i = root - nodes;
			ffq_heap_remove(&h, root);
			in[i] = false;
			nr--;
			pops++;
			break;
		case 9:			/* take out, in or not */
			nr -= in[i];
			bit = in[i];
			ffq_heap_place(&h, &nodes[i], &bit, 1, false, key);
			CHECK_EQ(bit, 0);
			in[i] = false;
			break;
		case 10:			/* grow a key (tags do) */
			if (!in[i] || keys[i] == U64_MAX)
				break;
			key = keys[i] + 1 + rng() % 16;
			if (key < keys[i])
				key = U64_MAX;
			grown += !nodes[i].child;
			ffq_heap_rekey(&h, &nodes[i], key);
			keys[i] = key;
			break;
		}
		CHECK_EQ(h.nr, nr);
		if (!heap_ok(&h, nodes, in, keys))
			break;
	}
	CHECK(pops > 1000);
	CHECK(inner > 1000);
	CHECK(grown > 300);	/* leaves grown in place */
	/* Draining gives the keys in order. */
	for (last = 0; h.root; nr--) {
		struct ffq_hnode *root = h.root;

		CHECK(root->key >= last);
		last = root->key;
		ffq_heap_remove(&h, root);
		in[root - nodes] = false;
		CHECK_EQ(h.nr, nr - 1);
	}
	CHECK_EQ(nr, 0);
	CHECK(heap_ok(&h, nodes, in, keys));
}

/* ---- cost, charge, weight ---- */

/* Calibrated points of a device with cheap large requests (QD1 latencies). */
static const struct ffq_cost_model qd1_model = {
	.read_4k = 60000,
	.read_128k = 370000,
	.write_4k = 510000,
	.write_128k = 820000,
};

TEST(cost_is_the_line_through_the_calibrated_points)
{
	const struct ffq_cost_model *m = &qd1_model;
	u64 prev_r = 0, prev_w = 0;
	u32 bytes;

	CHECK_EQ(ffq_cost(m, false, 4096), 60000);
	CHECK_EQ(ffq_cost(m, false, 131072), 370000);
	CHECK_EQ(ffq_cost(m, true, 4096), 510000);
	CHECK_EQ(ffq_cost(m, true, 131072), 820000);
	/* 66 KiB is half way between 4 and 128 KiB */
	CHECK_EQ(ffq_cost(m, false, 66 * 1024), 215000);
	CHECK_EQ(ffq_cost(m, true, 66 * 1024), 665000);
	/* below 4 KiB and above 128 KiB the line goes on */
	CHECK_EQ(ffq_cost(m, false, 0), 50000);
	CHECK_EQ(ffq_cost(m, false, 512), 51250);
	CHECK_EQ(ffq_cost(m, true, 0), 500000);
	CHECK_EQ(ffq_cost(m, false, 4096 + 2 * 126976), 680000);
	CHECK_EQ(ffq_cost(m, false, 1 << 20), 2610000);
	CHECK_EQ(ffq_cost(m, true, 1 << 20), 3060000);
	/*
	 * Both lines rise 310000 ns per 126976 bytes, 1250 ns per 512: exact
	 * on multiples of 512, within 1 ns of the line elsewhere, and never
	 * decreasing.
	 */
	for (bytes = 0; bytes <= 4U << 20; bytes += 512) {
		CHECK_EQ(ffq_cost(m, false, bytes), 50000 + bytes / 512 * 1250);
		CHECK_EQ(ffq_cost(m, true, bytes), 500000 + bytes / 512 * 1250);
	}
	for (bytes = 0; bytes <= 4U << 20; bytes += 4093) {
		u64 r = ffq_cost(m, false, bytes), w = ffq_cost(m, true, bytes);
		double exact = 60000.0 + ((double)bytes - 4096) * 310000 /
			       126976;

		CHECK(r >= prev_r && w >= prev_w);
		CHECK(r < exact + 1 && r + 1 > exact);
		CHECK_EQ(w - r, 450000);
		prev_r = r;
		prev_w = w;
	}
}

/*
 * The defaults (ssdsim's): a 128 KiB request takes what 4 pages on each of
 * its 8 dies take, 4 times a 4 KiB read and 32 times a buffered 4 KiB
 * write; a buffered 4 KiB write costs about what a read does.
 */
TEST(default_costs_are_ssdsims)
{
	const struct ffq_cost_model m = {
		.read_4k = FFQ_DEFAULT_COST_READ_4K,
		.read_128k = FFQ_DEFAULT_COST_READ_128K,
		.write_4k = FFQ_DEFAULT_COST_WRITE_4K,
		.write_128k = FFQ_DEFAULT_COST_WRITE_128K,
	};

	CHECK_EQ(ffq_cost(&m, false, 131072), 4 * ffq_cost(&m, false, 4096));
	CHECK_EQ(ffq_cost(&m, true, 131072), 32 * ffq_cost(&m, true, 4096));
	/* 64 KiB: half way in pages on the write line */
	CHECK_EQ(ffq_cost(&m, true, 65536), 16 * ffq_cost(&m, true, 4096));
	CHECK(ffq_cost(&m, true, 4096) > ffq_cost(&m, false, 4096));
	CHECK(ffq_cost(&m, true, 4096) < ffq_cost(&m, false, 4096) * 11 / 10);
}

TEST(cost_is_never_below_one)
{
	struct ffq_cost_model down = {
		.read_4k = 1000, .read_128k = 10,
		.write_4k = 5, .write_128k = 1000,
	};
	struct ffq_cost_model zero = { 0 };
	struct ffq_cost_model big = {
		.read_4k = FFQ_MAX_COST_NS, .read_128k = 1,
		.write_4k = 1, .write_128k = FFQ_MAX_COST_NS,
	};

	/* 128 KiB cheaper than 4 KiB: falls with size, stops at 1 */
	CHECK_EQ(ffq_cost(&down, false, 4096), 1000);
	CHECK_EQ(ffq_cost(&down, false, 131072), 10);
	CHECK_EQ(ffq_cost(&down, false, 4096 + 2 * 126976), 1);
	CHECK_EQ(ffq_cost(&down, false, U32_MAX), 1);
	/* a tiny request under a steep line */
	CHECK_EQ(ffq_cost(&down, true, 0), 1);
	CHECK_EQ(ffq_cost(&down, true, 1), 1);
	CHECK_EQ(ffq_cost(&zero, false, 4096), 1);
	CHECK_EQ(ffq_cost(&zero, true, 0), 1);
	CHECK_EQ(ffq_cost(&zero, true, U32_MAX), 1);
	/* the largest costs and sizes do not overflow (UBSan) */
	CHECK_EQ(ffq_cost(&big, false, U32_MAX), 1);
	CHECK_EQ(ffq_cost(&big, false, 0), 1032258064ULL);
	CHECK(ffq_cost(&big, true, U32_MAX) > 33000000000000ULL);
	CHECK_EQ(ffq_cost(&big, true, 0), 1);
}

TEST(charge_scales_by_weight)
{
	unsigned int w;

	for (w = 1; w <= FFQ_WEIGHT_MAX; w++)
		CHECK_EQ(ffq_charge(840000, w), 840000 * FFQ_WEIGHT_NORM / w);
	CHECK_EQ(ffq_charge(1000, FFQ_WEIGHT_NORM), 1000);
	CHECK_EQ(ffq_charge(1000, 8), 500);
	CHECK_EQ(ffq_charge(1000, 1), 4000);
	CHECK_EQ(ffq_charge(1000, 3), 1333);
	/* weight 0 counts as 1 */
	CHECK_EQ(ffq_charge(1000, 0), 4000);
	/* never 0 */
	CHECK_EQ(ffq_charge(0, 4), 1);
	CHECK_EQ(ffq_charge(1, 8), 1);
	CHECK_EQ(ffq_charge(3, 8), 1);
	/* clamped to U32_MAX */
	CHECK_EQ(ffq_charge(U32_MAX, 4), U32_MAX);
	CHECK_EQ(ffq_charge(U32_MAX, 1), U32_MAX);
	CHECK_EQ(ffq_charge(U32_MAX / 4 + 1, 4), U32_MAX / 4 + 1);
	CHECK_EQ(ffq_charge(U32_MAX / 4 + 1, 1), U32_MAX);
	CHECK_EQ(ffq_charge(1ULL << 40, 8), U32_MAX);
	CHECK_EQ(ffq_charge(ffq_cost(&qd1_model, true, U32_MAX), 1),
		 U32_MAX);
}

/* ---- learnt costs ---- */

static const struct ffq_cost_model no_set;

/* The learner's clock: the last completion taught. */
static u64 learn_clock;

/*
 * Teach @l a request of @device_ns dispatched a second after the last one
 * completed: longer than any group's window, so each write that waited is
 * a group of its own and no write that found room joins one.
 */
static void teach(struct ffq_learn *l, bool write, u32 bytes, u64 device_ns,
		  u64 dir_bytes)
{
	u64 at = learn_clock + 1000000000ULL;

	learn_clock = at + device_ns;
	ffq_learn_sample(l, write, bytes, at, learn_clock, dir_bytes);
}

static u32 in_force(const struct ffq_learn *l, const struct ffq_cost_model *set,
		    unsigned int pt, enum ffq_cost_src want)
{
	enum ffq_cost_src src;
	u32 v = ffq_learn_cost(l, set, pt, &src);

	CHECK_EQ(src, want);
	return v;
}

TEST(learn_starts_at_the_defaults)
{
	struct ffq_learn l = { 0 };
	unsigned int pt;

	for (pt = 0; pt < FFQ_NR_POINTS; pt++)
		CHECK_EQ(in_force(&l, &no_set, pt, FFQ_SRC_DEFAULT),
			 ffq_point_val(&ffq_default_costs, pt));
	/* fewer than FFQ_LEARN_MIN samples: still the default */
	for (pt = 0; pt < FFQ_LEARN_MIN - 1; pt++)
		teach(&l, false, 4096, 900000, 4096);
	CHECK_EQ(in_force(&l, &no_set, FFQ_PT_READ_4K, FFQ_SRC_DEFAULT),
		 FFQ_DEFAULT_COST_READ_4K);
	teach(&l, false, 4096, 900000, 4096);
	CHECK_EQ(in_force(&l, &no_set, FFQ_PT_READ_4K, FFQ_SRC_LEARNT), 900000);
	/* the other points follow at their default ratios: 15x here */
	CHECK_EQ(in_force(&l, &no_set, FFQ_PT_READ_128K, FFQ_SRC_SCALED),
		 15 * FFQ_DEFAULT_COST_READ_128K);
	CHECK_EQ(in_force(&l, &no_set, FFQ_PT_WRITE_4K, FFQ_SRC_SCALED),
		 15 * FFQ_DEFAULT_COST_WRITE_4K);
	CHECK_EQ(in_force(&l, &no_set, FFQ_PT_WRITE_128K, FFQ_SRC_SCALED),
		 15 * FFQ_DEFAULT_COST_WRITE_128K);
}

TEST(learn_points_by_size)
{
	CHECK_EQ(ffq_learn_point(false, 512), FFQ_PT_READ_4K);
	CHECK_EQ(ffq_learn_point(false, 16384), FFQ_PT_READ_4K);
	/* the geometric mean of 4 and 128 KiB is 22.6 KiB */
	CHECK_EQ(ffq_learn_point(false, 23168), FFQ_PT_READ_4K);
	CHECK_EQ(ffq_learn_point(false, 23172), FFQ_PT_READ_128K);
	CHECK_EQ(ffq_learn_point(true, 4096), FFQ_PT_WRITE_4K);
	CHECK_EQ(ffq_learn_point(true, 1 << 20), FFQ_PT_WRITE_128K);
	CHECK_EQ(ffq_learn_point(true, U32_MAX), FFQ_PT_WRITE_128K);
}

/* A read's cost is the floor of its device times: waits are not its own. */
TEST(learn_read_is_the_floor)
{
	struct ffq_learn l = { 0 };
	unsigned int i;

	/* one read in 8 finds its die idle (1.2 ms), the others wait */
	for (i = 0; i < 4000; i++)
		teach(&l, false, 4096,
		      i % 8 ? 1200000 + (i % 7) * 1000000 : 1200000,
		      4096 * (1 + i % 3));
	/* within the leak of the seven samples since the last idle die's */
	CHECK(in_force(&l, &no_set, FFQ_PT_READ_4K, FFQ_SRC_LEARNT) >= 1200000U);
	CHECK(in_force(&l, &no_set, FFQ_PT_READ_4K, FFQ_SRC_LEARNT) <= 1200000U / 100 * 101);
	/* the 128 KiB point follows at the default ratio (4x) */
	CHECK_EQ(in_force(&l, &no_set, FFQ_PT_READ_128K, FFQ_SRC_SCALED),
		 (u64)ffq_learn_cost(&l, &no_set, FFQ_PT_READ_4K, &(enum ffq_cost_src){0}) *
		 FFQ_DEFAULT_COST_READ_128K / FFQ_DEFAULT_COST_READ_4K);
	/* a device that slows down is followed: the floor leaks up */
	for (i = 0; i < 2000; i++)
		teach(&l, false, 4096, 3000000, 4096);
	CHECK_EQ(in_force(&l, &no_set, FFQ_PT_READ_4K, FFQ_SRC_LEARNT), 3000000);
	/* and drops to a faster one at once */
	teach(&l, false, 4096, 500000, 4096);
	CHECK_EQ(in_force(&l, &no_set, FFQ_PT_READ_4K, FFQ_SRC_LEARNT), 500000);
}

/*
 * A buffered write waits for the drains of the writes ahead of it: n in the
 * device, n drains (Little's law); without a buffer its floor is a program.
 */
TEST(learn_write_is_its_drain_or_its_floor)
{
	struct ffq_learn l = { 0 };
	unsigned int i;

	/* the buffer took the first one at once */
	teach(&l, true, 131072, 20000, 131072);
	/* then 128 KiB writes at 15 in flight, 40.8 ms of drain each */
	for (i = 0; i < 200; i++)
		teach(&l, true, 131072, 15 * 40800000ULL, 15 * 131072);
	CHECK(in_force(&l, &no_set, FFQ_PT_WRITE_128K, FFQ_SRC_LEARNT) >= 40800000U / 100 * 99);
	CHECK(in_force(&l, &no_set, FFQ_PT_WRITE_128K, FFQ_SRC_LEARNT) <= 40800000U / 100 * 101);
	/*
	 * A throttled writer: every other write finds room in the buffer
	 * (0.4 ms), the others wait for their drain; the drain is the cost.
	 */
	memset(&l, 0, sizeof(l));
	for (i = 0; i < 200; i++)
		teach(&l, true, 131072, i % 2 ? 400000 : 40800000, 131072);
	CHECK(in_force(&l, &no_set, FFQ_PT_WRITE_128K, FFQ_SRC_LEARNT) >= 40000000U);
	/*
	 * Mixed sizes behind a full buffer wait alike, and are charged by
	 * their bytes: 16 of 4 KiB and 16 of 128 KiB in the device, 33.7 ms.
	 */
	memset(&l, 0, sizeof(l));
	for (i = 0; i < 200; i++) {
		teach(&l, true, 4096, 33660000, 16 * 135168);
		teach(&l, true, 131072, 33660000, 16 * 135168);
	}
	CHECK_EQ(in_force(&l, &no_set, FFQ_PT_WRITE_4K, FFQ_SRC_LEARNT), 63750);
	CHECK_EQ(in_force(&l, &no_set, FFQ_PT_WRITE_128K, FFQ_SRC_LEARNT), 2040000);
	/* write-through: 8 writes on 8 dies, each one program of 510 us */
	memset(&l, 0, sizeof(l));
	teach(&l, true, 4096, 510000, 4096);
	for (i = 0; i < 200; i++)
		teach(&l, true, 4096, 510000, 8 * 4096);
	CHECK_EQ(in_force(&l, &no_set, FFQ_PT_WRITE_4K, FFQ_SRC_LEARNT), 510000);
}

/*
 * A writer the throttle keeps below the drain rate finds room in the
 * buffer for every write (0.4-1.1 ms, its transfer), which says nothing of
 * the drain: the cost learnt when writes waited stays.
 */
TEST(learn_write_keeps_its_drain_while_writes_find_room)
{
	struct ffq_learn l = { 0 };
	unsigned int i;

	teach(&l, true, 131072, 400000, 131072);
	for (i = 0; i < 16; i++)
		teach(&l, true, 131072, 8 * 40800000ULL, 8 * 131072);
	for (i = 0; i < 500; i++)
		teach(&l, true, 131072, 400000 + i % 8 * 100000, 131072);
	CHECK(in_force(&l, &no_set, FFQ_PT_WRITE_128K, FFQ_SRC_LEARNT) >= 40800000U / 100 * 99);
	CHECK(in_force(&l, &no_set, FFQ_PT_WRITE_128K, FFQ_SRC_LEARNT) <= 40800000U / 100 * 101);
	/* nor does a write that found the buffer nearly empty */
	for (i = 0; i < 500; i++)
		teach(&l, true, 131072, 2 * 4000000ULL, 2 * 131072);
	CHECK(in_force(&l, &no_set, FFQ_PT_WRITE_128K, FFQ_SRC_LEARNT) >= 40800000U / 100 * 99);
	/* a device that drains faster shows it in writes that wait */
	for (i = 0; i < 100; i++)
		teach(&l, true, 131072, 16 * 20400000ULL, 16 * 131072);
	CHECK(in_force(&l, &no_set, FFQ_PT_WRITE_128K, FFQ_SRC_LEARNT) <= 20400000U / 100 * 101);
}

/*
 * Writes dispatched four at a time behind one in the device, the first of
 * each four reaching it last (another CPU's hardware queue got there
 * first): it waits five drains with two writes counted in the device, the
 * others one drain fewer each than they count.  The drain learnt is
 * still one write's (a mean of ratios, weighted by time: 54 % more).
 */
TEST(learn_write_does_not_depend_on_the_devices_order)
{
	static const unsigned int ahead[4] = { 5, 2, 3, 4 };
	struct ffq_learn l = { 0 };
	unsigned int i, k;
	u32 cost;

	for (i = 0; i < 64; i++)
		for (k = 0; k < 4; k++)
			teach(&l, true, 131072, ahead[k] * 40800000ULL,
			      (k + 2) * 131072ULL);
	cost = in_force(&l, &no_set, FFQ_PT_WRITE_128K, FFQ_SRC_LEARNT);
	CHECK(cost >= 40800000U / 100 * 95 && cost <= 40800000U / 100 * 105);
}

/*
 * A QD1 4 KiB writer behind a full buffer on 8 dies: a program ends on
 * every die together (30.6 ms), freeing 8 slots; the writer waits for the
 * first and finds room for the next 7 (57 us each, 90 us between a
 * completion and the next dispatch; one in four of them 250 us, over 4
 * times the floor).  Its drain is 30.6 / 8 = 3.8 ms.  Taken alone, the
 * writes that waited would teach 29.5 ms.  The 64 writes that filled the
 * empty buffer first teach no drain at all.  When the throttle then holds
 * the writer below the drain rate (one write in 13 ms, finding room) two
 * writes after the last wait, that group is dropped and the drain learnt
 * stays.
 */
TEST(learn_write_a_drain_frees_room_for_several)
{
	const u64 prog = 30600000, xfer = 57000, gap = 90000;
	struct ffq_learn l = { 0 };
	u64 now = 0, wait, period, t;
	unsigned int i, k;
	u32 cost;

	for (i = 0; i < 64; i++, now += xfer + gap)
		ffq_learn_sample(&l, true, 4096, now, now + xfer, 4096);
	CHECK_EQ(l.pt[FFQ_PT_WRITE_4K].waited, 0);
	CHECK_EQ(l.pt[FFQ_PT_WRITE_4K].group_q, 0);
	for (period = prog; period <= 40 * prog; period += prog) {
		wait = period - now;
		ffq_learn_sample(&l, true, 4096, now, now + wait, 4096);
		now += wait + gap;
		for (k = 1; k < (period < 40 * prog ? 8 : 3); k++) {
			t = k % 4 ? xfer : 250000;
			ffq_learn_sample(&l, true, 4096, now, now + t, 4096);
			now += t + gap;
		}
		/* the 250 us write joined the first drain's group */
		if (period == 2 * prog)
			CHECK_EQ(l.pt[FFQ_PT_WRITE_4K].batch, 8);
	}
	CHECK_EQ(l.pt[FFQ_PT_WRITE_4K].batch, 8);
	cost = in_force(&l, &no_set, FFQ_PT_WRITE_4K, FFQ_SRC_LEARNT);
	CHECK(cost >= prog / 8 / 100 * 95 && cost <= prog / 8 / 100 * 105);
	for (i = 0; i < 500; i++, now += 13000000)
		ffq_learn_sample(&l, true, 4096, now, now + xfer, 4096);
	CHECK_EQ(l.pt[FFQ_PT_WRITE_4K].group_q, 0);
	CHECK_EQ(in_force(&l, &no_set, FFQ_PT_WRITE_4K, FFQ_SRC_LEARNT), cost);
}

/*
 * A completion asks for the costs in force to be looked at again only when
 * it may have moved one: a read's floor dropped, a write's group taken into
 * the means, the FFQ_LEARN_MIN-th sample, and one sample in
 * FFQ_LEARN_RECHECK (the floor's leak); also past the saturated count.
 */
TEST(learn_sample_says_when_a_cost_may_move)
{
	struct ffq_learn l = { 0 };
	struct ffq_learnt *r = &l.pt[FFQ_PT_READ_4K];
	unsigned int i, looks = 0;

	CHECK(ffq_learn_sample(&l, false, 4096, 0, 1000000, 4096));
	for (i = 2; i <= 160; i++) {
		bool look = ffq_learn_sample(&l, false, 4096, 0, 1200000, 4096);

		looks += look;
		CHECK_EQ(look, i == FFQ_LEARN_MIN || !(i % FFQ_LEARN_RECHECK));
	}
	CHECK_EQ(looks, 1 + 160 / FFQ_LEARN_RECHECK);
	/* the leak went on between the looks */
	CHECK(r->floor > 1000000 && r->floor < 1200000);
	CHECK(ffq_learn_sample(&l, false, 4096, 0, 900000, 4096));
	r->samples = U32_MAX;
	for (i = 0, looks = 0; i < 4 * FFQ_LEARN_RECHECK; i++)
		looks += ffq_learn_sample(&l, false, 4096, 0, 950000, 4096);
	CHECK_EQ(looks, 4);
	/* writes behind others: a group taken into the means is a look */
	memset(&l, 0, sizeof(l));
	CHECK(!ffq_learn_sample(&l, true, 131072, 0, 40800000, 2 * 131072));
	CHECK(ffq_learn_sample(&l, true, 131072, 40800000, 81600000, 2 * 131072));
	CHECK_EQ(l.pt[FFQ_PT_WRITE_128K].waited, 1);
}

/* Samples of other sizes are scaled to their point along the default line. */
TEST(learn_scales_other_sizes_to_the_point)
{
	struct ffq_learn l = { 0 };
	u64 at = ffq_cost(&ffq_default_costs, false, 8192);
	unsigned int i;

	for (i = 0; i < FFQ_LEARN_MIN; i++)
		teach(&l, false, 8192, at * 3, 8192);
	CHECK_EQ(in_force(&l, &no_set, FFQ_PT_READ_4K, FFQ_SRC_LEARNT),
		 3 * FFQ_DEFAULT_COST_READ_4K);
}

TEST(learn_set_points_take_precedence)
{
	struct ffq_learn l = { 0 };
	struct ffq_cost_model set = { .write_4k = 77 };
	unsigned int i;

	for (i = 0; i < 100; i++)
		teach(&l, true, 4096, 500000, 4096);
	CHECK_EQ(in_force(&l, &set, FFQ_PT_WRITE_4K, FFQ_SRC_SET), 77);
	CHECK_EQ(in_force(&l, &set, FFQ_PT_WRITE_128K, FFQ_SRC_SCALED),
		 500000ULL * FFQ_DEFAULT_COST_WRITE_128K / FFQ_DEFAULT_COST_WRITE_4K);
	/* learning went on: writing 0 gives the point back to it */
	set.write_4k = 0;
	CHECK_EQ(in_force(&l, &set, FFQ_PT_WRITE_4K, FFQ_SRC_LEARNT), 500000);
}

TEST(learn_clamps_and_survives_extremes)
{
	struct ffq_learn l = { 0 };
	unsigned int i;

	for (i = 0; i < FFQ_LEARN_MIN; i++) {
		teach(&l, true, 131072, 1ULL << 62, 131072);
		teach(&l, false, 0, 0, 0);
	}
	CHECK_EQ(in_force(&l, &no_set, FFQ_PT_WRITE_128K, FFQ_SRC_LEARNT),
		 FFQ_MAX_COST_NS);
	CHECK_EQ(in_force(&l, &no_set, FFQ_PT_READ_4K, FFQ_SRC_LEARNT), 1);
	/* scaled from the unclamped learnt 128 KiB point (16 s), clamped after */
	CHECK_EQ(in_force(&l, &no_set, FFQ_PT_WRITE_4K, FFQ_SRC_SCALED),
		 16ULL * FFQ_MAX_COST_NS * FFQ_DEFAULT_COST_WRITE_4K /
		 FFQ_DEFAULT_COST_WRITE_128K);
	/* a write of no bytes behind others: counted as alone, no division */
	teach(&l, true, 0, 1000000, 131072);
	CHECK_EQ(l.pt[FFQ_PT_WRITE_4K].group_q, 1ULL << FFQ_LEARN_Q_SHIFT);
}

TEST(learn_moves_by_a_sixteenth)
{
	CHECK(!ffq_learn_moved(1600, 1600));
	CHECK(!ffq_learn_moved(1600, 1699));
	CHECK(ffq_learn_moved(1600, 1700));
	CHECK(ffq_learn_moved(1600, 1500));
	CHECK(!ffq_learn_moved(1600, 1501));
	CHECK(ffq_learn_moved(1, 2));
	CHECK(!ffq_cost_changes(FFQ_SRC_DEFAULT, 60000, 1));
	CHECK(ffq_cost_changes(FFQ_SRC_SET, 1600, 1601));
	CHECK(!ffq_cost_changes(FFQ_SRC_SET, 1600, 1600));
	CHECK(!ffq_cost_changes(FFQ_SRC_LEARNT, 1600, 1601));
	CHECK(ffq_cost_changes(FFQ_SRC_SCALED, 1600, 1800));
}

TEST(weight_from_ioprio)
{
	unsigned int v;
	int l;

	for (v = 0; v <= 0xffff; v++)
		CHECK_EQ(ffq_weight(v, false), FFQ_WEIGHT_NORM);
	for (l = 0; l < IOPRIO_NR_LEVELS; l++) {
		CHECK_EQ(ffq_weight(IOPRIO_PRIO_VALUE(IOPRIO_CLASS_BE, l),
				    true), 8 - l);
		CHECK_EQ(ffq_weight(IOPRIO_PRIO_VALUE(IOPRIO_CLASS_RT, l),
				    true), 8 - l);
		CHECK_EQ(ffq_weight(IOPRIO_PRIO_VALUE(IOPRIO_CLASS_IDLE, l),
				    true), 1);
		CHECK_EQ(ffq_weight(IOPRIO_PRIO_VALUE(IOPRIO_CLASS_BE, l),
				    false), FFQ_WEIGHT_NORM);
	}
	CHECK_EQ(ffq_weight(IOPRIO_PRIO_VALUE(IOPRIO_CLASS_BE, IOPRIO_BE_NORM),
			    true), FFQ_WEIGHT_NORM);
	CHECK_EQ(ffq_weight(0, true), FFQ_WEIGHT_NORM);
	CHECK_EQ(ffq_weight(IOPRIO_PRIO_VALUE(IOPRIO_CLASS_NONE, 0), true),
		 FFQ_WEIGHT_NORM);
	CHECK_EQ(ffq_weight(IOPRIO_CLASS_INVALID << IOPRIO_CLASS_SHIFT, true),
		 FFQ_WEIGHT_NORM);
	/* hints do not change the weight */
	CHECK_EQ(ffq_weight(IOPRIO_PRIO_VALUE_HINT(IOPRIO_CLASS_BE, 0, 5),
			    true), 8);
	CHECK_EQ(ffq_weight(IOPRIO_PRIO_VALUE_HINT(IOPRIO_CLASS_RT, 7,
						   IOPRIO_NR_HINTS - 1), true),
		 1);
	/* every weight is in range */
	for (v = 0; v <= 0xffff; v++) {
		unsigned int w = ffq_weight(v, true);

		CHECK(w >= 1 && w <= FFQ_WEIGHT_MAX);
	}
}

/* ---- a model of the glue ---- */

#define NT	12	/* tasks */
#define QCAP	256	/* queued requests per task */
#define FCAP	FFQ_MAX_DEPTH	/* requests in the device per task */

struct srq {
	u64 start;
	u64 done;	/* in the device: when it completes */
	u64 svc;	/* service time, ns */
	u64 id;		/* unique in the run */
	u32 charge;
	bool sync;
	bool posted;	/* completed, its completion posted, not applied */
};

struct stask {
	struct ffq_task t;
	struct srq q[QCAP];	/* queued, first at [0] */
	unsigned int nq;
	struct srq f[FCAP];	/* in the device, in dispatch order */
	unsigned int nf;
	unsigned int nrequeued;	/* outstanding outside the scheduler */
	/* closed-loop workload for sim_run() */
	unsigned int keep;	/* keep this many outstanding (0: none) */
	bool thinker;		/* one at a time, next @think after each */
	u64 think;
	u64 next_at;		/* next arrival, U64_MAX: none */
	u32 charge;
	u64 svc;
	bool sync;
	bool exited;		/* the model's: its exit came (maybe posted) */
	unsigned long ndisp;	/* dispatched */
};

/* A completion or an exit posted for the next section under the lock. */
struct spost {
	struct stask *k;
	u64 id;			/* the completed request's; 0: the exit */
	u64 at;			/* when it completed */
};

#define NPOST	1024

struct sim {
	struct ffq_sched s;
	struct stask tk[NT];
	unsigned int nt;
	u32 depth;
	u64 throttle;		/* charge units */
	u64 antic;		/* ns */
	u64 block;		/* ns */
	u64 now;
	unsigned long ndisp;
	unsigned long stop;	/* sim_run() stops at this many dispatches */
	unsigned long npick[5];	/* ffq_pick() results */
	unsigned long unblocks, expiries;
	u64 gap;		/* of the last ffq_pick() */
	struct stask *last;	/* dispatched last ... */
	u64 last_start;		/* ... this request */
	bool antic_started;	/* by the last sim_complete() */
	u64 vtime_seen;
	bool failed;
	/*
	 * As the glue: a completion that starts an anticipation defers its
	 * update (ffq_defer()), and everything else settles it first except
	 * the same task's next arrival.
	 */
	bool lazy;
	unsigned long deferred;		/* completions deferred */
	unsigned long fulfilled;	/* ... whose task's arrival settled them */
	u64 hash;			/* of every dispatch and virtual time */
	/*
	 * As the glue's finish_request and exit_icq: completions and exits
	 * posted, applied by the next section under the lock (sim_drain()).
	 */
	bool posted;
	struct spost post[NPOST];
	unsigned int npost;
	u64 next_id;
	unsigned long nposted;		/* completions posted */
	unsigned long batched;		/* ... applied with another before */
	unsigned long late;		/* ... applied after the clock moved */
	unsigned long due_at_drain;	/* drains that ended a deadline */
	/*
	 * @go: an arrival is followed by one pick, as a dispatch that takes
	 * one request from the glue's inbox (sim_arrive_go()); @lone: with
	 * nothing else queued, decided as the glue does, by ffq_pick_lone().
	 */
	bool go;
	bool lone;
	unsigned long lone_sent;	/* ffq_pick_lone() dispatched */
	unsigned long lone_held;	/* ... held: queued after all */
};

static struct sim *sim_new(unsigned int nt, u32 depth, u64 throttle,
			   u64 antic, u64 block)
{
	struct sim *m = calloc(1, sizeof(*m));
	unsigned int i;

	if (!m)
		abort();
	ffq_sched_init(&m->s);
	for (i = 0; i < NT; i++) {
		ffq_task_init(&m->tk[i].t);
		m->tk[i].next_at = U64_MAX;
	}
	m->nt = nt;
	m->depth = depth;
	m->throttle = throttle;
	m->antic = antic;
	m->block = block;
	m->now = 1000000;
	m->next_id = 1;
	return m;
}

static struct stask *sim_task_of(struct ffq_task *t)
{
	return ffq_container_of(t, struct stask, t);
}

/* Requests of @k in the device whose completion is not posted. */
static unsigned int sim_live(const struct stask *k)
{
	unsigned int i, n = 0;

	for (i = 0; i < k->nf; i++)
		n += !k->f[i].posted;
	return n;
}

static unsigned int sim_live_all(const struct sim *m)
{
	unsigned int i, n = 0;

	for (i = 0; i < m->nt; i++)
		n += sim_live(&m->tk[i]);
	return n;
}

/* The model's outstanding requests of @k, posted completions left out. */
static unsigned int sim_outstanding(const struct stask *k)
{
	return k->nq + sim_live(k) + k->nrequeued;
}

static void sim_drain(struct sim *m);

/* Lazy: before anything but @k's own update, the deferred one's. */
static void sim_settle(struct sim *m, struct stask *k)
{
	if (!m->s.deferred || (k && m->s.deferred == &k->t))
		return;
	ffq_settle(&m->s);
	CHECK(!m->s.deferred);
}

static void sim_facts(struct sim *m, struct stask *k)
{
	struct ffq_task *t = &k->t;
	unsigned int i, nf = 0;

	t->nr_queued = k->nq;
	t->head_start = k->nq ? k->q[0].start : 0;
	t->nr_inflight = k->nf;
	t->inflight_start = k->nf ? k->f[0].start : 0;
	t->nr_out = k->nq + k->nf + k->nrequeued;
	for (i = 0; i < m->nt; i++)
		nf += m->tk[i].nf;
	CHECK_EQ(m->s.inflight, nf);
}

/* The smallest outstanding start tag, brute force; false if none. */
static bool sim_min_outstanding(const struct sim *m, u64 *min)
{
	unsigned int i, j;
	bool any = false;

	*min = U64_MAX;
	for (i = 0; i < m->nt; i++) {
		const struct stask *k = &m->tk[i];

		for (j = 0; j < k->nq; j++) {
			any = true;
			if (k->q[j].start < *min)
				*min = k->q[j].start;
		}
		for (j = 0; j < k->nf; j++) {
			any = true;
			if (k->f[j].start < *min)
				*min = k->f[j].start;
		}
		if (k->t.flags & FFQ_T_ANTIC) {
			any = true;
			if (k->t.antic_start < *min)
				*min = k->t.antic_start;
		}
	}
	return any;
}

/* Every invariant of the core's state against the model's. */
static void sim_check(struct sim *m)
{
	const struct ffq_sched *s = &m->s;
	unsigned int i, nready = 0, nactive = 0, nantic = 0, nblock = 0;
	unsigned int nrestrain = 0, npace = 0;
	int before = unit_failed_checks;
	u64 min;

	if (m->failed)
		return;
	for (i = 0; i < m->nt; i++) {
		const struct ffq_task *t = &m->tk[i].t;
		bool active = ffq_task_active(t);
		bool antic = t->flags & FFQ_T_ANTIC;
		bool blocking = antic && (t->flags & FFQ_T_BLOCKING);

		CHECK(!(t->flags & FFQ_T_BLOCKING) || antic);
		CHECK_EQ(ffq_hnode_linked(&s->ready, &t->ready),
			 t->nr_queued > 0);
		CHECK_EQ(ffq_hnode_linked(&s->vt, &t->vt), active);
		CHECK_EQ(ffq_hnode_linked(&s->prog, &t->prog),
			 t->nr_out > 0 || blocking);
		CHECK_EQ(ffq_hnode_linked(&s->timer, &t->timer), antic);
		CHECK_EQ(ffq_hnode_linked(&s->block, &t->block), blocking);
		CHECK_EQ(ffq_hnode_linked(&s->pace, &t->pace),
			 antic && !blocking);
		if (antic && !blocking)
			CHECK(t->pace.key == t->antic_start);
		if (t->nr_queued)
			CHECK(t->ready.key == t->head_start);
		if (active)
			CHECK(t->vt.key == ffq_task_vt_key(t));
		if (t->nr_out || blocking)
			CHECK(t->prog.key == ffq_task_progress(t));
		if (antic)
			CHECK(t->timer.key == (blocking ? t->block_until :
						t->antic_until));
		CHECK(t->last_finish <= s->max_finish);
		nready += t->nr_queued > 0;
		nactive += active;
		nrestrain += t->nr_out > 0 || blocking;
		nantic += antic;
		nblock += blocking;
		npace += antic && !blocking;
	}
	CHECK_EQ(s->ready.nr, nready);
	CHECK_EQ(s->vt.nr, nactive);
	CHECK_EQ(s->prog.nr, nrestrain);
	CHECK_EQ(s->timer.nr, nantic);
	CHECK_EQ(s->block.nr, nblock);
	CHECK_EQ(s->pace.nr, npace);
	/* Min-SFQ(D): the smallest outstanding start tag, else max finish */
	if (sim_min_outstanding(m, &min))
		CHECK_EQ(s->vtime, min);
	else
		CHECK_EQ(s->vtime, s->max_finish);
	CHECK(s->vtime >= m->vtime_seen);
	m->vtime_seen = s->vtime;
	if (unit_failed_checks != before)
		m->failed = true;
}

/* A request of @k arrives; returns its start tag. */
static u64 sim_arrive(struct sim *m, struct stask *k, u32 charge, u64 svc,
		      bool sync)
{
	struct srq *r;
	u64 start;

	CHECK(k->nq < QCAP);
	CHECK(!(k->t.flags & FFQ_T_EXITED));
	if (k->nq >= QCAP)
		abort();
	sim_drain(m);
	sim_settle(m, k);
	if (m->s.deferred)
		m->fulfilled++;
	r = &k->q[k->nq];
	start = ffq_tag(&m->s, &k->t, charge);
	/* a task's tags never go down, and start at virtual time or later */
	CHECK(start >= m->s.vtime);
	if (k->nq)
		CHECK(start >= k->q[k->nq - 1].start + k->q[k->nq - 1].charge);
	CHECK_EQ(k->t.last_finish, start + charge);
	ffq_arrive(&k->t);
	r->start = start;
	r->charge = charge;
	r->svc = svc;
	r->sync = sync;
	r->done = 0;
	r->id = m->next_id++;
	r->posted = false;
	k->nq++;
	sim_facts(m, k);
	ffq_update(&m->s, &k->t);
	CHECK(!m->s.deferred);
	sim_check(m);
	return start;
}

/*
 * @k's request tagged @start went to the device (in k->f already): the
 * glue's count of it in flight, the model's counts and the hash of the
 * dispatch, then @k's facts.
 */
static void sim_sent(struct sim *m, struct stask *k, u64 start)
{
	m->s.inflight++;
	k->ndisp++;
	m->ndisp++;
	m->last = k;
	m->last_start = start;
	m->hash = (m->hash * 1000003 + (u64)(k - m->tk) + 1) * 1000003 + start;
	sim_facts(m, k);
}

/* One ffq_pick(); on FFQ_PICK_TASK the request goes to the device. */
static enum ffq_pick sim_pick(struct sim *m)
{
	struct ffq_task *t = (struct ffq_task *)1;
	struct stask *k;
	enum ffq_pick p;
	unsigned int i, j;
	u64 min = U64_MAX;

	sim_drain(m);
	sim_settle(m, NULL);
	p = ffq_pick(&m->s, m->depth, m->throttle, m->now, &t, &m->gap);
	m->npick[p]++;
	for (i = 0; i < m->nt; i++)
		for (j = 0; j < m->tk[i].nq; j++)
			if (m->tk[i].q[j].start < min)
				min = m->tk[i].q[j].start;
	switch (p) {
	case FFQ_PICK_TASK:
		break;
	case FFQ_PICK_EMPTY:
		CHECK(!t);
		CHECK(min == U64_MAX);
		return p;
	case FFQ_PICK_FULL:
		CHECK(!t);
		CHECK(m->s.inflight >= m->depth);
		return p;
	case FFQ_PICK_ANTIC:
		/* a blocking task, so a timer, will let it go */
		CHECK(!t);
		CHECK(m->s.block.nr && m->s.block.root->key < min);
		CHECK(m->s.inflight + m->s.block.nr >= m->depth);
		CHECK(m->s.timer.nr);
		return p;
	case FFQ_PICK_THROTTLED:
		/* something will complete or expire to let it go */
		CHECK(!t);
		CHECK(m->throttle && m->gap > m->throttle);
		CHECK(m->s.inflight || m->s.timer.nr);
		return p;
	}
	k = sim_task_of(t);
	CHECK(k->nq > 0);
	if (!k->nq)
		abort();
	/* the smallest start tag queued goes first */
	CHECK(k->q[0].start == min);
	CHECK(k->nf < FCAP);
	k->f[k->nf] = k->q[0];
	k->f[k->nf].done = m->now + k->q[0].svc;
	k->nf++;
	k->nq--;
	memmove(&k->q[0], &k->q[1], k->nq * sizeof(k->q[0]));
	ffq_dispatched(&m->s, t, min, k->f[k->nf - 1].charge);
	CHECK(t->last_start == min);
	sim_sent(m, k, min);
	/* what the glue calls: sim_check() holds it to ffq_update()'s result */
	ffq_update_dispatched(&m->s, t);
	m->hash = m->hash * 1000003 + m->s.vtime;
	sim_check(m);
	return p;
}

/* Nothing queued: the glue's fd->queued is 0. */
static bool sim_none_queued(const struct sim *m)
{
	unsigned int i;

	for (i = 0; i < m->nt; i++)
		if (m->tk[i].nq)
			return false;
	return true;
}

/*
 * A request of @k arrives and a dispatch follows at once, as when a
 * dispatch takes one request from the glue's inbox.  With @m->lone and
 * nothing queued within the depth, as the glue decides it
 * (ffq_dispatch_lone()): tagged, counted in flight, ffq_pick_lone(), and
 * queued after all unless it goes; else sim_arrive() and sim_pick().
 * The model's checks and the hash are sim_pick()'s.
 */
static enum ffq_pick sim_arrive_go(struct sim *m, struct stask *k,
				   u32 charge, u64 svc, bool sync)
{
	struct ffq_task *t = &k->t;
	u64 start, last;
	enum ffq_pick p;
	struct srq *r;

	sim_drain(m);
	if (!m->lone || !sim_none_queued(m) || m->s.inflight >= m->depth) {
		sim_arrive(m, k, charge, svc, sync);
		return sim_pick(m);
	}
	CHECK(!(t->flags & FFQ_T_EXITED));
	CHECK(k->nf < FCAP);
	sim_settle(m, k);
	if (m->s.deferred)
		m->fulfilled++;
	start = ffq_tag(&m->s, t, charge);
	CHECK(start >= m->s.vtime);
	ffq_arrive(t);
	r = &k->f[k->nf];
	r->start = start;
	r->charge = charge;
	r->svc = svc;
	r->sync = sync;
	r->done = m->now + svc;
	r->id = m->next_id++;
	r->posted = false;
	/* the facts as if it were in flight, s->inflight not yet */
	k->nf++;
	t->nr_inflight = k->nf;
	t->inflight_start = k->f[0].start;
	t->nr_out = k->nq + k->nf + k->nrequeued;
	last = t->last_start;
	p = ffq_pick_lone(&m->s, t, start, charge, m->depth, m->throttle,
			  m->now, &m->gap);
	CHECK(!m->s.deferred);
	m->npick[p]++;
	if (p != FFQ_PICK_TASK) {
		/* queued after all, as sim_arrive() makes it */
		m->lone_held++;
		k->nf--;
		k->q[k->nq] = *r;
		k->q[k->nq].done = 0;
		k->nq++;
		t->last_start = last;
		sim_facts(m, k);
		ffq_update(&m->s, t);
		sim_check(m);
		return p;
	}
	m->lone_sent++;
	sim_sent(m, k, start);
	m->hash = m->hash * 1000003 + m->s.vtime;
	sim_check(m);
	return p;
}

/*
 * Apply the completion of request @i (in dispatch order) of @k in the
 * device, which completed at @at, as the glue does under its lock.
 * Returns the deadline of the anticipation it started, 0 if none.
 */
static u64 sim_apply_done(struct sim *m, struct stask *k, unsigned int i,
			  u64 at)
{
	struct srq r;

	CHECK(i < k->nf);
	if (i >= k->nf)
		abort();
	sim_settle(m, k);
	r = k->f[i];
	memmove(&k->f[i], &k->f[i + 1], (k->nf - i - 1) * sizeof(r));
	k->nf--;
	m->s.inflight--;
	sim_facts(m, k);
	m->antic_started = ffq_complete(&m->s, &k->t, r.sync, at, m->antic,
					m->block);
	if (m->lazy && m->antic_started) {
		ffq_defer(&m->s, &k->t);
		m->deferred++;
		/* the deadline is known before the heaps have it */
		CHECK(ffq_next_deadline(&m->s));
		return ffq_task_deadline(&k->t);
	}
	ffq_update(&m->s, &k->t);
	sim_check(m);
	return m->antic_started ? ffq_task_deadline(&k->t) : 0;
}

/*
 * The request @li of @k in the device, counting those whose completion
 * is not posted yet (in dispatch order), completes now: applied at once,
 * or (posted) left in the device for the next section to apply.
 */
static void sim_complete(struct sim *m, struct stask *k, unsigned int li)
{
	unsigned int i;

	for (i = 0; i < k->nf; i++)
		if (!k->f[i].posted && !li--)
			break;
	CHECK(i < k->nf);
	if (i >= k->nf)
		abort();
	if (!m->posted) {
		sim_apply_done(m, k, i, m->now);
		return;
	}
	CHECK(m->npost < NPOST);
	if (m->npost >= NPOST)
		abort();
	k->f[i].posted = true;
	m->post[m->npost++] = (struct spost){ k, k->f[i].id, m->now };
	m->nposted++;
	/* nothing changed for the core: its state still checks */
	if (!m->s.deferred)
		sim_check(m);
}

/* A queued request @i of @k is freed without dispatch (merged away). */
static void sim_remove_queued(struct sim *m, struct stask *k, unsigned int i)
{
	CHECK(i < k->nq);
	sim_drain(m);
	sim_settle(m, NULL);
	k->nq--;
	memmove(&k->q[i], &k->q[i + 1], (k->nq - i) * sizeof(k->q[0]));
	sim_facts(m, k);
	ffq_update(&m->s, &k->t);
	sim_check(m);
}

static void sim_apply_exit(struct sim *m, struct stask *k)
{
	sim_settle(m, NULL);
	ffq_exit(&k->t);
	ffq_update(&m->s, &k->t);
	sim_check(m);
}

/* @k's context exits: applied at once, or posted (as exit_icq does). */
static void sim_exit(struct sim *m, struct stask *k)
{
	k->exited = true;
	k->keep = 0;
	k->thinker = false;
	k->next_at = U64_MAX;
	if (!m->posted) {
		sim_apply_exit(m, k);
		return;
	}
	CHECK(m->npost < NPOST);
	if (m->npost >= NPOST)
		abort();
	m->post[m->npost++] = (struct spost){ k, 0, m->now };
}

/* End the blocking periods and anticipations due now. */
static void sim_fire_due(struct sim *m)
{
	struct ffq_task *t;

	sim_settle(m, NULL);
	while ((t = ffq_timer_due(&m->s, m->now))) {
		if (ffq_timer_fire(&m->s, t, m->now) == FFQ_TIMER_UNBLOCK)
			m->unblocks++;
		else
			m->expiries++;
		sim_check(m);
	}
}

static void sim_timers(struct sim *m)
{
	sim_drain(m);
	sim_fire_due(m);
}

/*
 * What every section under the glue's lock starts with (ffq_drain()):
 * apply what was posted, in order, each completion with its own time;
 * then end what is due by now (the glue's hrtimer only wakes a held
 * dispatch: no section waits for it to end a deadline).
 */
static void sim_drain(struct sim *m)
{
	unsigned int p, i;
	u64 next;

	for (p = 0; p < m->npost; p++) {
		struct spost *e = &m->post[p];
		struct stask *k = e->k;

		if (!e->id) {
			sim_apply_exit(m, k);
			continue;
		}
		for (i = 0; i < k->nf && k->f[i].id != e->id; i++)
			;
		CHECK(i < k->nf && k->f[i].posted);
		if (i >= k->nf)
			abort();
		m->batched += p > 0;
		m->late += e->at < m->now;
		sim_apply_done(m, k, i, e->at);
	}
	m->npost = 0;
	next = ffq_next_deadline(&m->s);
	if (next && next <= m->now) {
		m->due_at_drain++;
		sim_fire_due(m);
	}
}

/* The earliest deadline, as a section under the lock reads it. */
static u64 sim_next_deadline(struct sim *m)
{
	sim_drain(m);
	return ffq_next_deadline(&m->s);
}

/* The closed-loop workload of @k tops up its outstanding requests. */
static void sim_refill(struct sim *m, struct stask *k)
{
	while (k->keep && k->nq + sim_live(k) < k->keep)
		sim_arrive(m, k, k->charge, k->svc, k->sync);
}

static void sim_start(struct sim *m)
{
	unsigned int i;

	for (i = 0; i < m->nt; i++) {
		sim_refill(m, &m->tk[i]);
		if (m->tk[i].thinker)
			m->tk[i].next_at = m->now;
	}
}

static void sim_dispatch_all(struct sim *m)
{
	while (m->ndisp < m->stop && !m->failed &&
	       sim_pick(m) == FFQ_PICK_TASK)
		;
}

/* The request in the device completing first, if it is due; NULL if none. */
static struct stask *sim_due(struct sim *m, unsigned int *fi)
{
	struct stask *first = NULL;
	unsigned int i, j;
	u64 done = m->now + 1;

	for (i = 0; i < m->nt; i++) {
		unsigned int live = 0;

		for (j = 0; j < m->tk[i].nf; j++) {
			if (m->tk[i].f[j].posted)
				continue;
			if (m->tk[i].f[j].done < done) {
				done = m->tk[i].f[j].done;
				first = &m->tk[i];
				*fi = live;
			}
			live++;
		}
	}
	return first;
}

/*
 * Run the workloads until @n more requests were dispatched or nothing is
 * left to happen.  At each instant: completions (earliest first), then
 * timers, then arrivals, then dispatch.
 */
static void sim_run(struct sim *m, unsigned long n)
{
	m->stop = m->ndisp + n;
	for (;;) {
		u64 next = U64_MAX;
		struct stask *first;
		unsigned int i, j, fi;

		sim_dispatch_all(m);
		if (m->ndisp >= m->stop || m->failed)
			return;
		for (i = 0; i < m->nt; i++) {
			for (j = 0; j < m->tk[i].nf; j++)
				if (!m->tk[i].f[j].posted &&
				    m->tk[i].f[j].done < next)
					next = m->tk[i].f[j].done;
			if (m->tk[i].next_at < next)
				next = m->tk[i].next_at;
		}
		if (sim_next_deadline(m) && sim_next_deadline(m) < next)
			next = sim_next_deadline(m);
		if (next == U64_MAX)
			return;
		CHECK(next >= m->now);
		m->now = next;
		while ((first = sim_due(m, &fi))) {
			sim_complete(m, first, fi);
			if (first->thinker)
				first->next_at = m->now + first->think;
			sim_refill(m, first);
		}
		sim_timers(m);
		for (i = 0; i < m->nt; i++) {
			struct stask *k = &m->tk[i];

			if (k->next_at > m->now)
				continue;
			k->next_at = U64_MAX;
			sim_arrive(m, k, k->charge, k->svc, k->sync);
		}
	}
}

static void sim_workload(struct stask *k, unsigned int keep, bool thinker,
			 u64 think, u32 charge, u64 svc, bool sync)
{
	k->keep = keep;
	k->thinker = thinker;
	k->think = think;
	k->charge = charge;
	k->svc = svc;
	k->sync = sync;
}

static unsigned int nr_linked(const struct sim *m, const struct stask *k)
{
	const struct ffq_sched *s = &m->s;
	const struct ffq_task *t = &k->t;

	return ffq_hnode_linked(&s->ready, &t->ready) +
	       ffq_hnode_linked(&s->vt, &t->vt) +
	       ffq_hnode_linked(&s->prog, &t->prog) +
	       ffq_hnode_linked(&s->timer, &t->timer) +
	       ffq_hnode_linked(&s->block, &t->block) +
	       ffq_hnode_linked(&s->pace, &t->pace);
}

static void check_all_heaps_empty(const struct ffq_sched *s)
{
	CHECK(!s->ready.root && !s->vt.root && !s->prog.root &&
	      !s->timer.root && !s->block.root && !s->pace.root);
	CHECK_EQ(s->ready.nr, 0);
	CHECK_EQ(s->vt.nr, 0);
	CHECK_EQ(s->prog.nr, 0);
	CHECK_EQ(s->timer.nr, 0);
	CHECK_EQ(s->block.nr, 0);
	CHECK_EQ(s->pace.nr, 0);
	CHECK_EQ(ffq_next_deadline(s), 0);
}

/* ---- tagging ---- */

TEST(tags_start_at_vtime_or_last_finish)
{
	struct sim *m = sim_new(2, 8, 0, 0, 0);
	struct stask *a = &m->tk[0], *b = &m->tk[1];
	unsigned int i;

	/* back to back: consecutive tags */
	CHECK_EQ(sim_arrive(m, a, 1000, 0, true), 0);
	CHECK_EQ(sim_arrive(m, a, 500, 0, true), 1000);
	CHECK_EQ(sim_arrive(m, a, 7, 0, true), 1500);
	CHECK_EQ(a->t.last_finish, 1507);
	CHECK_EQ(m->s.max_finish, 1507);
	CHECK_EQ(m->s.vtime, 0);
	/* another task starts at virtual time, not after a */
	CHECK_EQ(sim_arrive(m, b, 100, 0, true), 0);
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	/* a(0), b(0) and a(1000) are in the device, a(1500) queued */
	CHECK_EQ(a->nf, 2);
	CHECK_EQ(b->nf, 1);
	CHECK_EQ(m->s.vtime, 0);
	sim_complete(m, a, 0);
	CHECK_EQ(m->s.vtime, 0);		/* b(0) still out */
	sim_complete(m, b, 0);
	CHECK_EQ(m->s.vtime, 1000);		/* a(1000) in the device */
	/* b is behind virtual time: it starts there, without credit */
	CHECK_EQ(b->t.last_finish, 100);
	CHECK_EQ(sim_arrive(m, b, 100, 0, true), 1000);
	sim_complete(m, a, 0);
	CHECK_EQ(m->s.vtime, 1000);		/* b(1000) queued */
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	CHECK_EQ(sim_pick(m), FFQ_PICK_EMPTY);
	for (i = 0; i < 2; i++)
		sim_complete(m, a->nf ? a : b, 0);
	/* nothing outstanding: virtual time is the largest finish tag */
	CHECK_EQ(m->s.vtime, 1507);
	CHECK_EQ(m->s.max_finish, 1507);
	CHECK_EQ(sim_arrive(m, b, 1, 0, true), 1507);
	CHECK_EQ(sim_arrive(m, a, 1, 0, true), 1507);
	free(m);
}

static unsigned long pct(unsigned long part, unsigned long whole)
{
	return whole ? part * 100 / whole : 0;
}

/*
 * Two backlogged tasks share the device; one goes idle for a long time and
 * comes back with many requests: it starts at virtual time and gets its
 * half from then on, not a burst for the time it was away.
 */
TEST(idle_task_returns_without_credit)
{
	struct sim *m = sim_new(2, 2, (u64)FFQ_DEFAULT_THROTTLE_US * 1000,
				(u64)FFQ_DEFAULT_ANTIC_US * 1000,
				(u64)FFQ_DEFAULT_ANTIC_BLOCK_US * 1000);
	struct stask *a = &m->tk[0], *b = &m->tk[1];
	unsigned long a0, b0, b20 = 0, i;
	u64 v, start;

	sim_workload(a, 16, false, 0, 100000, 100000, true);
	sim_workload(b, 16, false, 0, 100000, 100000, true);
	sim_start(m);
	sim_run(m, 1000);
	CHECK_EQ(m->ndisp, 1000);
	CHECK(pct(a->ndisp, 1000) >= 49 && pct(b->ndisp, 1000) >= 49);

	/* b goes idle; a runs alone for a while, virtual time moves on */
	b->keep = 0;
	sim_run(m, 5000);
	CHECK_EQ(b->nq + b->nf, 0);
	CHECK(!ffq_task_active(&b->t));
	v = m->s.vtime;
	CHECK(v > b->t.last_finish + 4000ULL * 100000);

	/* b is back with 200 requests: its first starts at virtual time */
	start = sim_arrive(m, b, 100000, 100000, true);
	CHECK_EQ(start, v);
	b->keep = 200;
	sim_refill(m, b);
	CHECK_EQ(b->nq, 200);
	a0 = a->ndisp;
	b0 = b->ndisp;
	for (i = 0; i < 20; i++) {
		sim_run(m, 1);
		b20 = b->ndisp - b0;
	}
	CHECK(b20 <= 12);
	sim_run(m, 180);
	CHECK_EQ(a->ndisp - a0 + b->ndisp - b0, 200);
	CHECK(pct(b->ndisp - b0, 200) >= 45 && pct(b->ndisp - b0, 200) <= 55);
	CHECK(!m->failed);
	free(m);
}

/* ---- virtual time ---- */

/* A slow request in the device holds virtual time while others complete. */
TEST(vtime_held_by_slow_request_in_device)
{
	struct sim *m = sim_new(3, 32, 0, 0, 0);
	struct stask *a = &m->tk[0], *b = &m->tk[1], *c = &m->tk[2];
	unsigned int i;

	CHECK_EQ(sim_arrive(m, a, 1000, 0, false), 0);
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	CHECK(m->last == a);
	for (i = 0; i < 10; i++)
		CHECK_EQ(sim_arrive(m, b, 1000, 0, false), i * 1000);
	for (i = 0; i < 10; i++) {
		CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
		sim_complete(m, b, 0);
		/* Min-SFQ: a's request is still in the device */
		CHECK_EQ(m->s.vtime, 0);
	}
	/* b goes on after its last finish, a newcomer at virtual time */
	CHECK_EQ(sim_arrive(m, b, 1000, 0, false), 10000);
	CHECK_EQ(sim_arrive(m, c, 1000, 0, false), 0);
	/* a completes: virtual time is the smallest outstanding, c's */
	sim_complete(m, a, 0);
	CHECK_EQ(m->s.vtime, 0);
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	CHECK(m->last == c);
	CHECK_EQ(m->s.vtime, 0);
	sim_complete(m, c, 0);
	CHECK_EQ(m->s.vtime, 10000);		/* b(10000) queued */
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	sim_complete(m, b, 0);
	CHECK_EQ(m->s.vtime, m->s.max_finish);
	CHECK_EQ(m->s.max_finish, 11000);
	check_all_heaps_empty(&m->s);
	free(m);
}

/*
 * One random event.  Tasks 0..3 are heavy: they queue up to 64 requests;
 * tasks 4..7 are light: one request at a time, so they anticipate often.
 * Task 0's requests are slow: they stay in the device while others
 * complete.
 */
static void rand_event(struct sim *m, unsigned long *exits)
{
	unsigned int r = rng() % 100, i, j;
	struct stask *k = &m->tk[rng() % m->nt];

	/* the model's view, the same whether completions are posted */
	if (r < 30) {
		if (k->exited)
			return;
		/* with @go, short queues: often nothing queued at all */
		if (!(k - m->tk < 4 ? k->nq < (m->go ? 1 : 64) :
		      !sim_outstanding(k)))
			return;
		if (m->go)
			sim_arrive_go(m, k, 1 + rng() % 5000, 0,
				      rng() % 8 != 0);
		else
			sim_arrive(m, k, 1 + rng() % 5000, 0, rng() % 8 != 0);
	} else if (r < 60) {
		/* with @go, as the glue's dispatch: until it holds */
		while (sim_pick(m) == FFQ_PICK_TASK && m->go)
			;
	} else if (r < 86) {
		if (!sim_live_all(m))
			return;
		j = rng() % sim_live_all(m);
		for (i = 0; j >= sim_live(&m->tk[i]); i++)
			j -= sim_live(&m->tk[i]);
		if (i == 0 && rng() % 20)
			return;
		sim_complete(m, &m->tk[i], j);
	} else if (r < 88) {
		if (k->nq)
			sim_remove_queued(m, k, rng() % k->nq);
	} else if (r < 97) {
		m->now += rng() % 3000;
		sim_timers(m);
	} else if (r < 99) {
		if (sim_next_deadline(m))
			m->now = sim_next_deadline(m);
		sim_timers(m);
	} else if (!k->exited) {
		sim_exit(m, k);
		(*exits)++;
	}
}

struct rand_cfg {
	u32 depth;
	u64 throttle;
	u64 antic;
	u64 block;
};

/*
 * Random arrivals, dispatches, out-of-order completions (task 0's requests
 * are slow: they complete late while others complete), merges, exits and
 * timers; after every event sim_check() compares virtual time with the
 * brute-force minimum over the model's outstanding requests and the
 * hypothetical ones of anticipating tasks, checks it never decreased and
 * that every heap holds exactly the tasks it should.
 */
struct rand_stats {
	unsigned long throttled, antic, unblocks, expiries, exits, dispatched;
	unsigned long deferred, fulfilled;
	unsigned long posted, batched, late, due_at_drain;
	unsigned long lone_sent, lone_held;
	u64 hash;
};

/*
 * @lazy: anticipation updates deferred (ffq_defer()); @posted: completions
 * and exits posted for the next section (ffq_drain()), as the glue does;
 * @go: each arrival followed by a pick; @lone: those decided by
 * ffq_pick_lone() where the glue does (sim_arrive_go()).
 */
static void rand_run(bool lazy, bool posted, bool go, bool lone,
		     struct rand_stats *st)
{
	static const struct rand_cfg cfg[] = {
		{ 1, 0, 0, 0 },
		{ 4, 0, 20000, 2000 },
		{ 8, 3000, 0, 0 },
		{ 8, 3000, 20000, 5000 },
		{ 2, 10000, 15000, 30000 },	/* blocks for all of it */
		{ 16, 1, 8000, 0 },		/* never blocks */
		{ 3, 20000, 50000, 10000 },
	};
	/* deeper, so that the queues empty: lone arrivals */
	static const struct rand_cfg go_cfg[] = {
		{ 4, 0, 20000, 2000 },
		{ 16, 3000, 20000, 5000 },
		{ 32, 20000, 50000, 10000 },
		{ 64, 1, 8000, 0 },
		{ 12, 10000, 15000, 30000 },
		{ 64, 0, 0, 0 },
		{ 32, 0, 20000, 0 },
	};
	const struct rand_cfg *cf = go ? go_cfg : cfg;
	unsigned int c, nc = go ? ARRAY_SIZE(go_cfg) : ARRAY_SIZE(cfg);

	memset(st, 0, sizeof(*st));
	rng_seed(4);
	for (c = 0; c < nc; c++) {
		struct sim *m = sim_new(8, cf[c].depth, cf[c].throttle,
					cf[c].antic, cf[c].block);
		unsigned int step, i;

		m->lazy = lazy;
		m->posted = posted;
		m->go = go;
		m->lone = lone;
		for (step = 0; step < 60000 && !m->failed; step++) {
			rand_event(m, &st->exits);
			/*
			 * An exited task, all freed: a new one in its place,
			 * once what was posted is applied (the glue frees a
			 * task only then).
			 */
			for (i = 0; i < m->nt; i++) {
				struct stask *k = &m->tk[i];

				if (!k->exited || sim_outstanding(k))
					continue;
				sim_drain(m);
				sim_settle(m, NULL);
				CHECK(!ffq_task_active(&k->t));
				CHECK_EQ(nr_linked(m, k), 0);
				ffq_task_init(&k->t);
				k->exited = false;
				sim_check(m);
			}
		}
		/* drain: everything completes, anticipation runs out */
		for (step = 0; step < 100000 && !m->failed; step++) {
			bool any = false;

			for (i = 0; i < m->nt; i++) {
				while (sim_live(&m->tk[i])) {
					sim_complete(m, &m->tk[i], 0);
					any = true;
				}
				if (m->tk[i].nq)
					any = true;
			}
			while (sim_pick(m) == FFQ_PICK_TASK)
				any = true;
			if (sim_next_deadline(m)) {
				m->now = sim_next_deadline(m);
				sim_timers(m);
				any = true;
			}
			if (!any)
				break;
		}
		sim_drain(m);
		sim_settle(m, NULL);
		CHECK_EQ(m->s.inflight, 0);
		CHECK_EQ(m->s.vtime, m->s.max_finish);
		check_all_heaps_empty(&m->s);
		CHECK(!m->failed);
		st->throttled += m->npick[FFQ_PICK_THROTTLED];
		st->antic += m->npick[FFQ_PICK_ANTIC];
		st->unblocks += m->unblocks;
		st->expiries += m->expiries;
		st->dispatched += m->ndisp;
		st->deferred += m->deferred;
		st->fulfilled += m->fulfilled;
		st->posted += m->nposted;
		st->batched += m->batched;
		st->late += m->late;
		st->due_at_drain += m->due_at_drain;
		st->lone_sent += m->lone_sent;
		st->lone_held += m->lone_held;
		st->hash = st->hash * 1000003 + m->hash;
		free(m);
	}
}

TEST(vtime_is_min_outstanding_start_random)
{
	struct rand_stats st;

	rand_run(false, false, false, false, &st);
	/* the run went through every path */
	CHECK(st.throttled > 1000);
	CHECK(st.antic > 1000);
	CHECK(st.unblocks > 1000);
	CHECK(st.expiries > 1000);
	CHECK(st.exits > 100);
	CHECK(st.dispatched > 25000);
	CHECK_EQ(st.deferred, 0);
}

/*
 * Two random runs made the same decisions: the hash of every dispatch,
 * start tag and virtual time, and the counts of each kind of event.
 */
static void check_same_decisions(const struct rand_stats *got,
				 const struct rand_stats *want)
{
	CHECK_EQ(got->hash, want->hash);
	CHECK_EQ(got->dispatched, want->dispatched);
	CHECK_EQ(got->throttled, want->throttled);
	CHECK_EQ(got->antic, want->antic);
	CHECK_EQ(got->unblocks, want->unblocks);
	CHECK_EQ(got->expiries, want->expiries);
	CHECK_EQ(got->exits, want->exits);
}

/*
 * The same random run with the glue's deferred anticipation updates
 * (ffq_defer()): every dispatch, start tag and virtual time the same as
 * with each update made at once, and sim_check() passing after every
 * event but a deferring completion.
 */
TEST(deferred_anticipation_changes_nothing_random)
{
	struct rand_stats eager, lazy;

	rand_run(false, false, false, false, &eager);
	rand_run(true, false, false, false, &lazy);
	check_same_decisions(&lazy, &eager);
	/* both ends of the path were taken, many times */
	CHECK(lazy.deferred > 1000);
	CHECK(lazy.fulfilled > 100);
	printf("# random run: %lu dispatches, %lu deferred anticipations, %lu fulfilled by their task\n",
	       lazy.dispatched, lazy.deferred, lazy.fulfilled);
}

/*
 * The same random run as the glue goes: completions and exits posted
 * without the lock and applied by the next section under it, in posting
 * order, each completion with its own time (ffq_drain()), anticipation
 * updates deferred too.  Every dispatch, start tag and virtual time the
 * same as with each completion applied at once, sim_check() passing
 * after every event (a posted completion changes nothing the core has),
 * and the paths taken: completions applied several in one section, after
 * the clock moved on, and deadlines ended by the section that finds them
 * due (the glue arms no timer unless a dispatch holds requests back).
 */
TEST(posted_completions_change_nothing_random)
{
	struct rand_stats eager, posted;

	rand_run(false, false, false, false, &eager);
	rand_run(true, true, false, false, &posted);
	check_same_decisions(&posted, &eager);
	CHECK_EQ(eager.posted, 0);
	CHECK(posted.posted > 10000);
	CHECK(posted.batched > 1000);
	CHECK(posted.late > 1000);
	CHECK(posted.due_at_drain > 10);
	printf("# random run: %lu completions posted, %lu applied after another in one section, %lu after the clock moved, %lu sections ended a deadline due\n",
	       posted.posted, posted.batched, posted.late,
	       posted.due_at_drain);
}

/*
 * The glue's lone arrivals (ffq_dispatch_lone()): a dispatch that takes
 * one request with nothing else queued decides it by ffq_pick_lone(),
 * the task never entering @ready, and queues it after all if it may not
 * go.  The same random run, each arrival followed by a pick, with
 * completions posted and anticipation deferred as the glue does, makes
 * every dispatch, start tag and virtual time the same as when each such
 * request is queued and picked (sim_check() after every event), and takes
 * both ends of the path many times.
 */
TEST(lone_arrivals_change_nothing_random)
{
	struct rand_stats queued, lone;

	rand_run(true, true, true, false, &queued);
	rand_run(true, true, true, true, &lone);
	check_same_decisions(&lone, &queued);
	CHECK_EQ(queued.lone_sent + queued.lone_held, 0);
	CHECK(lone.lone_sent > 10000);
	CHECK(lone.lone_held > 500);
	CHECK(lone.throttled > 1000 && lone.antic > 1000);
	printf("# random run: %lu dispatches, %lu of them lone arrivals, %lu lone arrivals held\n",
	       lone.dispatched, lone.lone_sent, lone.lone_held);
}

/*
 * One light task's completion, then three of a heavy one's, then nothing
 * until after the light task's anticipation deadline, when its next
 * request comes: its start tag, and virtual time then.  @posted: the
 * completions posted and applied by that request's section (which is
 * late), else applied at once and the timer fired after the deadline.
 */
static u64 late_section_tag(bool posted, u64 *vtime)
{
	struct sim *m = sim_new(2, 4, 0, 10000, 0);
	struct stask *a = &m->tk[0], *b = &m->tk[1];
	unsigned int i;
	u64 start;

	m->lazy = posted;
	m->posted = posted;
	sim_arrive(m, a, 1000, 0, true);
	for (i = 0; i < 4; i++)
		sim_arrive(m, b, 1000, 0, false);
	/* a(0), b(0), b(1000), b(2000) in the device, b(3000) queued */
	for (i = 0; i < 4; i++)
		CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	m->now += 1000;
	sim_complete(m, a, 0);		/* anticipated at 1000 for 10 us */
	m->now += 4000;
	for (i = 0; i < 3; i++)
		sim_complete(m, b, 0);
	m->now += 7000;			/* 1 us past a's deadline */
	if (!posted)
		sim_timers(m);
	start = sim_arrive(m, a, 1000, 0, true);
	*vtime = m->s.vtime;
	CHECK_EQ(m->expiries, 1);
	CHECK(!m->failed);
	free(m);
	return start;
}

/*
 * A completion applied only after its anticipation's deadline passed
 * (nothing took the lock meanwhile) starts that anticipation with its own
 * time, and the section applying it ends it before anything else: the
 * task's next request is tagged at virtual time, which the other task's
 * completions moved past its last finish tag, as with the completion
 * applied at once and the timer fired at the deadline, not at that last
 * finish tag (a cancelled anticipation's place).
 */
TEST(late_section_ends_a_passed_anticipation_first)
{
	u64 v_eager, v_posted;

	CHECK_EQ(late_section_tag(false, &v_eager), 3000);
	CHECK_EQ(late_section_tag(true, &v_posted), 3000);
	CHECK_EQ(v_posted, v_eager);
}

/* ---- dispatch ---- */

TEST(dispatch_in_start_tag_order)
{
	struct sim *m = sim_new(6, FFQ_MAX_DEPTH, 0, 0, 0);
	unsigned int i, n = 0, step;
	u64 prev = 0;

	/* everything queued first: dispatched in non-decreasing tags */
	rng_seed(5);
	for (i = 0; i < 240; i++)
		sim_arrive(m, &m->tk[rng() % 6], 1 + rng() % 10000, 0, true);
	while (sim_pick(m) == FFQ_PICK_TASK) {
		CHECK(m->last_start >= prev);
		prev = m->last_start;
		n++;
	}
	CHECK_EQ(n, 240);
	CHECK_EQ(m->s.inflight, 240);
	CHECK_EQ(sim_pick(m), FFQ_PICK_EMPTY);
	for (i = 0; i < 6; i++)
		while (m->tk[i].nf)
			sim_complete(m, &m->tk[i], m->tk[i].nf - 1);

	/*
	 * Interleaved with arrivals and completions, each dispatch is of
	 * the smallest start tag queued (sim_pick() checks it).
	 */
	for (step = 0; step < 20000 && !m->failed; step++) {
		struct stask *k = &m->tk[rng() % 6];

		switch (rng() % 3) {
		case 0:
			if (k->nq < QCAP)
				sim_arrive(m, k, 1 + rng() % 10000, 0, true);
			break;
		case 1:
			sim_pick(m);
			break;
		case 2:
			if (k->nf)
				sim_complete(m, k, rng() % k->nf);
			break;
		}
	}
	CHECK(m->ndisp > 6000);
	CHECK(!m->failed);
	free(m);
}

/* Completes the oldest request in the device of the first task with one. */
static void complete_any(struct sim *m)
{
	unsigned int i;

	for (i = 0; i < m->nt; i++) {
		if (m->tk[i].nf) {
			sim_complete(m, &m->tk[i], 0);
			return;
		}
	}
	CHECK(!"nothing in the device");
}

TEST(dispatch_stops_at_depth)
{
	struct sim *m = sim_new(2, 4, 0, 0, 0);
	struct stask *a = &m->tk[0], *b = &m->tk[1];
	unsigned int i;

	CHECK_EQ(sim_pick(m), FFQ_PICK_EMPTY);
	for (i = 0; i < 5; i++) {
		sim_arrive(m, a, 100, 0, false);
		sim_arrive(m, b, 100, 0, false);
	}
	for (i = 0; i < 4; i++)
		CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	CHECK_EQ(m->s.inflight, 4);
	CHECK_EQ(a->nf, 2);
	CHECK_EQ(b->nf, 2);
	CHECK_EQ(sim_pick(m), FFQ_PICK_FULL);
	CHECK_EQ(m->gap, 0);
	sim_complete(m, a, 1);
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	CHECK_EQ(sim_pick(m), FFQ_PICK_FULL);
	/* depth lowered below what is in the device */
	m->depth = 2;
	complete_any(m);
	CHECK_EQ(sim_pick(m), FFQ_PICK_FULL);
	complete_any(m);
	CHECK_EQ(m->s.inflight, 2);
	CHECK_EQ(sim_pick(m), FFQ_PICK_FULL);
	complete_any(m);
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	CHECK_EQ(m->s.inflight, 2);
	CHECK_EQ(sim_pick(m), FFQ_PICK_FULL);
	/* depth 0 lets nothing go */
	m->depth = 0;
	complete_any(m);
	complete_any(m);
	CHECK_EQ(m->s.inflight, 0);
	CHECK_EQ(sim_pick(m), FFQ_PICK_FULL);
	/* depth 1: one at a time */
	m->depth = 1;
	while (a->nq + b->nq) {
		CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
		CHECK_EQ(sim_pick(m), a->nq + b->nq ? FFQ_PICK_FULL :
						      FFQ_PICK_EMPTY);
		sim_complete(m, m->last, 0);
	}
	CHECK_EQ(m->ndisp, 10);
	/* nothing queued is empty, not full */
	m->depth = 0;
	CHECK_EQ(sim_pick(m), FFQ_PICK_EMPTY);
	free(m);
}

/* ---- throttle ---- */

/*
 * l has one request in the device and nothing queued; h queues 20.  With
 * throttle 5000, h may run up to 5000 ahead of l's progress (the start of
 * its request in the device), then waits.
 */
static struct sim *throttle_setup(u64 throttle)
{
	struct sim *m = sim_new(2, 100, throttle, 0, 0);
	struct stask *l = &m->tk[0], *h = &m->tk[1];
	unsigned int i;

	CHECK_EQ(sim_arrive(m, l, 1000, 0, true), 0);
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	CHECK(m->last == l);
	for (i = 0; i < 20; i++)
		CHECK_EQ(sim_arrive(m, h, 1000, 0, true), i * 1000);
	return m;
}

TEST(throttle_holds_a_task_too_far_ahead)
{
	struct sim *m = throttle_setup(5000);
	struct stask *l = &m->tk[0], *h = &m->tk[1];
	struct ffq_task *t;
	unsigned int i;
	u64 gap;

	for (i = 0; i <= 5; i++) {
		CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
		CHECK(m->last == h);
		CHECK_EQ(m->gap, i * 1000);
	}
	CHECK_EQ(sim_pick(m), FFQ_PICK_THROTTLED);
	CHECK_EQ(m->gap, 6000);
	CHECK_EQ(ffq_pick(&m->s, 100, 6000, 0, &t, &gap), FFQ_PICK_TASK);
	CHECK(t == &h->t);
	CHECK_EQ(gap, 6000);
	CHECK_EQ(ffq_pick(&m->s, 100, 5999, 0, &t, &gap), FFQ_PICK_THROTTLED);
	CHECK(!t);
	CHECK_EQ(gap, 6000);
	/* h's own completions do not help: l is still behind */
	while (h->nf)
		sim_complete(m, h, 0);
	CHECK_EQ(sim_pick(m), FFQ_PICK_THROTTLED);
	CHECK_EQ(m->gap, 6000);
	/* l's request completes, l is inactive: h goes */
	sim_complete(m, l, 0);
	CHECK(!ffq_task_active(&l->t));
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	CHECK(m->last == h);
	CHECK_EQ(m->gap, 0);
	CHECK(!m->failed);
	free(m);
}

TEST(throttle_released_when_the_laggard_queues)
{
	struct sim *m = throttle_setup(5000);
	struct stask *l = &m->tk[0], *h = &m->tk[1];
	unsigned int i;

	for (i = 0; i <= 5; i++)
		CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	CHECK_EQ(sim_pick(m), FFQ_PICK_THROTTLED);
	/*
	 * l queues its next request while the first is still in the device:
	 * its head is the smallest queued tag, so it goes (no deadlock),
	 * and with its progress at 1000, h is 5000 ahead: h goes too.
	 */
	CHECK_EQ(sim_arrive(m, l, 1000, 0, true), 1000);
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	CHECK(m->last == l);
	CHECK_EQ(m->last_start, 1000);
	CHECK_EQ(m->gap, 0);
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	CHECK(m->last == h);
	CHECK_EQ(m->last_start, 6000);
	CHECK_EQ(m->gap, 5000);
	CHECK_EQ(sim_pick(m), FFQ_PICK_THROTTLED);
	CHECK_EQ(m->gap, 6000);
	/*
	 * l, throttled itself?  No: its own queued head is the minimum, so
	 * it can always dispatch, however far behind h is.
	 */
	for (i = 0; i < 3; i++) {
		CHECK_EQ(sim_arrive(m, l, 1000, 0, true), 2000 + i * 1000);
		CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
		CHECK(m->last == l);
		CHECK_EQ(m->gap, 0);
	}
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);	/* 7000 - 4000 <= 5000 */
	CHECK(m->last == h);
	CHECK(!m->failed);
	free(m);
}

TEST(throttle_zero_is_off)
{
	struct sim *m = throttle_setup(0);
	struct stask *h = &m->tk[1];
	unsigned int i;

	for (i = 0; i < 20; i++) {
		CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
		CHECK(m->last == h);
		CHECK_EQ(m->gap, i * 1000);
	}
	CHECK_EQ(sim_pick(m), FFQ_PICK_EMPTY);
	CHECK_EQ(m->gap, 0);
	free(m);
}

/* ---- anticipation ---- */

TEST(anticipation_starts_only_when_it_should)
{
	struct ffq_sched s;
	struct ffq_task t;

	ffq_sched_init(&s);

	/* synchronous, nothing else outstanding */
	ffq_task_init(&t);
	t.last_finish = 4321;
	CHECK(ffq_complete(&s, &t, true, 1000, 20000, 2000));
	CHECK_EQ(t.flags, FFQ_T_ANTIC | FFQ_T_BLOCKING);
	CHECK_EQ(t.antic_start, 4321);
	CHECK_EQ(t.antic_until, 21000);
	CHECK_EQ(t.block_until, 3000);
	CHECK(ffq_task_active(&t));
	/* block_ns 0: anticipates without blocking */
	ffq_task_init(&t);
	CHECK(ffq_complete(&s, &t, true, 1000, 20000, 0));
	CHECK_EQ(t.flags, FFQ_T_ANTIC);
	CHECK_EQ(t.block_until, 1000);		/* paces from now */
	CHECK_EQ(t.antic_until, 21000);
	/* blocking is never longer than anticipation */
	ffq_task_init(&t);
	CHECK(ffq_complete(&s, &t, true, 1000, 20000, 50000));
	CHECK_EQ(t.block_until, 21000);
	CHECK_EQ(t.antic_until, 21000);
	/* asynchronous */
	ffq_task_init(&t);
	CHECK(!ffq_complete(&s, &t, false, 1000, 20000, 2000));
	CHECK_EQ(t.flags, 0);
	/* other requests outstanding */
	ffq_task_init(&t);
	t.nr_out = 1;
	CHECK(!ffq_complete(&s, &t, true, 1000, 20000, 2000));
	CHECK_EQ(t.flags, 0);
	/* anticipation off */
	ffq_task_init(&t);
	CHECK(!ffq_complete(&s, &t, true, 1000, 0, 2000));
	CHECK_EQ(t.flags, 0);
	CHECK(!ffq_task_active(&t));
	/* exited */
	ffq_task_init(&t);
	CHECK(!ffq_exit(&t));
	CHECK(!ffq_complete(&s, &t, true, 1000, 20000, 2000));
	CHECK_EQ(t.flags, FFQ_T_EXITED);
	/* an arrival ends it */
	ffq_task_init(&t);
	CHECK(ffq_complete(&s, &t, true, 1000, 20000, 2000));
	CHECK(ffq_arrive(&t));
	CHECK_EQ(t.flags, 0);
	CHECK(!ffq_arrive(&t));
}

/*
 * h has requests tagged 0, 1000, 2000, 3000; l one tagged 0 of charge 500.
 * h(0) and l(0) are in the device (depth 2); l's completes at 5000 ns and
 * l anticipates with start tag 500, blocking until 7000 ns, holding
 * virtual time until 25000 ns.
 */
static struct sim *antic_setup(void)
{
	struct sim *m = sim_new(2, 2, 0, 20000, 2000);
	struct stask *l = &m->tk[0], *h = &m->tk[1];
	unsigned int i;

	m->now = 1000;
	for (i = 0; i < 4; i++)
		CHECK_EQ(sim_arrive(m, h, 1000, 0, true), i * 1000);
	CHECK_EQ(sim_arrive(m, l, 500, 0, true), 0);
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	CHECK_EQ(sim_pick(m), FFQ_PICK_FULL);
	CHECK_EQ(l->nf, 1);
	CHECK_EQ(h->nf, 1);
	m->now = 5000;
	sim_complete(m, l, 0);
	CHECK(m->antic_started);
	CHECK_EQ(l->t.flags, FFQ_T_ANTIC | FFQ_T_BLOCKING);
	CHECK_EQ(l->t.antic_start, 500);
	CHECK_EQ(l->t.antic_start, l->t.last_finish);
	CHECK_EQ(l->t.antic_until, 25000);
	CHECK_EQ(l->t.block_until, 7000);
	CHECK_EQ(ffq_next_deadline(&m->s), 7000);
	CHECK(m->s.block.root == &l->t.block);
	CHECK_EQ(m->s.block.root->key, 500);
	CHECK(ffq_hnode_linked(&m->s.vt, &l->t.vt));
	CHECK_EQ(l->t.vt.key, 500);
	CHECK_EQ(m->s.vtime, 0);		/* h(0) in the device */
	return m;
}

TEST(anticipation_blocks_then_holds_vtime_then_expires)
{
	struct sim *m = antic_setup();
	struct stask *l = &m->tk[0], *h = &m->tk[1];

	/* l's hypothetical 500 goes before h's 1000: the device waits */
	CHECK_EQ(sim_pick(m), FFQ_PICK_ANTIC);
	m->now = 6999;
	sim_timers(m);
	CHECK_EQ(m->unblocks + m->expiries, 0);
	CHECK_EQ(sim_pick(m), FFQ_PICK_ANTIC);
	/* blocking ends; the hypothetical request still holds vtime */
	m->now = 7000;
	CHECK(ffq_timer_due(&m->s, m->now) == &l->t);
	CHECK_EQ(ffq_timer_fire(&m->s, &l->t, m->now), FFQ_TIMER_UNBLOCK);
	sim_check(m);
	CHECK(!ffq_timer_due(&m->s, m->now));
	CHECK_EQ(l->t.flags, FFQ_T_ANTIC);
	CHECK(!m->s.block.root);
	CHECK_EQ(ffq_next_deadline(&m->s), 25000);
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	CHECK(m->last == h);
	CHECK_EQ(m->last_start, 1000);
	sim_complete(m, h, 0);			/* h(0) */
	CHECK_EQ(m->s.vtime, 500);		/* held by l */
	sim_complete(m, h, 0);			/* h(1000) */
	CHECK_EQ(m->s.vtime, 500);
	CHECK(ffq_task_active(&l->t));
	m->now = 24999;
	sim_timers(m);
	CHECK_EQ(m->expiries, 0);
	/* anticipation ends: l inactive, virtual time moves on */
	m->now = 25000;
	CHECK(ffq_timer_due(&m->s, m->now) == &l->t);
	CHECK_EQ(ffq_timer_fire(&m->s, &l->t, m->now), FFQ_TIMER_EXPIRE);
	sim_check(m);
	CHECK_EQ(l->t.flags, 0);
	CHECK(!ffq_task_active(&l->t));
	CHECK_EQ(nr_linked(m, l), 0);
	CHECK_EQ(ffq_next_deadline(&m->s), 0);
	CHECK_EQ(m->s.vtime, 2000);		/* h's queued head */
	/* l's next request lost its place: it starts at virtual time */
	CHECK_EQ(sim_arrive(m, l, 500, 0, true), 2000);
	CHECK(!m->failed);
	free(m);
}

/*
 * The same with depth 3: a blocking anticipation keeps a slot for l's
 * next request instead of idling the device.  h's 1000 may take the
 * second free slot; with h(0) and h(1000) in the device the last one is
 * l's, and h's 2000 waits for it; a completion frees a slot again.
 */
TEST(anticipation_blocks_only_the_slot_it_keeps)
{
	struct sim *m = antic_setup();
	struct stask *h = &m->tk[1];

	m->depth = 3;
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	CHECK(m->last == h);
	CHECK_EQ(m->last_start, 1000);
	CHECK_EQ(m->s.inflight, 2);
	CHECK_EQ(sim_pick(m), FFQ_PICK_ANTIC);
	sim_complete(m, h, 0);			/* h(0) */
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	CHECK_EQ(m->last_start, 2000);
	CHECK_EQ(sim_pick(m), FFQ_PICK_ANTIC);
	/* a depth far above the load: anticipation never holds dispatch */
	m->depth = 256;
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	CHECK_EQ(m->last_start, 3000);
	CHECK_EQ(sim_pick(m), FFQ_PICK_EMPTY);
	CHECK(!m->failed);
	free(m);
}

TEST(anticipation_fulfilled_keeps_the_place)
{
	struct sim *m = antic_setup();
	struct stask *l = &m->tk[0], *h = &m->tk[1];
	u64 start;

	CHECK_EQ(sim_pick(m), FFQ_PICK_ANTIC);
	m->now = 6000;
	sim_complete(m, h, 0);
	CHECK_EQ(m->s.vtime, 500);
	/* l's next request arrives: it starts at its last finish */
	start = ffq_tag(&m->s, &l->t, 500);
	CHECK_EQ(start, 500);
	CHECK(ffq_arrive(&l->t));
	CHECK_EQ(l->t.flags, 0);
	l->q[0] = (struct srq){ .start = start, .charge = 500, .sync = true };
	l->nq = 1;
	sim_facts(m, l);
	ffq_update(&m->s, &l->t);
	sim_check(m);
	CHECK_EQ(ffq_next_deadline(&m->s), 0);
	CHECK(!m->s.block.root);
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	CHECK(m->last == l);
	CHECK_EQ(m->last_start, 500);
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	CHECK(m->last == h);
	CHECK(!m->failed);
	free(m);
}

/*
 * An anticipated start tag equal to the next queued one does not block.
 * Depth 2, so that the slot l's anticipation keeps is the last one free
 * and the start tags decide.
 */
TEST(anticipation_blocks_only_a_later_start)
{
	struct sim *m = sim_new(2, 2, 0, 20000, 2000);
	struct stask *l = &m->tk[0], *h = &m->tk[1];

	CHECK_EQ(sim_arrive(m, l, 1000, 0, true), 0);
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	CHECK_EQ(sim_arrive(m, h, 1000, 0, true), 0);
	CHECK_EQ(sim_arrive(m, h, 1000, 0, true), 1000);
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);	/* h(0) */
	sim_complete(m, l, 0);
	CHECK(m->antic_started);
	CHECK_EQ(l->t.antic_start, 1000);
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);	/* h(1000): not later */
	CHECK(m->last == h);
	CHECK_EQ(sim_arrive(m, h, 1000, 0, true), 2000);
	CHECK_EQ(sim_pick(m), FFQ_PICK_FULL);
	sim_complete(m, h, 0);			/* h(0) */
	CHECK_EQ(sim_pick(m), FFQ_PICK_ANTIC);	/* h(2000): later */
	CHECK(!m->failed);
	free(m);
}

/*
 * A light task at iodepth 1 thinks 500 us after each completion (less than
 * the 2 ms block time, more than the 100 us service time) against a heavy
 * task keeping 32 outstanding, depth 1.  Returns the light task's share of
 * the dispatches, in percent.
 */
static unsigned long light_share(u64 antic, u64 block, unsigned long *idle)
{
	struct sim *m = sim_new(2, 1, (u64)FFQ_DEFAULT_THROTTLE_US * 1000,
				antic, block);
	struct stask *l = &m->tk[0], *h = &m->tk[1];
	unsigned long share;

	sim_workload(l, 0, true, 500000, 100000, 100000, true);
	sim_workload(h, 32, false, 0, 100000, 100000, true);
	sim_start(m);
	sim_run(m, 4000);
	CHECK_EQ(m->ndisp, 4000);
	CHECK(!m->failed);
	share = pct(l->ndisp, m->ndisp);
	*idle = m->npick[FFQ_PICK_ANTIC];
	free(m);
	return share;
}

TEST(deceptively_idle_task_keeps_its_share)
{
	unsigned long with, without, idle_with, idle_without;

	with = light_share((u64)FFQ_DEFAULT_ANTIC_US * 1000,
			   (u64)FFQ_DEFAULT_ANTIC_BLOCK_US * 1000, &idle_with);
	without = light_share(0, 0, &idle_without);
	CHECK(with >= 40);
	CHECK(with <= 50);
	CHECK(without < with);
	CHECK(without <= 25);
	CHECK(idle_with > 1000);
	CHECK_EQ(idle_without, 0);
}

/*
 * The throttle waits for an anticipated task only while its anticipation
 * blocks; then the task paces the others.  l's request (0) is in the
 * device, h's 0..3000 went and its 4000 is throttled (3000 ahead at most).
 * l's request completes: l anticipates and blocks, and h stays held; when
 * blocking ends l still holds virtual time but no longer holds h back to
 * the throttle: it paces h, whose 4000..7000 go (the throttle's 3000 of
 * charge since l's completion, and one more), its 8000 when the device's
 * 100 slots could have served the 1000 more (10 ns later).  l's next
 * request comes back at its place and restrains h again.
 */
TEST(throttle_waits_for_an_anticipation_while_it_blocks_then_it_paces)
{
	struct sim *m = sim_new(2, 100, 3000, 20000, 2000);
	struct stask *l = &m->tk[0], *h = &m->tk[1];
	unsigned int i;

	CHECK_EQ(sim_arrive(m, l, 1000, 0, true), 0);
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	for (i = 0; i < 20; i++)
		CHECK_EQ(sim_arrive(m, h, 1000, 0, true), i * 1000);
	for (i = 0; i < 4; i++)
		CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	CHECK_EQ(sim_pick(m), FFQ_PICK_THROTTLED);
	m->now = 5000;
	sim_complete(m, l, 0);
	CHECK(m->antic_started);
	CHECK_EQ(l->t.flags, FFQ_T_ANTIC | FFQ_T_BLOCKING);
	CHECK(ffq_task_restrains(&l->t));
	CHECK_EQ(sim_pick(m), FFQ_PICK_THROTTLED);
	CHECK_EQ(m->gap, 4000);
	/* blocking ends: h goes, l keeps its place in virtual time */
	m->now = 7000;
	sim_timers(m);
	CHECK_EQ(m->unblocks, 1);
	CHECK_EQ(l->t.flags, FFQ_T_ANTIC);
	CHECK(ffq_task_active(&l->t));
	CHECK(!ffq_task_restrains(&l->t));
	CHECK(ffq_task_paces(&l->t));
	CHECK_EQ(l->t.block_until, 7000);
	for (i = 4; i <= 7; i++) {
		CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
		CHECK(m->last == h);
		CHECK_EQ(m->last_start, i * 1000);
	}
	CHECK_EQ(sim_pick(m), FFQ_PICK_THROTTLED);
	CHECK_EQ(m->gap, 7000);
	m->now = 7009;
	CHECK_EQ(sim_pick(m), FFQ_PICK_THROTTLED);
	m->now = 7010;
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	CHECK_EQ(m->last_start, 8000);
	CHECK_EQ(m->s.vtime, 0);		/* h(0) still in the device */
	while (h->nf)
		sim_complete(m, h, 0);
	CHECK_EQ(m->s.vtime, 1000);		/* l's hypothetical request */
	/* l comes back at its last finish tag, first in line */
	CHECK_EQ(sim_arrive(m, l, 1000, 0, true), 1000);
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	CHECK(m->last == l);
	CHECK_EQ(m->last_start, 1000);
	/* and holds h (next: 9000) within 3000 of its progress again */
	CHECK_EQ(sim_pick(m), FFQ_PICK_THROTTLED);
	CHECK_EQ(m->gap, 8000);
	CHECK(!m->failed);
	free(m);
}

/*
 * A light task at iodepth 1 that thinks 5 ms after each completion (more
 * than the 2 ms block time, less than the 20 ms anticipation) beside a
 * heavy one keeping 32 outstanding, depth 8 (the device serves each in
 * 100 us whatever the load): the light task never waits, and the heavy
 * one is not held to its pace by the throttle (here 1 ms of charge, so
 * that it would show within the run).  Returns the heavy task's share of
 * the dispatches, in percent.
 */
static unsigned long heavy_share_beside_a_thinker(unsigned long *throttled)
{
	struct sim *m = sim_new(2, 8, 1000000, 20000000, 2000000);
	struct stask *l = &m->tk[0], *h = &m->tk[1];
	unsigned long share;

	sim_workload(l, 0, true, 5000000, 100000, 100000, true);
	sim_workload(h, 32, false, 0, 100000, 100000, true);
	sim_start(m);
	sim_run(m, 20000);
	CHECK_EQ(m->ndisp, 20000);
	CHECK(!m->failed);
	share = pct(h->ndisp, m->ndisp);
	*throttled = m->npick[FFQ_PICK_THROTTLED];
	free(m);
	return share;
}

TEST(thinking_task_does_not_hold_others_to_its_pace)
{
	unsigned long throttled, share = heavy_share_beside_a_thinker(&throttled);

	/*
	 * Each 5.1 ms cycle of the light task: its request, then 3 ms of
	 * anticipation that blocks nothing, in which the heavy task (8 slots
	 * of 100 us) dispatches 240 requests beyond the throttle's 10.
	 */
	CHECK(share >= 99);
	/* while the light task's request or blocking lasts, it still holds */
	CHECK(throttled > 0);
}

/* ---- timers ---- */

#define TN	64

struct ttask {
	struct ffq_task t;
	u64 unblocked;		/* when it was unblocked, 0: never */
	u64 expired;		/* when it expired, 0: never */
	bool cancelled;
	bool blocks;		/* expected to fire UNBLOCK */
};

static struct ttask *ttask_of(struct ffq_task *t)
{
	return ffq_container_of(t, struct ttask, t);
}

static u64 timer_key(const struct ffq_task *t)
{
	return (t->flags & FFQ_T_BLOCKING) ? t->block_until : t->antic_until;
}

/* TN tasks anticipate with random deadlines; some are cancelled. */
static void timers_setup(struct ffq_sched *s, struct ttask *tk)
{
	unsigned int i;

	ffq_sched_init(s);
	for (i = 0; i < TN; i++) {
		struct ffq_task *t = &tk[i].t;
		u64 now = 1000000 + rng() % 1000;
		u64 antic = 1 + rng() % 100000;
		u64 block = rng() % 4 ? rng() % 120000 : 0;

		memset(&tk[i], 0, sizeof(tk[i]));
		ffq_task_init(t);
		t->last_finish = rng() % 1000000;
		s->max_finish = 1000000;
		CHECK(ffq_complete(s, t, true, now, antic, block));
		tk[i].blocks = block && block < antic;
		CHECK_EQ(!!(t->flags & FFQ_T_BLOCKING), !!block);
		ffq_update(s, t);
	}
	CHECK_EQ(s->timer.nr, TN);
	for (i = 0; i < TN; i += 4) {
		struct ffq_task *t = &tk[i].t;

		CHECK(ffq_arrive(t));
		tk[i].cancelled = true;
		t->nr_queued = 1;
		t->head_start = s->vtime;
		t->nr_out = 1;
		ffq_update(s, t);
		CHECK(!ffq_hnode_linked(&s->timer, &t->timer));
		CHECK(!ffq_hnode_linked(&s->block, &t->block));
	}
	CHECK_EQ(s->timer.nr, TN - TN / 4);
}

static u64 timers_brute_min(const struct ttask *tk)
{
	u64 min = U64_MAX;
	unsigned int i;

	for (i = 0; i < TN; i++)
		if ((tk[i].t.flags & FFQ_T_ANTIC) && timer_key(&tk[i].t) < min)
			min = timer_key(&tk[i].t);
	return min == U64_MAX ? 0 : min;
}

TEST(timers_fire_in_deadline_order)
{
	static struct ttask tk[TN];
	struct ffq_sched s;
	struct ffq_task *t;
	unsigned int i, fired = 0, expect = 0, nblock;
	u64 d, last = 0;

	rng_seed(8);
	timers_setup(&s, tk);
	/* fire each deadline exactly when it falls due */
	while ((d = ffq_next_deadline(&s))) {
		CHECK_EQ(d, timers_brute_min(tk));
		CHECK(d >= last);
		CHECK(!ffq_timer_due(&s, d - 1));
		last = d;
		while ((t = ffq_timer_due(&s, d))) {
			struct ttask *k = ttask_of(t);

			CHECK_EQ(timer_key(t), d);
			if (ffq_timer_fire(&s, t, d) == FFQ_TIMER_UNBLOCK) {
				CHECK(k->blocks && !k->unblocked);
				CHECK_EQ(d, t->block_until);
				CHECK(d < t->antic_until);
				CHECK_EQ(t->flags, FFQ_T_ANTIC);
				CHECK(!ffq_hnode_linked(&s.block, &t->block));
				CHECK(ffq_hnode_linked(&s.vt, &t->vt));
				k->unblocked = d;
			} else {
				CHECK(!k->expired);
				CHECK_EQ(d, t->antic_until);
				CHECK_EQ(t->flags, 0);
				CHECK(!ffq_task_active(t));
				k->expired = d;
			}
			fired++;
		}
		for (i = 0, nblock = 0; i < TN; i++)
			nblock += (tk[i].t.flags & FFQ_T_BLOCKING) != 0;
		CHECK_EQ(s.block.nr, nblock);
	}
	for (i = 0; i < TN; i++) {
		if (tk[i].cancelled) {
			CHECK(!tk[i].unblocked && !tk[i].expired);
			continue;
		}
		expect += 1 + tk[i].blocks;
		CHECK(tk[i].expired);
		CHECK_EQ(!!tk[i].unblocked, tk[i].blocks);
		if (tk[i].blocks)
			CHECK(tk[i].unblocked < tk[i].expired);
	}
	CHECK_EQ(s.timer.nr, 0);
	CHECK_EQ(s.block.nr, 0);
	CHECK_EQ(s.vt.nr, TN / 4);	/* the cancelled ones, queued */
	CHECK_EQ(fired, expect);
	CHECK(expect >= TN - TN / 4 + 8);
}

/* Timers served late, in coarse steps: still in order, none lost. */
TEST(timers_fired_late_stay_in_order)
{
	static struct ttask tk[TN];
	struct ffq_sched s;
	struct ffq_task *t;
	unsigned int i;
	u64 now, last;

	rng_seed(9);
	timers_setup(&s, tk);
	for (now = 1000000; s.timer.nr; now += 7919) {
		last = 0;
		while ((t = ffq_timer_due(&s, now))) {
			struct ttask *k = ttask_of(t);

			CHECK(timer_key(t) >= last);
			CHECK(timer_key(t) <= now);
			last = timer_key(t);
			if (ffq_timer_fire(&s, t, now) == FFQ_TIMER_UNBLOCK) {
				CHECK(now < t->antic_until);
				k->unblocked = now;
			} else {
				CHECK(now >= t->antic_until);
				k->expired = now;
			}
		}
		CHECK(!ffq_next_deadline(&s) || ffq_next_deadline(&s) > now);
	}
	for (i = 0; i < TN; i++) {
		if (tk[i].cancelled)
			continue;
		CHECK(tk[i].expired >= tk[i].t.antic_until);
		CHECK(tk[i].expired < tk[i].t.antic_until + 7919);
		CHECK(!tk[i].unblocked || tk[i].unblocked < tk[i].expired);
	}
}

/* ---- exit ---- */

TEST(exit_with_requests_outstanding)
{
	struct sim *m = sim_new(2, 8, 0, 20000, 0);
	struct stask *x = &m->tk[0], *y = &m->tk[1];
	unsigned int i;

	for (i = 0; i < 5; i++)
		sim_arrive(m, x, 1000, 0, true);
	sim_arrive(m, y, 1000, 0, true);
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	CHECK_EQ(x->nf + y->nf, 3);
	/* x exits: 3 queued, 2 in the device */
	CHECK(!ffq_exit(&x->t));
	ffq_update(&m->s, &x->t);
	sim_check(m);
	CHECK(ffq_task_active(&x->t));
	CHECK(ffq_hnode_linked(&m->s.vt, &x->t.vt));
	CHECK(ffq_hnode_linked(&m->s.ready, &x->t.ready));
	/* y's only request completes: it anticipates */
	sim_complete(m, y, 0);
	CHECK(m->antic_started);
	/* x's queued requests still go, one is freed (merged away) */
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	CHECK(m->last == x);
	sim_remove_queued(m, x, 1);
	while (x->nf > 1) {
		sim_complete(m, x, x->nf - 1);
		CHECK(!m->antic_started);
		CHECK(ffq_task_active(&x->t));
	}
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	sim_complete(m, x, 0);
	CHECK(ffq_task_active(&x->t));
	sim_complete(m, x, 0);
	/* the last synchronous completion of an exited task: no anticipation */
	CHECK(!m->antic_started);
	CHECK(!ffq_task_active(&x->t));
	CHECK_EQ(nr_linked(m, x), 0);
	/* y exits while anticipating: that ends too */
	CHECK(y->t.flags & FFQ_T_ANTIC);
	CHECK(ffq_exit(&y->t));
	ffq_update(&m->s, &y->t);
	sim_check(m);
	CHECK_EQ(nr_linked(m, y), 0);
	CHECK_EQ(m->s.inflight, 0);
	check_all_heaps_empty(&m->s);
	CHECK_EQ(m->s.max_finish, 5000);
	CHECK_EQ(m->s.vtime, m->s.max_finish);
	CHECK(!m->failed);
	free(m);
}

/*
 * Requests requeued to the driver leave the scheduler but stay counted in
 * nr_out: the task stays active with its last dispatched start tag.
 */
TEST(requeued_requests_keep_the_task_active)
{
	struct sim *m = sim_new(2, 8, 0, 20000, 2000);
	struct stask *a = &m->tk[0], *b = &m->tk[1];

	CHECK_EQ(sim_arrive(m, a, 1000, 0, true), 0);
	CHECK_EQ(sim_arrive(m, a, 1000, 0, true), 1000);
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	/* both go back to the driver */
	a->nf = 0;
	a->nrequeued = 2;
	m->s.inflight = 0;
	sim_facts(m, a);
	ffq_update(&m->s, &a->t);
	CHECK(ffq_task_active(&a->t));
	CHECK_EQ(a->t.vt.key, 1000);		/* last_start */
	CHECK_EQ(m->s.vtime, 1000);
	CHECK_EQ(sim_arrive(m, b, 1000, 0, true), 1000);
	/* freed: inactive, virtual time moves on */
	a->nrequeued = 0;
	sim_facts(m, a);
	CHECK(!ffq_complete(&m->s, &a->t, false, m->now, m->antic, m->block));
	ffq_update(&m->s, &a->t);
	CHECK(!ffq_task_active(&a->t));
	CHECK_EQ(nr_linked(m, a), 0);
	sim_check(m);
	CHECK_EQ(m->s.vtime, 1000);		/* b's queued request */
	free(m);
}

/* ---- retag ---- */

TEST(retag_moves_last_finish)
{
	struct ffq_sched s;
	struct ffq_task t;

	ffq_sched_init(&s);
	ffq_task_init(&t);
	CHECK_EQ(ffq_tag(&s, &t, 1000), 0);
	CHECK_EQ(ffq_tag(&s, &t, 1000), 1000);
	CHECK_EQ(t.last_finish, 2000);
	/* grows: the finish tag moves by as much */
	CHECK_EQ(ffq_retag(&s, &t, 1000, 1500, true), 1500);
	CHECK_EQ(t.last_finish, 2500);
	CHECK_EQ(s.max_finish, 2500);
	CHECK_EQ(ffq_retag(&s, &t, 1500, U32_MAX, true), U32_MAX);
	CHECK_EQ(t.last_finish, 2500 + (u64)U32_MAX - 1500);
	CHECK_EQ(s.max_finish, t.last_finish);
	CHECK_EQ(ffq_retag(&s, &t, U32_MAX, 1500, true), 1500);
	CHECK_EQ(t.last_finish, 2500);
	/* max_finish is the largest given: a shrink leaves it */
	CHECK_EQ(s.max_finish, 2500 + (u64)U32_MAX - 1500);
	/* shrinks: the finish tag moves back by as much ... */
	CHECK_EQ(ffq_retag(&s, &t, 1500, 700, true), 700);
	CHECK_EQ(t.last_finish, 1700);
	/* ... but never below the start of its latest request */
	ffq_dispatched(&s, &t, 1000, 1);
	CHECK_EQ(ffq_retag(&s, &t, 1000, 100, true), 100);
	CHECK_EQ(t.last_finish, 1000);
	CHECK_EQ(ffq_retag(&s, &t, 100, 1, true), 1);
	CHECK_EQ(t.last_finish, 1000);
	CHECK_EQ(ffq_retag(&s, &t, 1, 1, true), 1);
	CHECK_EQ(t.last_finish, 1000);
	CHECK_EQ(ffq_retag(&s, &t, 1, 301, true), 301);
	CHECK_EQ(t.last_finish, 1300);
	CHECK_EQ(ffq_retag(&s, &t, 301, 1, true), 1);
	CHECK_EQ(t.last_finish, 1000);
	/*
	 * A new charge of 0 (a request merged away) comes back as 1; the
	 * finish tag gives back the whole old charge.
	 */
	CHECK_EQ(ffq_retag(&s, &t, 0, 0, true), 1);
	CHECK_EQ(t.last_finish, 1000);
	CHECK_EQ(ffq_tag(&s, &t, 5000), 1000);
	CHECK_EQ(t.last_finish, 6000);
	CHECK_EQ(ffq_retag(&s, &t, 5000, 0, true), 1);
	CHECK_EQ(t.last_finish, 1000);
}

/*
 * Shrinking a request that is not the task's latest gives nothing back:
 * the next arrival is still tagged after the finish of the latest, which
 * stays queued (the task's queue stays in tag order).  Growing one charges
 * the task; shrinking the latest gives back, down to its start tag.
 */
TEST(retag_keeps_tag_order_behind_a_later_request)
{
	struct sim *m = sim_new(1, 8, 0, 0, 0);
	struct stask *a = &m->tk[0];

	CHECK_EQ(sim_arrive(m, a, 1000, 0, true), 0);
	CHECK_EQ(sim_arrive(m, a, 100, 0, true), 1000);
	/* a(0) merged with something smaller: 1000 -> 100, no refund */
	a->q[0].charge = ffq_retag(&m->s, &a->t, 1000, 100, false);
	CHECK_EQ(a->t.last_finish, 1100);
	CHECK_EQ(sim_arrive(m, a, 500, 0, true), 1100);
	/* an earlier request grows: the task pays */
	a->q[0].charge = ffq_retag(&m->s, &a->t, 100, 300, false);
	CHECK_EQ(a->t.last_finish, 1800);
	/* the latest shrinks: given back, down to its start tag at most */
	a->q[2].charge = ffq_retag(&m->s, &a->t, 500, 1, true);
	CHECK_EQ(a->t.last_finish, 1301);
	a->q[2].charge = ffq_retag(&m->s, &a->t, 4000, 1, true);
	CHECK_EQ(a->t.last_finish, 1100);
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	CHECK_EQ(sim_pick(m), FFQ_PICK_TASK);
	CHECK_EQ(a->t.last_start, 1100);
	CHECK(a->t.last_finish >= a->t.last_start);
	free(m);
}

/* ---- per-request word ---- */

TEST(request_word_round_trip)
{
	static const u32 charges[] = { 0, 1, 4096, 0x80000000U, U32_MAX };
	static const unsigned int slots[] = { 0, 1, FFQ_MAX_DEPTH, 0xffff };
	static const unsigned int flags[] = {
		0, FFQ_RQ_OWNED, FFQ_RQ_QUEUED | FFQ_RQ_ON_RB,
		FFQ_RQ_OWNED | FFQ_RQ_QUEUED | FFQ_RQ_ON_RB | FFQ_RQ_TAGGED |
		FFQ_RQ_SYNC, 0xffff,
	};
	unsigned int c, sl, f, i;

	for (c = 0; c < ARRAY_SIZE(charges); c++)
		for (sl = 0; sl < ARRAY_SIZE(slots); sl++)
			for (f = 0; f < ARRAY_SIZE(flags); f++) {
				u64 w = ffq_rq_word(charges[c], slots[sl],
						    flags[f]);

				CHECK_EQ(ffq_rq_charge(w), charges[c]);
				CHECK_EQ(ffq_rq_slot(w), slots[sl]);
				CHECK_EQ(ffq_rq_flags(w), flags[f]);
			}
	CHECK(ffq_rq_word(0, 0, 0) == 0);
	CHECK(ffq_rq_word(U32_MAX, 0xffff, 0xffff) == U64_MAX);
	/* out-of-range slot and flags bits stay out of the other fields */
	CHECK_EQ(ffq_rq_slot(ffq_rq_word(7, 0x1ffff, 0)), 0xffff);
	CHECK_EQ(ffq_rq_flags(ffq_rq_word(7, 0x1ffff, 0)), 0);
	CHECK_EQ(ffq_rq_flags(ffq_rq_word(7, 0, 0x30001)), 1);
	CHECK_EQ(ffq_rq_charge(ffq_rq_word(7, 0x1ffff, 0x30001)), 7);
	/* the flags are distinct bits */
	CHECK_EQ(FFQ_RQ_OWNED | FFQ_RQ_QUEUED | FFQ_RQ_ON_RB | FFQ_RQ_TAGGED |
		 FFQ_RQ_SYNC, 0x1f);
	/* setting one field of a word leaves the others */
	rng_seed(11);
	for (i = 0; i < 10000; i++) {
		u32 ch = rng();
		unsigned int s = rng() & 0xffff, fl = rng() & 0xffff;
		u64 w = ffq_rq_word(ch, s, fl);

		w = ffq_rq_word(ffq_rq_charge(w), ffq_rq_slot(w) + 0,
				ffq_rq_flags(w) | FFQ_RQ_TAGGED);
		CHECK_EQ(ffq_rq_charge(w), ch);
		CHECK_EQ(ffq_rq_slot(w), s);
		CHECK_EQ(ffq_rq_flags(w), fl | FFQ_RQ_TAGGED);
	}
}

UNIT_MAIN(
	UNIT(heap_root_and_inner_removal),
	UNIT(heap_rekey_changes_a_leaf_or_lone_root_in_place),
	UNIT(heap_random_against_brute_force),
	UNIT(cost_is_the_line_through_the_calibrated_points),
	UNIT(cost_is_never_below_one),
	UNIT(default_costs_are_ssdsims),
	UNIT(charge_scales_by_weight),
	UNIT(weight_from_ioprio),
	UNIT(learn_starts_at_the_defaults),
	UNIT(learn_points_by_size),
	UNIT(learn_read_is_the_floor),
	UNIT(learn_write_is_its_drain_or_its_floor),
	UNIT(learn_write_keeps_its_drain_while_writes_find_room),
	UNIT(learn_write_does_not_depend_on_the_devices_order),
	UNIT(learn_write_a_drain_frees_room_for_several),
	UNIT(learn_sample_says_when_a_cost_may_move),
	UNIT(learn_scales_other_sizes_to_the_point),
	UNIT(learn_set_points_take_precedence),
	UNIT(learn_clamps_and_survives_extremes),
	UNIT(learn_moves_by_a_sixteenth),
	UNIT(tags_start_at_vtime_or_last_finish),
	UNIT(idle_task_returns_without_credit),
	UNIT(vtime_held_by_slow_request_in_device),
	UNIT(vtime_is_min_outstanding_start_random),
	UNIT(deferred_anticipation_changes_nothing_random),
	UNIT(posted_completions_change_nothing_random),
	UNIT(lone_arrivals_change_nothing_random),
	UNIT(late_section_ends_a_passed_anticipation_first),
	UNIT(dispatch_in_start_tag_order),
	UNIT(dispatch_stops_at_depth),
	UNIT(throttle_holds_a_task_too_far_ahead),
	UNIT(throttle_released_when_the_laggard_queues),
	UNIT(throttle_zero_is_off),
	UNIT(anticipation_starts_only_when_it_should),
	UNIT(anticipation_blocks_then_holds_vtime_then_expires),
	UNIT(anticipation_blocks_only_the_slot_it_keeps),
	UNIT(anticipation_fulfilled_keeps_the_place),
	UNIT(anticipation_blocks_only_a_later_start),
	UNIT(throttle_waits_for_an_anticipation_while_it_blocks_then_it_paces),
	UNIT(thinking_task_does_not_hold_others_to_its_pace),
	UNIT(deceptively_idle_task_keeps_its_share),
	UNIT(timers_fire_in_deadline_order),
	UNIT(timers_fired_late_stay_in_order),
	UNIT(exit_with_requests_outstanding),
	UNIT(requeued_requests_keep_the_task_active),
	UNIT(retag_moves_last_finish),
	UNIT(retag_keeps_tag_order_behind_a_later_request),
	UNIT(request_word_round_trip)
)
