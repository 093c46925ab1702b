// SPDX-License-Identifier: GPL-2.0
/*
 * Userspace tests of the ssdsim flash model (ssdsim/ssdsim-model.c):
 * parameter checks, geometry, die/channel timing, FTL placement, write
 * buffer, FUA/flush, read/program interference, GC and its invariants,
 * discard, the mapping cache and the hook points.
 * Built by tests/run with -I tests/unit -I ssdsim, ASan and UBSan.
 */
#include "unit.h"
#include "ssdsim-model.c"

/* 2 channels x 2 dies, 8-page blocks, 16 data blocks per die. */
static struct ssdm_params small(void)
{
	struct ssdm_params p = {
		.channels = 2,
		.dies_per_channel = 2,
		.page_size = 4096,
		.pages_per_block = 8,
		.capacity_bytes = 4096ULL * 8 * 4 * 16,
		.op_percent = 25,
		.gc_free_blocks = 2,
		.read_ns = 50000,
		.program_ns = 500000,
		.erase_ns = 3000000,
		.xfer_ns = 10000,
		.time_scale = 1,
	};
	return p;
}

#define TR	50000ULL
#define TP	500000ULL
#define TE	3000000ULL
#define TX	10000ULL
#define T0	1000000ULL

static int init_ok(struct ssdm *m, const struct ssdm_params *p)
{
	int ret = ssdm_init(m, p);

	CHECK_EQ(ret, 0);
	return ret;
}

/* Every FTL invariant: maps agree, valid counts, free stacks, states. */
static void check_ftl(const struct ssdm *m)
{
	u32 *count = calloc(m->blocks_per_die * m->ndies, sizeof(u32));
	u32 lpn, ppn, b, d, mapped = 0, bad = 0;

	for (lpn = 0; lpn < m->lpns; lpn++) {
		ppn = m->l2p[lpn];
		if (ppn == SSDM_NONE)
			continue;
		mapped++;
		if (ppn >= m->ppns || m->p2l[ppn] != lpn)
			bad++;
	}
	CHECK_EQ(bad, 0);
	for (ppn = 0; ppn < m->ppns; ppn++) {
		lpn = m->p2l[ppn];
		if (lpn == SSDM_NONE)
			continue;
		count[ssdm_ppn_block(m, ppn)]++;
		if (lpn >= m->lpns || m->l2p[lpn] != ppn)
			bad++;
	}
	CHECK_EQ(bad, 0);
	for (b = 0; b < m->blocks_per_die * m->ndies; b++) {
		if (count[b] != m->valid[b])
			bad++;
		if (m->bstate[b] == SSDM_BLK_FREE && m->valid[b])
			bad++;
	}
	CHECK_EQ(bad, 0);
	for (d = 0; d < m->ndies; d++) {
		const struct ssdm_die *die = &m->die[d];
		u32 i, nfree = 0;

		for (i = 0; i < die->nfree; i++) {
			b = die->free[i];
			if (b / m->blocks_per_die != d ||
			    m->bstate[b] != SSDM_BLK_FREE)
				bad++;
		}
		for (b = d * m->blocks_per_die;
		     b < (d + 1) * m->blocks_per_die; b++)
			nfree += m->bstate[b] == SSDM_BLK_FREE;
		if (nfree != die->nfree)
			bad++;
		if (die->open != SSDM_NONE &&
		    m->bstate[die->open] != SSDM_BLK_OPEN)
			bad++;
	}
	CHECK_EQ(bad, 0);
	free(count);
	(void)mapped;
}

static u32 mapped_pages(const struct ssdm *m)
{
	u32 lpn, n = 0;

	for (lpn = 0; lpn < m->lpns; lpn++)
		n += m->l2p[lpn] != SSDM_NONE;
	return n;
}

TEST(params_rejected)
{
	struct ssdm_params p;
	const char *why;
	struct ssdm m;

#define REJECT(field, value) do {					\
		p = small();						\
		p.field = value;					\
		why = NULL;						\
		CHECK_EQ(ssdm_check_params(&p, &why), -EINVAL);		\
		CHECK(why);						\
		CHECK_EQ(ssdm_init(&m, &p), -EINVAL);			\
	} while (0)
	REJECT(channels, 0);
	REJECT(dies_per_channel, 0);
	REJECT(channels, 65);
	REJECT(dies_per_channel, 65);
	p = small();
	p.channels = 16;
	p.dies_per_channel = 9;	/* 144 dies */
	CHECK_EQ(ssdm_check_params(&p, &why), -EINVAL);
	p.dies_per_channel = 8;
	CHECK_EQ(ssdm_check_params(&p, &why), 0);
	REJECT(page_size, 3000);
	REJECT(page_size, 256);
	REJECT(page_size, 131072);
	REJECT(pages_per_block, 1);
	REJECT(capacity_bytes, 4096 * 8 - 1);
	REJECT(capacity_bytes, 0);
	REJECT(time_scale, 0);
	REJECT(gc_free_blocks, 0);
	REJECT(fill_percent, 101);
	REJECT(op_percent, 401);
	REJECT(cmt_pages, 4097);
	p = small();
	p.read_ns = 4000000000U;
	CHECK_EQ(ssdm_check_params(&p, &why), 0);
	p.time_scale = 3;
	CHECK_EQ(ssdm_check_params(&p, &why), -EINVAL);
	p = small();
	p.capacity_bytes = 1ULL << 45;	/* 2^33 pages */
	CHECK_EQ(ssdm_check_params(&p, &why), -EINVAL);
	p = small();
	p.capacity_bytes = 4096 * 8;	/* exactly one block */
	CHECK_EQ(ssdm_check_params(&p, &why), 0);
#undef REJECT
}

TEST(geometry)
{
	struct ssdm_params p = small();
	struct ssdm m;

	if (init_ok(&m, &p))
		return;
	CHECK_EQ(m.ndies, 4);
	CHECK_EQ(m.lpns, 512);
	/* 512 pages x 1.25 over 4 dies of 8-page blocks: 20 blocks each */
	CHECK_EQ(m.blocks_per_die, 20);
	CHECK_EQ(m.ppns, 640);
	CHECK_EQ(m.t_read, TR);
	ssdm_destroy(&m);

	/* op 0: still the open block, the GC reserve and one of slack */
	p.op_percent = 0;
	if (init_ok(&m, &p))
		return;
	CHECK_EQ(m.blocks_per_die, 16 + 2 + 2);
	ssdm_destroy(&m);

	p = small();
	p.time_scale = 7;
	if (init_ok(&m, &p))
		return;
	CHECK_EQ(m.t_read, 7 * TR);
	CHECK_EQ(m.t_prog, 7 * TP);
	CHECK_EQ(m.t_erase, 7 * TE);
	CHECK_EQ(m.t_xfer, 7 * TX);
	ssdm_destroy(&m);
}

TEST(idle_read_latency_and_striping)
{
	struct ssdm_params p = small();
	struct ssdm m;
	u32 lpn;

	if (init_ok(&m, &p))
		return;
	for (lpn = 0; lpn < 8; lpn++)
		CHECK_EQ(ssdm_lpn_die(&m, lpn), lpn % 4);
	CHECK_EQ(ssdm_die_channel(&m, 3), 1);
	CHECK_EQ(ssdm_read(&m, T0, 5, 1), T0 + TR + TX);
	CHECK_EQ(m.st.host_read_pages, 1);
	CHECK_EQ(m.die[1].reads, 1);
	CHECK_EQ(m.die[1].busy_ns, TR + TX);
	CHECK_EQ(m.chan[1].busy_ns, TX);
	/* long after: idle again */
	CHECK_EQ(ssdm_read(&m, 2 * T0, 5, 1), 2 * T0 + TR + TX);
	CHECK_EQ(m.st.reads_delayed, 0);
	ssdm_destroy(&m);
}

TEST(dies_parallel_channel_shared)
{
	struct ssdm_params p = small();
	struct ssdm m;

	if (init_ok(&m, &p))
		return;
	/*
	 * Pages 0-3 on dies 0-3; dies 0 and 2 share channel 0, 1 and 3
	 * channel 1: the array reads overlap, the transfers queue in pairs.
	 */
	CHECK_EQ(ssdm_read(&m, T0, 0, 4), T0 + TR + 2 * TX);
	ssdm_destroy(&m);

	if (init_ok(&m, &p))
		return;
	/* pages 0 and 4 are both on die 0: one after the other */
	CHECK_EQ(ssdm_read(&m, T0, 0, 1), T0 + TR + TX);
	CHECK_EQ(ssdm_read(&m, T0, 4, 1), T0 + 2 * (TR + TX));
	ssdm_destroy(&m);

	if (init_ok(&m, &p))
		return;
	/* eight pages over four dies: two rounds */
	CHECK_EQ(ssdm_read(&m, T0, 0, 8), T0 + 2 * (TR + TX) + TX);
	ssdm_destroy(&m);
}

TEST(channel_gap_filling)
{
	struct ssdm_iv iv[3];
	struct ssdm_chan c = { .iv = iv, .n = 0, .cap = 3 };

	CHECK_EQ(ssdm_chan_reserve(&c, 0, 100, 10), 100);
	CHECK_EQ(ssdm_chan_reserve(&c, 0, 0, 10), 0);	/* before it */
	CHECK_EQ(c.n, 2);
	/* [95,105) overlaps [100,110): after it, merged */
	CHECK_EQ(ssdm_chan_reserve(&c, 0, 95, 10), 110);
	CHECK_EQ(c.n, 2);
	CHECK_EQ(c.iv[1].start, 100);
	CHECK_EQ(c.iv[1].end, 120);
	/* the gap [10,100) takes a transfer at 50 */
	CHECK_EQ(ssdm_chan_reserve(&c, 0, 50, 10), 50);
	CHECK_EQ(c.n, 3);
	/* 45 fits in no gap from 5 on: after the last, merged with it */
	CHECK_EQ(ssdm_chan_reserve(&c, 0, 5, 45), 120);
	CHECK_EQ(c.n, 3);
	CHECK_EQ(c.iv[2].start, 100);
	CHECK_EQ(c.iv[2].end, 165);
	/* [10,50) fits exactly: the three become one */
	CHECK_EQ(ssdm_chan_reserve(&c, 0, 10, 40), 10);
	CHECK_EQ(c.n, 2);
	CHECK_EQ(c.iv[0].start, 0);
	CHECK_EQ(c.iv[0].end, 60);
	CHECK_EQ(c.busy_ns, 125);
	/* full list: the earliest reservation is forgotten */
	CHECK_EQ(ssdm_chan_reserve(&c, 0, 200, 10), 200);
	CHECK_EQ(ssdm_chan_reserve(&c, 0, 300, 10), 300);
	CHECK_EQ(c.n, 3);
	CHECK_EQ(c.iv[0].start, 100);
	/* pruning: everything ended by 1000 */
	CHECK_EQ(ssdm_chan_reserve(&c, 1000, 1000, 10), 1000);
	CHECK_EQ(c.n, 1);
}

TEST(writes_round_robin_write_through)
{
	struct ssdm_params p = small();
	struct ssdm m;
	u32 lpn;

	if (init_ok(&m, &p))
		return;
	/* no buffer: a write completes when programmed */
	CHECK_EQ(ssdm_write(&m, T0, 100, 1, false), T0 + TX + TP);
	CHECK_EQ(ssdm_ppn_die(&m, m.l2p[100]), 0);
	CHECK_EQ(ssdm_write(&m, T0, 200, 7, false), T0 + 3 * TX + 2 * TP);
	for (lpn = 0; lpn < 7; lpn++)
		CHECK_EQ(ssdm_lpn_die(&m, 200 + lpn), (lpn + 1) % 4);
	/* each die fills its open block page by page */
	CHECK_EQ(m.l2p[200 + 3], m.l2p[100] + 1);
	CHECK_EQ(m.st.host_write_pages, 8);
	CHECK_EQ(m.st.pages_programmed, 8);
	CHECK_EQ(ssdm_wa_x1000(&m.st), 1000);
	check_ftl(&m);
	/* an overwrite moves the page and invalidates the old copy */
	lpn = m.l2p[100];
	ssdm_write(&m, 10 * T0, 100, 1, false);
	CHECK(m.l2p[100] != lpn);
	CHECK_EQ(m.p2l[lpn], SSDM_NONE);
	check_ftl(&m);
	ssdm_destroy(&m);
}

TEST(write_buffer_stalls_when_full)
{
	struct ssdm_params p = small();
	struct ssdm m;
	u32 i;

	p.buffer_pages = 4;
	if (init_ok(&m, &p))
		return;
	for (i = 0; i < 4; i++)
		CHECK_EQ(ssdm_write(&m, T0, i, 1, false), T0);
	CHECK_EQ(m.st.buf_stalls, 0);
	/* a buffered page is read from the buffer */
	CHECK_EQ(ssdm_read(&m, T0 + 1, 2, 1), T0 + 1);
	CHECK_EQ(m.st.buf_read_hits, 1);
	/* full: the fifth waits for the first slot to free (die 0) */
	CHECK_EQ(ssdm_write(&m, T0, 4, 1, false), T0 + TX + TP);
	CHECK_EQ(m.st.buf_stalls, 1);
	CHECK_EQ(m.st.buf_stall_ns, TX + TP);
	/* and its program starts only then: after die 0's first */
	CHECK_EQ(m.buf_until[4], T0 + TX + TP + TX + TP);
	/* once programmed, a page is read from its die */
	CHECK_EQ(ssdm_read(&m, 10 * T0, 2, 1), 10 * T0 + TR + TX);
	ssdm_destroy(&m);
}

TEST(fua_and_flush)
{
	struct ssdm_params p = small();
	struct ssdm m;

	p.buffer_pages = 8;
	if (init_ok(&m, &p))
		return;
	CHECK_EQ(ssdm_flush(&m, T0), T0);	/* nothing buffered */
	CHECK_EQ(ssdm_write(&m, T0, 0, 2, false), T0);
	CHECK_EQ(ssdm_write(&m, T0, 9, 1, true), T0 + 2 * TX + TP);
	/* flush waits for the last buffered program */
	CHECK_EQ(ssdm_flush(&m, T0 + 5), T0 + 2 * TX + TP);
	CHECK_EQ(m.st.flushes, 2);
	CHECK_EQ(ssdm_flush(&m, 10 * T0), 10 * T0);
	ssdm_destroy(&m);
}

TEST(read_waits_for_program_on_its_die)
{
	struct ssdm_params p = small();
	struct ssdm m;
	u64 done;

	p.buffer_pages = 16;
	if (init_ok(&m, &p))
		return;
	ssdm_write(&m, T0, 100, 1, false);		/* die 0 programs */
	/* page 4 was never written: striped to die 0, busy programming */
	done = ssdm_read(&m, T0 + 1000, 4, 1);
	CHECK_EQ(done, T0 + TX + TP + TR + TX);
	CHECK_EQ(m.st.reads_delayed, 1);
	CHECK_EQ(m.st.read_delay_ns, TX + TP - 1000);
	/* page 5 is on die 1: idle, not delayed */
	CHECK_EQ(ssdm_read(&m, T0 + 1000, 5, 1), T0 + 1000 + TR + TX);
	CHECK_EQ(m.st.reads_delayed, 1);
	ssdm_destroy(&m);
}

TEST(gc_victim_is_greedy)
{
	struct ssdm_params p = small();
	struct ssdm m;
	u32 lpn, b0, b1;
	u64 t = T0;

	if (init_ok(&m, &p))
		return;
	/* 16 pages per die written: blocks 0 and 1 of die 0 full */
	for (lpn = 0; lpn < 64; lpn++, t += T0)
		ssdm_write(&m, t, lpn, 1, false);
	b0 = ssdm_ppn_block(&m, m.l2p[0]);
	b1 = ssdm_ppn_block(&m, m.l2p[32]);
	CHECK(b0 != b1);
	CHECK_EQ(m.bstate[b0], SSDM_BLK_FULL);
	/* invalidate 3 pages of the second block, 1 of the first */
	ssdm_trim(&m, 32, 1);
	ssdm_trim(&m, 36, 1);
	ssdm_trim(&m, 40, 1);
	ssdm_trim(&m, 4, 1);
	CHECK_EQ(m.valid[b1], 5);
	CHECK_EQ(m.valid[b0], 7);
	CHECK_EQ(ssdm_gc_victim(&m, 0), b1);
	CHECK_EQ(m.st.trimmed_pages, 4);
	ssdm_trim(&m, 32, 1);	/* already unmapped */
	CHECK_EQ(m.st.trimmed_pages, 4);
	CHECK_EQ(ssdm_lpn_die(&m, 33), 1);	/* still where written */
	CHECK_EQ(m.l2p[36], SSDM_NONE);
	/* no full block on an untouched die: no victim */
	check_ftl(&m);
	ssdm_destroy(&m);
}

static u64 rnd(u64 *s)
{
	*s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
	return *s >> 33;
}

TEST(gc_on_full_drive)
{
	struct ssdm_params p = small();
	struct ssdm m;
	u64 seed = 1, t = T0, done, prev_free;
	u32 i, first_gc = 0;

	p.fill_percent = 100;
	p.buffer_pages = 8;
	if (init_ok(&m, &p))
		return;
	/* preconditioned: everything mapped, free blocks at the threshold */
	CHECK_EQ(mapped_pages(&m), m.lpns);
	CHECK_EQ(m.st.pages_programmed, 0);
	CHECK(ssdm_needs_gc(&m, m.next_die));
	check_ftl(&m);
	prev_free = m.die[0].nfree;
	CHECK(prev_free <= p.gc_free_blocks);
	for (i = 0; i < 4000; i++) {
		done = ssdm_write(&m, t, (u32)(rnd(&seed) % m.lpns), 1, false);
		CHECK(done >= t);
		if (!first_gc && m.st.gc_runs)
			first_gc = i + 1;
		t += 100000;
	}
	CHECK(first_gc >= 1 && first_gc <= 4);	/* from the first writes */
	CHECK(m.st.gc_runs > 100);
	CHECK_EQ(m.st.erases, m.st.gc_runs);
	CHECK_EQ(m.st.pages_programmed, 4000 + m.st.gc_copies);
	CHECK(ssdm_wa_x1000(&m.st) > 1500);
	CHECK_EQ(mapped_pages(&m), m.lpns);	/* nothing lost */
	check_ftl(&m);
	/* GC keeps the dies busy: far more than the host programs alone */
	CHECK(m.die[0].busy_ns > 1000 * (TX + TP) + m.die[0].erases * TE);
	ssdm_destroy(&m);
}

TEST(gc_without_spare_keeps_ftl_sound)
{
	struct ssdm_params p = small();
	struct ssdm m;
	u64 seed = 7, t = T0;
	u32 i;

	p.op_percent = 0;	/* only the minimum reserve */
	p.fill_percent = 100;
	if (init_ok(&m, &p))
		return;
	for (i = 0; i < 20000; i++, t += 10000)
		ssdm_write(&m, t, (u32)(rnd(&seed) % m.lpns), 1 + i % 3, false);
	CHECK_EQ(mapped_pages(&m), m.lpns);
	CHECK(m.st.gc_runs > 0);
	check_ftl(&m);
	ssdm_destroy(&m);
}

TEST(precondition_partial_fill)
{
	struct ssdm_params p = small();
	struct ssdm m;

	p.fill_percent = 50;
	if (init_ok(&m, &p))
		return;
	CHECK_EQ(mapped_pages(&m), m.lpns / 2);
	CHECK_EQ(m.l2p[m.lpns / 2], SSDM_NONE);
	CHECK(ssdm_needs_gc(&m, m.next_die));
	check_ftl(&m);
	/* the first write collects garbage, cheaply: half the data is stale */
	ssdm_write(&m, T0, 0, 1, false);
	CHECK(m.st.gc_runs >= 1);
	ssdm_destroy(&m);
}

TEST(mapping_cache)
{
	struct ssdm_params p = small();
	struct ssdm m;

	p.capacity_bytes = 4096ULL * 4096;	/* 4 translation pages */
	p.cmt_pages = 2;
	if (init_ok(&m, &p))
		return;
	CHECK_EQ(m.map_per_tpage, 1024);
	/* miss: translation page 0 from die 0, then page 0 from die 0 */
	CHECK_EQ(ssdm_read(&m, T0, 0, 1), T0 + 2 * (TR + TX));
	CHECK_EQ(m.st.cmt_misses, 1);
	/* hit */
	CHECK_EQ(ssdm_read(&m, 10 * T0, 1, 1), 10 * T0 + TR + TX);
	CHECK_EQ(m.st.cmt_hits, 1);
	/* a write dirties translation page 1 (lpn 1024..2047) */
	ssdm_write(&m, 20 * T0, 1024, 1, false);
	CHECK_EQ(m.st.cmt_misses, 2);
	/* page 2 evicts page 0 (LRU, clean); page 3 evicts dirty page 1 */
	ssdm_read(&m, 30 * T0, 2048, 1);
	CHECK_EQ(m.st.cmt_writebacks, 0);
	ssdm_read(&m, 40 * T0, 3072, 1);
	CHECK_EQ(m.st.cmt_writebacks, 1);
	CHECK_EQ(m.st.cmt_misses, 4);
	/* the write-back is a program: counted in write amplification */
	CHECK_EQ(m.st.pages_programmed, 2);
	ssdm_destroy(&m);
}

struct hook_log {
	u32 ops;
	u32 gcs;
	u32 die;
	enum ssdm_op op;
	u64 start;
	u64 end;
	u64 gc_busy;
	u64 gc_victims;
	u64 gc_copied;
};

static void log_op(void *priv, u32 die, enum ssdm_op op, u64 start, u64 end)
{
	struct hook_log *l = priv;

	l->ops++;
	l->die = die;
	l->op = op;
	l->start = start;
	l->end = end;
}

static void log_gc(void *priv, u32 die, u32 victim, u32 victims, u32 copied,
		   u64 start, u64 end)
{
	struct hook_log *l = priv;

	(void)die;
	(void)victim;
	l->gcs++;
	l->gc_busy += end - start;
	l->gc_victims += victims;
	l->gc_copied += copied;
}

TEST(hooks)
{
	struct ssdm_params p = small();
	struct hook_log log = { 0 };
	struct ssdm m;
	u64 seed = 3, t = T0;
	u32 i;

	p.fill_percent = 100;
	if (init_ok(&m, &p))
		return;
	m.hooks.die_op = log_op;
	m.hooks.gc = log_gc;
	m.hooks.priv = &log;
	ssdm_read(&m, 100 * T0, 6, 1);
	CHECK_EQ(log.ops, 1);
	CHECK_EQ(log.op, SSDM_OP_READ);
	CHECK_EQ(log.die, ssdm_lpn_die(&m, 6));
	CHECK_EQ(log.start, 100 * T0);
	CHECK_EQ(log.end, 100 * T0 + TR + TX);
	for (i = 0; i < 200; i++, t += 1000)
		ssdm_write(&m, t, (u32)(rnd(&seed) % m.lpns), 1, false);
	CHECK_EQ(log.ops, 201);
	CHECK_EQ(log.op, SSDM_OP_PROGRAM);
	CHECK_EQ(log.gcs > 0, 1);
	CHECK_EQ(log.gc_busy, m.st.gc_copies * (TR + TP) + m.st.erases * TE);
	/* a run may collect several victims: the counts add up */
	CHECK_EQ(log.gc_victims, m.st.gc_runs);
	CHECK_EQ(log.gc_copied, m.st.gc_copies);
	CHECK(log.gcs <= m.st.gc_runs);
	ssdm_destroy(&m);
}

TEST(ranges_clamped)
{
	struct ssdm_params p = small();
	struct ssdm m;

	if (init_ok(&m, &p))
		return;
	/* past the end: only the pages that exist */
	ssdm_write(&m, T0, m.lpns - 1, 4, false);
	CHECK_EQ(m.st.host_write_pages, 1);
	ssdm_read(&m, T0, m.lpns - 1, 4);
	CHECK_EQ(m.st.host_read_pages, 1);
	ssdm_trim(&m, m.lpns - 2, 0xffffffffU);
	CHECK_EQ(m.st.trimmed_pages, 1);
	CHECK_EQ(ssdm_read(&m, T0, m.lpns, 1), T0);
	check_ftl(&m);
	ssdm_destroy(&m);
}

UNIT_MAIN(UNIT(params_rejected), UNIT(geometry),
	  UNIT(idle_read_latency_and_striping),
	  UNIT(dies_parallel_channel_shared), UNIT(channel_gap_filling),
	  UNIT(writes_round_robin_write_through),
	  UNIT(write_buffer_stalls_when_full), UNIT(fua_and_flush),
	  UNIT(read_waits_for_program_on_its_die), UNIT(gc_victim_is_greedy),
	  UNIT(gc_on_full_drive), UNIT(gc_without_spare_keeps_ftl_sound),
	  UNIT(precondition_partial_fill), UNIT(mapping_cache), UNIT(hooks),
	  UNIT(ranges_clamped))
