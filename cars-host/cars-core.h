/* SPDX-License-Identifier: GPL-2.0 */
/*
 * CARS decision logic (host side), kept free of any elevator API so that
 * tests/unit can build it in userspace (with tests/unit/kshim.h) under ASan
 * and UBSan.  The elevator glue in cars-iosched.c owns all locking and
 * memory; every function here works on the structures the caller passes in,
 * under the caller's lock.
 *
 * CARS ("CARS: A Multi-layer Conflict-Aware Request Scheduler for NVMe
 * SSDs") is SSD firmware: before fetching a request it checks whether the
 * request's flash die is busy or its mapping entry is uncached, skips it if
 * so and takes a non-conflicting request from another submission queue,
 * with a throttle so that one flow cannot monopolise the dies.  Here the
 * host predicts the same facts from what it dispatched:
 *
 * Dies.  A flash page is page_sectors 512-byte sectors.  Writes are
 * predicted to go where a write-order FTL puts them: page after page to the
 * next die of a write pointer that the scheduler advances over every page
 * it dispatches for writing (ssdsim allocates exactly so).  A read goes to
 * the die the scheduler's own record of recent writes gives for its first
 * page (struct cars_map), else to the die of static striping, page mod
 * dies (ssdsim's mapping for pages never written through it).
 *
 * Multi-page requests.  A request of n pages is taken to occupy the
 * min(n, dies) consecutive dies from its first page's die, each for the
 * pages that fall on it (n / dies, one more for the first n mod dies).
 * That is exact for writes, for reads of pages never written (striping)
 * and for reads of pages that one request wrote; for other reads only the
 * first die is known.  Whether a request conflicts is decided by its first
 * die alone: the device starts it there, and checking every die would keep
 * a large request waiting for all of them to be idle at once.
 *
 * Die state.  Each die keeps the predicted end of the last operation
 * reserved on it: an operation starts when the die is free and takes
 * read_ns or write_ns per page (erase_ns for a discard, which makes a
 * die erase blocks).  A die is busy while that end lies ahead, or until
 * every request predicted on it has completed, whichever comes first: the
 * completion of the last one makes it idle at once.
 *
 * Mapping cache.  Optionally (cmt_regions > 0) an LRU of translation-page
 * regions of cmt_region_sectors each: a request whose first sector's region
 * is not cached is taken only when no flow offers a cached, idle one.
 *
 * Flows are visited round-robin; a flow served throttle_size times in a
 * row is skipped until another flow has been served.  When every flow's
 * oldest request conflicts, the oldest of them goes anyway once it has
 * waited max_hold_ns: the scheduler never holds the device idle longer.
 * It goes at once when every queued request fits in the depth bound's
 * free slots: held, it would keep its slot for no other request, and a
 * device that queues per die serves it no sooner for the wait.
 */
#ifndef _CARS_CORE_H
#define _CARS_CORE_H

#ifdef __KERNEL__
#include <linux/types.h>
#include <linux/bitops.h>
#include <linux/limits.h>
#include <linux/math64.h>
#include <linux/atomic.h>
#else
#include "kshim.h"
#endif

/* 64-by-32-bit division and remainder (no 64-bit division on 32-bit builds) */
static inline u64 cars_div64(u64 a, u32 b)
{
#ifdef __KERNEL__
	return div_u64(a, b);
#else
	return a / b;
#endif
}

static inline u32 cars_mod64(u64 a, u32 b)
{
#ifdef __KERNEL__
	u32 r;

	div_u64_rem(a, b, &r);
	return r;
#else
	return (u32)(a % b);
#endif
}

/*
 * @a modulo @b where @a is mostly below @b: a die index advanced by a few
 * dies.  Saves the division of the common case, which dispatch makes for
 * every request.
 */
static inline u32 cars_wrap(u64 a, u32 b)
{
	return a < b ? (u32)a : cars_mod64(a, b);
}

#define CARS_NONE		U32_MAX
#define CARS_MAX_DIES		255U	/* a die fits a byte of struct cars_map */
#define CARS_MAX_PAGE_KB	64U
#define CARS_MAX_OP_US		10000000U	/* 10 s, as ssdsim's longest */
#define CARS_MAX_DEPTH		1024U
#define CARS_MAX_THROTTLE	1024U
#define CARS_MAX_HOLD_US	1000000U	/* 1 s */
#define CARS_MAX_CMT_REGIONS	65536U

/* Defaults: a small TLC-like die (ssdsim's defaults: 8 dies, 4 KiB). */
#define CARS_DEFAULT_DIES		8U
#define CARS_DEFAULT_PAGE_KB		4U
#define CARS_DEFAULT_READ_US		60U
#define CARS_DEFAULT_WRITE_US		600U
#define CARS_DEFAULT_ERASE_US		3000U
#define CARS_DEFAULT_THROTTLE		4U
#define CARS_DEFAULT_MAX_HOLD_US	2000U
#define CARS_DEFAULT_LOOKAHEAD		4U	/* cars-host/README.md, do no harm */
#define CARS_DEFAULT_CMT_REGION_KB	2048U	/* 512 8-byte entries x 4 KiB */

enum cars_op {
	CARS_OP_READ,
	CARS_OP_WRITE,
	CARS_OP_ERASE,		/* a discard */
};

/* Die states, as debugfs and the trace show them. */
enum cars_die_state {
	CARS_DIE_IDLE,
	CARS_DIE_READ,
	CARS_DIE_PROGRAM,
	CARS_DIE_ERASE,
};

/* Why a flow's oldest request was passed over (debugfs, cars_skip). */
enum cars_skip {
	CARS_SKIP_DIE_BUSY,
	CARS_SKIP_CMT_MISS,
	CARS_SKIP_THROTTLE,
	CARS_NR_SKIPS,
};

/*
 * A die: all under the caller's lock but @done.  The requests predicted
 * on it and not yet done are @nreq - @done (cars_die_pending()); both
 * count up and wrap.
 */
struct cars_die {
	u64 busy_until;		/* predicted end of the last op reserved, ns */
	u32 nreq;		/* requests reserved here, since the reset */
	u8 state;		/* enum cars_die_state of the last op reserved */
	atomic_t done;		/* of them, released: lock-free, cars_released() */
};

/*
 * An LRU set of u32 keys in caller memory (cars_lru_bytes()): a hash with
 * chains for lookup, a list for the order of use; slots are indices, so
 * that struct cars_map keeps data per slot beside it.
 */
struct cars_lru {
	u32 n;			/* slots */
	u32 used;		/* slots holding a key */
	u32 mask;		/* buckets - 1 (a power of two) */
	u32 mru;		/* most recently used slot, CARS_NONE if empty */
	u32 lru;		/* least recently used slot */
	u32 *key;		/* [n] */
	u32 *prev;		/* [n] towards the MRU end */
	u32 *next;		/* [n] towards the LRU end */
	u32 *chain;		/* [n] next slot in the same bucket */
	u32 *bucket;		/* [mask + 1] first slot, CARS_NONE if empty */
};

static inline u32 cars_lru_buckets(u32 n)
{
	u32 b = 1;

	while (b < n)
		b <<= 1;
	return b;
}

static inline size_t cars_lru_bytes(u32 n)
{
	return sizeof(u32) * (4 * (size_t)n + cars_lru_buckets(n));
}

/* cars_lru_init() - lay the set out in @mem (cars_lru_bytes(@n), n >= 1). */
static inline void cars_lru_init(struct cars_lru *l, void *mem, u32 n)
{
	u32 *w = mem;
	u32 i, nb = cars_lru_buckets(n);

	l->n = n;
	l->used = 0;
	l->mask = nb - 1;
	l->mru = CARS_NONE;
	l->lru = CARS_NONE;
	l->key = w;
	l->prev = w + n;
	l->next = w + 2 * n;
	l->chain = w + 3 * n;
	l->bucket = w + 4 * n;
	for (i = 0; i < nb; i++)
		l->bucket[i] = CARS_NONE;
}

static inline u32 cars_lru_hash(const struct cars_lru *l, u32 key)
{
	return (key * 0x9e3779b1U) >> 7 & l->mask;
}

/* cars_lru_find() - the slot holding @key, or CARS_NONE; no change of order */
static inline u32 cars_lru_find(const struct cars_lru *l, u32 key)
{
	u32 s;

	for (s = l->bucket[cars_lru_hash(l, key)]; s != CARS_NONE; s = l->chain[s])
		if (l->key[s] == key)
			return s;
	return CARS_NONE;
}

static inline void cars_lru_unlink(struct cars_lru *l, u32 s)
{
	if (l->prev[s] != CARS_NONE)
		l->next[l->prev[s]] = l->next[s];
	else
		l->mru = l->next[s];
	if (l->next[s] != CARS_NONE)
		l->prev[l->next[s]] = l->prev[s];
	else
		l->lru = l->prev[s];
}

static inline void cars_lru_push(struct cars_lru *l, u32 s)
{
	l->prev[s] = CARS_NONE;
	l->next[s] = l->mru;
	if (l->mru != CARS_NONE)
		l->prev[l->mru] = s;
	l->mru = s;
	if (l->lru == CARS_NONE)
		l->lru = s;
}

/*
 * cars_lru_use() - @key becomes the most recently used: its slot, taken
 * from the least recently used key when @key is new and every slot is in
 * use.  *@evicted is that key, or CARS_NONE; *@fresh tells a new slot.
 */
static inline u32 cars_lru_use(struct cars_lru *l, u32 key, u32 *evicted,
			       bool *fresh)
{
	u32 s = cars_lru_find(l, key), *pp;

	*evicted = CARS_NONE;
	*fresh = s == CARS_NONE;
	if (!*fresh) {
		cars_lru_unlink(l, s);
		cars_lru_push(l, s);
		return s;
	}
	if (l->used < l->n) {
		s = l->used++;
	} else {
		s = l->lru;
		*evicted = l->key[s];
		cars_lru_unlink(l, s);
		pp = &l->bucket[cars_lru_hash(l, l->key[s])];
		while (*pp != s)
			pp = &l->chain[*pp];
		*pp = l->chain[s];
	}
	l->key[s] = key;
	pp = &l->bucket[cars_lru_hash(l, key)];
	l->chain[s] = *pp;
	*pp = s;
	cars_lru_push(l, s);
	return s;
}

/*
 * The record of recent writes: for each flash page written through the
 * scheduler, the die it was predicted to go to, in chunks of
 * CARS_MAP_CHUNK pages (one byte each), the least recently written chunk
 * given up when a new one is needed.  Memory: 1 byte per page of the area
 * recently written plus 20 bytes per chunk: with 4 KiB pages, 261 KiB per
 * GiB written; the glue bounds the number of chunks.
 */
#define CARS_MAP_CHUNK		256U
#define CARS_MAP_UNKNOWN	0xffU

struct cars_map {
	struct cars_lru lru;
	u8 *die;		/* [lru.n * CARS_MAP_CHUNK] */
};

static inline size_t cars_map_bytes(u32 chunks)
{
	return cars_lru_bytes(chunks) + (size_t)chunks * CARS_MAP_CHUNK;
}

static inline void cars_map_init(struct cars_map *m, void *mem, u32 chunks)
{
	cars_lru_init(&m->lru, mem, chunks);
	m->die = (u8 *)mem + cars_lru_bytes(chunks);
}

/* cars_map_get() - the die page @page was written to, or CARS_NONE */
static inline u32 cars_map_get(const struct cars_map *m, u64 page)
{
	u64 chunk = cars_div64(page, CARS_MAP_CHUNK);
	u32 s;
	u8 d;

	if (chunk >= CARS_NONE)
		return CARS_NONE;
	s = cars_lru_find(&m->lru, (u32)chunk);
	if (s == CARS_NONE)
		return CARS_NONE;
	d = m->die[(size_t)s * CARS_MAP_CHUNK + cars_mod64(page, CARS_MAP_CHUNK)];
	return d == CARS_MAP_UNKNOWN ? CARS_NONE : d;
}

/* cars_map_set() - page @page was written to die @die; true if a chunk was evicted */
static inline bool cars_map_set(struct cars_map *m, u64 page, u32 die)
{
	u64 chunk = cars_div64(page, CARS_MAP_CHUNK);
	u32 s, evicted, i;
	bool fresh;
	u8 *d;

	if (chunk >= CARS_NONE)
		return false;
	s = cars_lru_use(&m->lru, (u32)chunk, &evicted, &fresh);
	d = m->die + (size_t)s * CARS_MAP_CHUNK;
	if (fresh)
		for (i = 0; i < CARS_MAP_CHUNK; i++)
			d[i] = CARS_MAP_UNKNOWN;
	d[cars_mod64(page, CARS_MAP_CHUNK)] = (u8)die;
	return evicted != CARS_NONE;
}

/* Tunables, in the units the core uses (the glue converts from sysfs). */
struct cars_params {
	u32 nr_dies;		/* 1..CARS_MAX_DIES */
	u32 page_sectors;	/* flash page, 512-byte sectors */
	u64 read_ns;		/* one page read (tR) */
	u64 write_ns;		/* one page program (tPROG) */
	u64 erase_ns;		/* a discard's die time */
	u32 throttle_size;	/* consecutive dispatches of a flow; 0: off */
	u64 max_hold_ns;	/* longest a conflicting request is held */
	bool filter;		/* false: plain round-robin (the baseline) */
	u32 cmt_region_sectors;	/* mapping-cache region; 0: cache off */
};

struct cars_stats {
	u64 skips[CARS_NR_SKIPS];
	u64 throttle_events;	/* times a flow reached throttle_size */
	u64 forced;		/* dispatched past a conflict after max_hold */
	u64 unheld;		/* dispatched past a conflict: slots to spare */
	u64 map_hits;		/* reads whose die came from the write record */
	u64 map_misses;		/* reads that fell back to striping */
	u64 map_evictions;	/* chunks of the write record given up */
	u64 cmt_misses;		/* dispatched to an uncached region */
};

struct cars_sched {
	/*
	 * First what every dispatch writes: the glue puts this struct after
	 * its lock, so that these share the lock's cache lines.
	 */
	struct cars_stats st;
	unsigned long last_flow;	/* flow served last, 0: none yet */
	u32 consec;		/* its consecutive dispatches */
	u32 wp;			/* die of the next page written */
	bool cmt_on;
	struct cars_params p;
	struct cars_die *die;	/* [p.nr_dies] */
	struct cars_map map;	/* record of recent writes */
	struct cars_lru cmt;	/* mapping-cache regions; used when enabled */
};

/* A flow's oldest queued request, as the glue shows it to cars_pick(). */
struct cars_head {
	unsigned long flow;	/* the flow's identity, not 0 */
	u64 sector;
	u32 nr_sectors;
	enum cars_op op;
	u64 arrival;		/* when it was queued, ns */
};

/* Where a request goes: consecutive dies from @die (see the top comment). */
struct cars_place {
	u32 die;
	u32 ndies;
	u32 npages;
	enum cars_op op;
};

/* cars_page() - the flash page of @sector: a shift for the usual sizes */
static inline u64 cars_page(const struct cars_params *p, u64 sector)
{
	u32 ps = p->page_sectors;

	if (!(ps & (ps - 1)))
		return sector >> __ffs(ps);
	return cars_div64(sector, ps);
}

/*
 * cars_place() - the dies a request is predicted to occupy.  @hit (may be
 * NULL) tells whether a read's die came from the record of writes.  Like
 * cars_pick_first() and cars_reserve(), inlined always: each runs once
 * per request dispatched, and as calls they were out of line, their
 * prologues and returns a good part of their cost.
 */
static __always_inline struct cars_place
cars_place(const struct cars_sched *s, u64 sector, u32 nr_sectors,
	   enum cars_op op, bool *hit)
{
	struct cars_place pl;
	u64 page = cars_page(&s->p, sector);
	u32 d;

	pl.op = op;
	pl.npages = (u32)(cars_page(&s->p, sector +
				    (nr_sectors ? nr_sectors : 1) - 1) -
			  page + 1);
	pl.ndies = pl.npages < s->p.nr_dies ? pl.npages : s->p.nr_dies;
	if (hit)
		*hit = false;
	if (op == CARS_OP_WRITE) {
		pl.die = s->wp;
		return pl;
	}
	d = op == CARS_OP_READ ? cars_map_get(&s->map, page) : CARS_NONE;
	if (d != CARS_NONE && d < s->p.nr_dies) {
		if (hit)
			*hit = true;
		pl.die = d;
	} else {
		pl.die = cars_wrap(page, s->p.nr_dies);
	}
	return pl;
}

/*
 * cars_place_die() - the die of the @i-th page of a request placed at @pl,
 * of @nr_dies: pages are striped over consecutive dies from pl->die, so
 * for i < pl->ndies, the request's @i-th die.
 */
static inline u32 cars_place_die(const struct cars_place *pl, u32 i,
				 u32 nr_dies)
{
	return cars_wrap((u64)pl->die + i, nr_dies);
}

static inline u32 cars_region(const struct cars_sched *s, u64 sector)
{
	u64 r = cars_div64(sector, s->p.cmt_region_sectors);

	return r >= CARS_NONE ? CARS_NONE - 1 : (u32)r;
}

/*
 * cars_die_pending() - requests predicted on the die and not yet released:
 * none when more were released than reserved since the reset (releases of
 * requests reserved before it, which it forgot).
 */
static inline u32 cars_die_pending(const struct cars_die *d)
{
	s32 n = (s32)(d->nreq - (u32)atomic_read(&d->done));

	return n > 0 ? (u32)n : 0;
}

/* The estimate first: it mostly lies behind, and then @done is not read. */
static inline bool cars_die_busy(const struct cars_die *d, u64 now)
{
	return d->busy_until > now && cars_die_pending(d);
}

/* cars_die_state() - what the die is predicted to be doing at @now */
static inline enum cars_die_state cars_die_state(const struct cars_die *d,
						 u64 now)
{
	return cars_die_busy(d, now) ? d->state : CARS_DIE_IDLE;
}

/*
 * cars_reset_geometry() - every die idle, the write pointer at die 0, the
 * record of writes empty (in @map_mem, cars_map_bytes(@chunks)): for a
 * start, and when the number of dies or the page size changes.  Requests
 * in flight then may hold reservations on dies that were reset: their
 * releases leave no die with fewer than none pending (cars_die_pending(),
 * and cars_reserve() counts from there), and a die they leave counted is
 * idle again once its estimate passes.
 */
static inline void cars_reset_geometry(struct cars_sched *s, void *map_mem,
				       u32 chunks)
{
	u32 i;

	for (i = 0; i < s->p.nr_dies; i++) {
		s->die[i].busy_until = 0;
		s->die[i].nreq = (u32)atomic_read(&s->die[i].done);
		s->die[i].state = CARS_DIE_IDLE;
	}
	cars_map_init(&s->map, map_mem, chunks);
	s->wp = 0;
}

/*
 * cars_set_cache() - an empty mapping-cache model of @regions regions in
 * @mem (cars_lru_bytes(@regions)); off when @regions, @mem or the region
 * size is 0.
 */
static inline void cars_set_cache(struct cars_sched *s, void *mem, u32 regions)
{
	s->cmt_on = mem && regions && s->p.cmt_region_sectors;
	if (s->cmt_on)
		cars_lru_init(&s->cmt, mem, regions);
}

/*
 * cars_init() - a scheduler with parameters @p: @die has CARS_MAX_DIES
 * entries (so that nr_dies can grow), @map_mem and @cmt_mem as for
 * cars_reset_geometry() and cars_set_cache(); statistics zero.  Nothing
 * may release (cars_released()) before it returns.
 */
static inline void cars_init(struct cars_sched *s, const struct cars_params *p,
			     struct cars_die *die, void *map_mem, u32 chunks,
			     void *cmt_mem, u32 regions)
{
	u32 i;

	s->p = *p;
	s->die = die;
	for (i = 0; i < CARS_MAX_DIES; i++)
		atomic_set(&die[i].done, 0);
	cars_reset_geometry(s, map_mem, chunks);
	cars_set_cache(s, cmt_mem, regions);
	s->last_flow = 0;
	s->consec = 0;
	for (i = 0; i < CARS_NR_SKIPS; i++)
		s->st.skips[i] = 0;
	s->st.throttle_events = 0;
	s->st.forced = 0;
	s->st.unheld = 0;
	s->st.map_hits = 0;
	s->st.map_misses = 0;
	s->st.map_evictions = 0;
	s->st.cmt_misses = 0;
}

/* What cars_pick() decided. */
struct cars_choice {
	u32 idx;		/* index into heads[], CARS_NONE: dispatch nothing */
	bool forced;		/* past a conflict, after max_hold_ns */
	bool unheld;		/* past a conflict, with slots to spare */
	bool cmt_miss;		/* to a region the mapping cache lacks */
	u64 wake_at;		/* if nothing: when to look again, 0: never */
	u32 skipped[CARS_NR_SKIPS];	/* heads passed over, per reason */
	u32 first_skip;		/* index of the first head passed over */
	enum cars_skip first_reason;
	u32 first_die;		/* its predicted die */
};

static inline u64 cars_min_nz(u64 a, u64 b)
{
	if (!a)
		return b;
	return b && b < a ? b : a;
}

/*
 * cars_pick() - which flow's oldest request to dispatch
 * @heads:	the oldest request or requests of every flow that has some
 *		(a flow's oldest first), in round-robin order (the flow
 *		after the one served last comes first)
 * @n:		entries in @heads
 * @now:	the time, ns
 * @room:	every request queued fits in the depth bound's free slots
 *
 * In round-robin order, the first head that is not throttled and whose
 * first die is idle and, with the mapping cache on, whose region is
 * cached; else the first such head whose region is not cached.  With the
 * filter off, the first head that is not throttled.  When every head is
 * passed over, the oldest one if @room (unheld) or if it has waited
 * max_hold_ns (forced), else nothing, with the time at which a die frees
 * or a head's hold ends.  The caller checks the depth bound before.
 */
static inline struct cars_choice cars_pick(const struct cars_sched *s,
					   const struct cars_head *heads,
					   u32 n, u64 now, bool room)
{
	struct cars_choice c = { .idx = CARS_NONE, .first_skip = CARS_NONE };
	u32 i, uncached = CARS_NONE, oldest = CARS_NONE;
	bool others = false;

	for (i = 0; i < n; i++)
		if (heads[i].flow != s->last_flow)
			others = true;
	for (i = 0; i < n; i++) {
		const struct cars_head *h = &heads[i];
		struct cars_place pl;
		enum cars_skip why;

		if (oldest == CARS_NONE || h->arrival < heads[oldest].arrival)
			oldest = i;
		pl = cars_place(s, h->sector, h->nr_sectors, h->op, NULL);
		if (s->p.throttle_size && others && h->flow == s->last_flow &&
		    s->consec >= s->p.throttle_size) {
			why = CARS_SKIP_THROTTLE;
		} else if (!s->p.filter) {
			c.idx = i;
			return c;
		} else if (cars_die_busy(&s->die[pl.die], now)) {
			why = CARS_SKIP_DIE_BUSY;
			c.wake_at = cars_min_nz(c.wake_at, s->die[pl.die].busy_until);
		} else if (s->cmt_on &&
			   cars_lru_find(&s->cmt, cars_region(s, h->sector)) == CARS_NONE) {
			why = CARS_SKIP_CMT_MISS;
			if (uncached == CARS_NONE)
				uncached = i;
		} else {
			c.idx = i;
			return c;
		}
		c.skipped[why]++;
		if (c.first_skip == CARS_NONE) {
			c.first_skip = i;
			c.first_reason = why;
			c.first_die = pl.die;
		}
	}
	if (uncached != CARS_NONE) {
		c.idx = uncached;
		c.cmt_miss = true;
		return c;
	}
	if (oldest == CARS_NONE)
		return c;
	if (room) {
		c.idx = oldest;
		c.unheld = true;
		c.wake_at = 0;
		return c;
	}
	if (now - heads[oldest].arrival >= s->p.max_hold_ns ||
	    heads[oldest].arrival > now) {
		c.idx = oldest;
		c.forced = true;
		c.wake_at = 0;
		return c;
	}
	c.wake_at = cars_min_nz(c.wake_at, heads[oldest].arrival + s->p.max_hold_ns);
	return c;
}

/*
 * cars_pick_first() - whether cars_pick() takes @h, the first of its heads
 * in round-robin order, whatever heads follow it: it returns the first
 * head it does not pass over, and the others matter to the first only
 * through the throttle (is any head another flow's?), so a head of the
 * flow that is at its throttle_size gets false here (the caller then
 * gives cars_pick() every head).  True means cars_pick() would give
 * { .idx = 0 } and nothing skipped, forced or missed.  Lets the glue look
 * at one head when that one goes, the common case.  When true, *@pl and
 * *@hit are what cars_place() gives for @h, for cars_reserve().
 */
static __always_inline bool cars_pick_first(const struct cars_sched *s,
					    const struct cars_head *h,
					    u64 now, struct cars_place *pl,
					    bool *hit)
{
	if (s->p.throttle_size && h->flow == s->last_flow &&
	    s->consec >= s->p.throttle_size)
		return false;
	*pl = cars_place(s, h->sector, h->nr_sectors, h->op, hit);
	if (!s->p.filter)
		return true;
	if (cars_die_busy(&s->die[pl->die], now))
		return false;
	return !s->cmt_on ||
	       cars_lru_find(&s->cmt, cars_region(s, h->sector)) != CARS_NONE;
}

/*
 * cars_count_pick() - add a pick's skips and forced dispatch to the
 * statistics (once per dispatch actually made, or once per empty pick).
 */
static inline void cars_count_pick(struct cars_sched *s,
				   const struct cars_choice *c)
{
	u32 i;

	for (i = 0; i < CARS_NR_SKIPS; i++)
		s->st.skips[i] += c->skipped[i];
	if (c->forced)
		s->st.forced++;
	if (c->unheld)
		s->st.unheld++;
	if (c->cmt_miss)
		s->st.cmt_misses++;
}

/*
 * cars_reserve() - a request of flow @flow at @sector, placed at @pl by
 * cars_place() (with @hit) since the last change to @s, leaves for the
 * device at @now: reserve its dies, advance the write pointer over a
 * write's pages and record where they went, use its mapping-cache region,
 * count the flow's run.  The glue keeps @pl with the request
 * (cars_rq_word()) for cars_released().
 */
static __always_inline void cars_reserve(struct cars_sched *s,
					 unsigned long flow, u64 sector,
					 const struct cars_place *pl,
					 bool hit, u64 now)
{
	enum cars_op op = pl->op;
	u64 t = op == CARS_OP_READ ? s->p.read_ns :
		op == CARS_OP_WRITE ? s->p.write_ns : s->p.erase_ns;
	u8 state = op == CARS_OP_READ ? CARS_DIE_READ :
		   op == CARS_OP_WRITE ? CARS_DIE_PROGRAM : CARS_DIE_ERASE;
	u32 nr = s->p.nr_dies, i, evicted, per = 1, extra = 0;
	bool fresh;

	if (op == CARS_OP_READ) {
		if (hit)
			s->st.map_hits++;
		else
			s->st.map_misses++;
	}
	/* pages per die: one each unless the request has more than dies */
	if (pl->npages > nr) {
		per = pl->npages / nr;
		extra = pl->npages % nr;
	}
	for (i = 0; i < pl->ndies; i++) {
		struct cars_die *d = &s->die[cars_place_die(pl, i, nr)];
		u32 pages = per + (i < extra ? 1 : 0);
		u64 start = cars_die_busy(d, now) ? d->busy_until : now;
		u32 done = (u32)atomic_read(&d->done);

		/* an erase is per block, not per page: once per die */
		d->busy_until = start + (op == CARS_OP_ERASE ? t : t * pages);
		/* more released than reserved: requests the reset forgot */
		if ((s32)(d->nreq - done) < 0)
			d->nreq = done;
		d->nreq++;
		d->state = state;
	}
	if (op == CARS_OP_WRITE) {
		u64 page = cars_page(&s->p, sector);

		for (i = 0; i < pl->npages; i++)
			if (cars_map_set(&s->map, page + i,
					 cars_place_die(pl, i, nr)))
				s->st.map_evictions++;
		s->wp = cars_wrap((u64)s->wp + pl->npages, nr);
	}
	if (s->cmt_on)
		cars_lru_use(&s->cmt, cars_region(s, sector), &evicted, &fresh);
	if (flow == s->last_flow) {
		s->consec++;
		if (s->p.throttle_size && s->consec == s->p.throttle_size)
			s->st.throttle_events++;
	} else {
		s->last_flow = flow;
		s->consec = 1;
	}
}

/*
 * cars_released() - a request placed at @pl by cars_place() finished (or
 * left the device otherwise): each of its dies has one request fewer
 * pending, and one left with none is idle at once, whatever its estimate
 * said (cars_die_busy()).  Any context, without the caller's lock: one
 * atomic increment per die, which the next reader of the die sees.  The
 * dies are those of the geometry in force now (read once): one changed
 * since the request was placed forgot its reservations
 * (cars_reset_geometry()).
 */
static inline void cars_released(struct cars_sched *s,
				 const struct cars_place *pl)
{
	u32 nr = READ_ONCE(s->p.nr_dies), i;

	for (i = 0; i < pl->ndies; i++)
		atomic_inc(&s->die[cars_place_die(pl, i, nr)].done);
}

/*
 * A request's placement in one word (rq->elv.priv[1]): first die (8 bits),
 * dies (9 bits), pages (up to 2^32 - 1), the operation and a flag that it
 * holds die reservations (set by the glue at dispatch).
 */
#define CARS_RQ_PLACED		0x8000000000000000ULL

static inline u64 cars_rq_word(const struct cars_place *pl)
{
	return CARS_RQ_PLACED | (u64)pl->op << 49 | (u64)pl->ndies << 40 |
	       (u64)pl->die << 32 | pl->npages;
}

static inline struct cars_place cars_rq_place(u64 w)
{
	struct cars_place pl;

	pl.npages = (u32)w;
	pl.die = (u32)(w >> 32) & 0xff;
	pl.ndies = (u32)(w >> 40) & 0x1ff;
	pl.op = (enum cars_op)((w >> 49) & 0x3);
	return pl;
}

#endif /* _CARS_CORE_H */
