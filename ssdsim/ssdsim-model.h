/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ssdsim flash model: geometry, a page-level FTL with garbage collection,
 * a DRAM write buffer, an optional mapping-table cache (DFTL-style) and the
 * die/channel timing.  No block-layer API here: the same code is built into
 * ssdsim.ko (ssdsim-model.c) and into the userspace unit test
 * (tests/unit/ssdsim_test.c includes ssdsim-model.c).
 *
 * Time is in nanoseconds on the caller's clock (ktime_get_ns() in the
 * kernel); every device time in struct ssdm is already multiplied by
 * time_scale.  The model is an event-free "reservation" model: each die
 * keeps the time its last reserved operation ends (busy_until); an
 * operation on a die starts when the die is free (first come, first
 * served) and its data transfer takes the first gap on its channel large
 * enough (channels keep a list of reserved intervals, since dies reserve
 * them out of time order).  A request's completion time is the latest end
 * of its page operations; the driver completes it at that time.
 *
 * Layout: die d sits on channel d % channels.  A physical page number
 * (ppn) is die * pages_per_die + block * pages_per_block + page.  Host
 * writes go to the dies round-robin in write order, each die filling its
 * open block page by page; a logical page never written maps by static
 * striping to die lpn % dies (what the host-side CARS scheduler assumes).
 *
 * Locking: none here.  The caller serialises every call on one model
 * (ssdsim-main.c: struct ssdsim_dev.lock).
 */
#ifndef _SSDSIM_MODEL_H
#define _SSDSIM_MODEL_H

#ifdef __KERNEL__
#include <linux/types.h>
#include <linux/errno.h>
#include <linux/limits.h>
#include <linux/slab.h>
#include <linux/math64.h>
#define ssdm_calloc(n, size)	kvcalloc(n, size, GFP_KERNEL)
#define ssdm_free_mem(p)	kvfree(p)
#define ssdm_div64(a, b)	div64_u64(a, b)
#else
#include <errno.h>
#include <stdlib.h>
#include "kshim.h"
#define ssdm_calloc(n, size)	calloc(n, size)
#define ssdm_free_mem(p)	free(p)
#define ssdm_div64(a, b)	((a) / (b))
#endif

/* An l2p or p2l entry with no page behind it; a block index "none". */
#define SSDM_NONE		U32_MAX

/* Limits of the parameters (checked by ssdm_check_params()). */
#define SSDM_MAX_CHANNELS	64
#define SSDM_MAX_DIES_PER_CH	64
#define SSDM_MAX_DIES		128	/* channels x dies_per_channel */
#define SSDM_MIN_PAGE_SIZE	512
#define SSDM_MAX_PAGE_SIZE	65536
#define SSDM_MAX_PAGES_PER_BLK	4096
#define SSDM_MAX_OP_PERCENT	400
#define SSDM_MAX_TIME_SCALE	100000
#define SSDM_MAX_OP_NS		10000000000ULL	/* one scaled op: 10 s */
#define SSDM_MAX_BUFFER_PAGES	1048576U
#define SSDM_MAX_CMT_PAGES	4096
/* Channel reservations kept besides the write buffer's (see chan_reserve) */
#define SSDM_CHAN_SLOTS		8192

/* Die operations, for the hook points below. */
enum ssdm_op {
	SSDM_OP_READ,		/* host page read: array read + transfer out */
	SSDM_OP_PROGRAM,	/* page program: transfer in + array program */
	SSDM_OP_MAP_READ,	/* mapping-cache miss: translation page read */
	SSDM_OP_MAP_WRITE,	/* dirty translation page written back */
};

/*
 * Hook points for the tracepoints (ssdsim-main.c) and the unit test: a
 * page operation reserved on @die from @start to @end, and a garbage
 * collection run on @die (@victims blocks collected, the last one
 * @victim, @copied valid pages moved) occupying it from @start to @end.
 * Times are known when an operation is reserved, so one call carries both
 * its start and its finish.  Called under the caller's lock; NULL hooks
 * cost one test.
 */
struct ssdm_hooks {
	void (*die_op)(void *priv, u32 die, enum ssdm_op op, u64 start,
		       u64 end);
	void (*gc)(void *priv, u32 die, u32 victim, u32 victims, u32 copied,
		   u64 start, u64 end);
	void *priv;
};

/* What the user chooses (module parameters, in their units). */
struct ssdm_params {
	u32 channels;
	u32 dies_per_channel;
	u32 page_size;		/* bytes, power of two, 512..65536 */
	u32 pages_per_block;
	u64 capacity_bytes;	/* host-visible capacity */
	u32 op_percent;		/* spare flash beyond capacity, percent */
	u32 gc_free_blocks;	/* GC when a die has this many free blocks */
	u32 read_ns;		/* array read of one page (tR) */
	u32 program_ns;		/* array program of one page (tPROG) */
	u32 erase_ns;		/* block erase (tBERS) */
	u32 xfer_ns;		/* one page over the channel */
	u32 time_scale;		/* multiplies every time above */
	u32 buffer_pages;	/* DRAM write buffer, pages; 0: write-through */
	u32 cmt_pages;		/* mapping cache, translation pages; 0: off */
	u32 fill_percent;	/* precondition this much of the capacity */
};

/* Reserved transfer on a channel: [start, end). */
struct ssdm_iv {
	u64 start;
	u64 end;
};

struct ssdm_chan {
	struct ssdm_iv *iv;	/* future reservations, sorted, disjoint */
	u32 n;			/* entries in iv */
	u32 cap;		/* size of iv */
	u64 busy_ns;		/* statistics: transfer time reserved */
};

struct ssdm_die {
	u64 busy_until;		/* end of the last operation reserved */
	u64 prog_until;		/* end of the last program/erase/GC */
	u32 open;		/* block being filled, SSDM_NONE if none */
	u32 next_page;		/* next free page in the open block */
	u32 nfree;		/* entries in free[] */
	u32 *free;		/* stack of free (erased) blocks, die-local */
	/* statistics */
	u64 busy_ns;		/* time reserved for operations */
	u64 reads;		/* page reads (host and mapping) */
	u64 programs;		/* page programs (host, GC copies, mapping) */
	u64 erases;
};

/* Counters; read under the caller's lock. */
struct ssdm_stats {
	u64 host_read_pages;	/* pages read by the host */
	u64 host_write_pages;	/* pages written by the host */
	u64 buf_read_hits;	/* host page reads served by the buffer */
	u64 pages_programmed;	/* every program: host, GC, mapping */
	u64 gc_runs;		/* victim blocks collected */
	u64 gc_copies;		/* valid pages GC moved */
	u64 erases;
	u64 reads_delayed;	/* reads that waited for a program/erase */
	u64 read_delay_ns;	/* and their total wait */
	u64 buf_stalls;		/* write requests that waited for buffer */
	u64 buf_stall_ns;	/* and their total wait */
	u64 cmt_hits;
	u64 cmt_misses;
	u64 cmt_writebacks;
	u64 trimmed_pages;	/* mapped pages unmapped by discard */
	u64 flushes;
};

struct ssdm_cmt_entry {
	u32 tvpn;		/* translation page, SSDM_NONE if unused */
	bool dirty;
	u64 last_use;
};

enum ssdm_blk_state {
	SSDM_BLK_FREE,
	SSDM_BLK_OPEN,
	SSDM_BLK_FULL,
};

struct ssdm {
	struct ssdm_params p;
	/* derived geometry */
	u32 ndies;
	u32 blocks_per_die;
	u32 pages_per_die;
	u32 lpns;		/* logical pages (host capacity) */
	u32 ppns;		/* physical pages */
	u32 map_per_tpage;	/* l2p entries in one translation page */
	/* scaled times, ns */
	u64 t_read;
	u64 t_prog;
	u64 t_erase;
	u64 t_xfer;
	/* FTL */
	u32 *l2p;		/* lpn -> ppn or SSDM_NONE */
	u32 *p2l;		/* ppn -> lpn or SSDM_NONE */
	u32 *valid;		/* per block: valid pages */
	u8 *bstate;		/* per block: enum ssdm_blk_state */
	u32 next_die;		/* round-robin write pointer */
	struct ssdm_die *die;
	struct ssdm_chan *chan;
	/* write buffer */
	u64 *buf_free_at;	/* min-heap: when each buffer slot frees */
	u64 *buf_until;		/* per lpn: its buffered copy leaves then */
	u64 buf_drain;		/* when everything buffered is on flash */
	/* mapping cache */
	struct ssdm_cmt_entry *cmt;
	u64 cmt_clock;
	struct ssdm_stats st;
	struct ssdm_hooks hooks;	/* set after ssdm_init() */
};

int ssdm_check_params(const struct ssdm_params *p, const char **why);
int ssdm_init(struct ssdm *m, const struct ssdm_params *p);
void ssdm_destroy(struct ssdm *m);

u64 ssdm_read(struct ssdm *m, u64 now, u32 lpn, u32 n);
u64 ssdm_write(struct ssdm *m, u64 now, u32 lpn, u32 n, bool fua);
u64 ssdm_flush(struct ssdm *m, u64 now);
void ssdm_trim(struct ssdm *m, u32 lpn, u32 n);

/* Exposed for the unit test and the driver's statistics. */
u64 ssdm_chan_reserve(struct ssdm_chan *c, u64 now, u64 t, u64 len);
u32 ssdm_gc_victim(const struct ssdm *m, u32 die);

static inline u32 ssdm_ppn_die(const struct ssdm *m, u32 ppn)
{
	return ppn / m->pages_per_die;
}

static inline u32 ssdm_ppn_block(const struct ssdm *m, u32 ppn)
{
	return ppn / m->p.pages_per_block;	/* global block index */
}

static inline u32 ssdm_die_channel(const struct ssdm *m, u32 die)
{
	return die % m->p.channels;
}

/* The die a logical page is read from: where it was written, or striping. */
static inline u32 ssdm_lpn_die(const struct ssdm *m, u32 lpn)
{
	u32 ppn = m->l2p[lpn];

	return ppn == SSDM_NONE ? lpn % m->ndies : ssdm_ppn_die(m, ppn);
}

/* Write amplification x1000: pages programmed per page the host wrote. */
static inline u64 ssdm_wa_x1000(const struct ssdm_stats *st)
{
	if (!st->host_write_pages)
		return 0;
	return ssdm_div64(st->pages_programmed * 1000, st->host_write_pages);
}

#endif /* _SSDSIM_MODEL_H */
