// SPDX-License-Identifier: GPL-2.0
/*
 * ssdsim flash model; see ssdsim-model.h for the design and README.md for
 * the parameters.  Pure logic: no block-layer API, no locking (the caller
 * holds the device lock), no sleeping except in ssdm_init().
 */
#ifdef __KERNEL__
#include <linux/string.h>
#else
#include <string.h>
#endif

#include "ssdsim-model.h"

static inline u64 ssdm_max(u64 a, u64 b)
{
	return a > b ? a : b;
}

static inline u64 ssdm_div_round_up(u64 a, u64 b)
{
	return ssdm_div64(a + b - 1, b);
}

/* Logical pages and blocks per die that @p asks for (@p checked). */
static void ssdm_geometry(const struct ssdm_params *p, u64 *lpns, u64 *bpd)
{
	u64 ndies = (u64)p->channels * p->dies_per_channel;
	u64 per_die = (u64)p->pages_per_block * ndies;	/* pages per block row */
	u64 data, want;

	*lpns = ssdm_div64(p->capacity_bytes, p->page_size);
	data = ssdm_div_round_up(*lpns, per_die);
	want = ssdm_div_round_up(*lpns * (100 + p->op_percent), 100 * per_die);
	/* the open block, the GC reserve and one block of slack, at least */
	*bpd = ssdm_max(want, data + p->gc_free_blocks + 2);
}

/**
 * ssdm_check_params() - validate module parameters
 * @p: the parameters
 * @why: set to a message for the user when they are refused
 *
 * Return: 0, or -EINVAL with *@why set.
 */
int ssdm_check_params(const struct ssdm_params *p, const char **why)
{
	u64 lpns, bpd, ppns;

	if (!p->channels || !p->dies_per_channel) {
		*why = "channels and dies_per_channel must be at least 1 (no dies)";
		return -EINVAL;
	}
	if (p->channels > SSDM_MAX_CHANNELS ||
	    p->dies_per_channel > SSDM_MAX_DIES_PER_CH) {
		*why = "channels and dies_per_channel must be at most 64";
		return -EINVAL;
	}
	if (p->channels * p->dies_per_channel > SSDM_MAX_DIES) {
		*why = "at most 128 dies (channels x dies_per_channel)";
		return -EINVAL;
	}
	if (p->page_size < SSDM_MIN_PAGE_SIZE ||
	    p->page_size > SSDM_MAX_PAGE_SIZE ||
	    (p->page_size & (p->page_size - 1))) {
		*why = "page_size must be a power of two from 512 to 65536 bytes";
		return -EINVAL;
	}
	if (p->pages_per_block < 2 ||
	    p->pages_per_block > SSDM_MAX_PAGES_PER_BLK) {
		*why = "pages_per_block must be from 2 to 4096";
		return -EINVAL;
	}
	if (p->capacity_bytes < (u64)p->page_size * p->pages_per_block) {
		*why = "capacity is smaller than one erase block (page_size x pages_per_block)";
		return -EINVAL;
	}
	if (p->op_percent > SSDM_MAX_OP_PERCENT) {
		*why = "op_percent must be at most 400";
		return -EINVAL;
	}
	if (!p->gc_free_blocks || p->gc_free_blocks > 64) {
		*why = "gc_free_blocks must be from 1 to 64";
		return -EINVAL;
	}
	if (!p->time_scale || p->time_scale > SSDM_MAX_TIME_SCALE) {
		*why = "time_scale must be from 1 to 100000";
		return -EINVAL;
	}
	if ((u64)p->read_ns * p->time_scale > SSDM_MAX_OP_NS ||
	    (u64)p->program_ns * p->time_scale > SSDM_MAX_OP_NS ||
	    (u64)p->erase_ns * p->time_scale > SSDM_MAX_OP_NS ||
	    (u64)p->xfer_ns * p->time_scale > SSDM_MAX_OP_NS) {
		*why = "an operation time x time_scale exceeds 10 s";
		return -EINVAL;
	}
	if (p->buffer_pages > SSDM_MAX_BUFFER_PAGES) {
		*why = "the write buffer must be at most 2^20 pages";
		return -EINVAL;
	}
	if (p->cmt_pages > SSDM_MAX_CMT_PAGES) {
		*why = "cmt_pages must be at most 4096";
		return -EINVAL;
	}
	if (p->fill_percent > 100) {
		*why = "fill_percent must be at most 100";
		return -EINVAL;
	}
	ssdm_geometry(p, &lpns, &bpd);
	ppns = bpd * p->pages_per_block * p->channels * p->dies_per_channel;
	if (lpns >= SSDM_NONE || ppns >= SSDM_NONE) {
		*why = "capacity too large: more than 2^32 flash pages";
		return -EINVAL;
	}
	return 0;
}

/* --- channels ----------------------------------------------------------- */

/* Index of the first reservation of @c that ends after @t. */
static u32 ssdm_chan_first_after(const struct ssdm_chan *c, u64 t)
{
	u32 lo = 0, hi = c->n;

	while (lo < hi) {
		u32 mid = lo + (hi - lo) / 2;

		if (c->iv[mid].end > t)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/**
 * ssdm_chan_reserve() - reserve a transfer on a channel
 * @c: the channel
 * @now: the current time; reservations that ended are forgotten
 * @t: the transfer may not start before this
 * @len: its duration
 *
 * Takes the first gap of @len at or after @t between the reservations
 * already made (dies reserve out of time order: a program queued far
 * ahead on a busy die must not hold the channel until then).  If the list
 * is full, the earliest reservation is forgotten.
 *
 * Return: the start of the transfer.
 */
u64 ssdm_chan_reserve(struct ssdm_chan *c, u64 now, u64 t, u64 len)
{
	u32 drop = ssdm_chan_first_after(c, now);
	u32 j;
	u64 cand = t;
	bool prev, next;

	if (drop) {
		memmove(c->iv, c->iv + drop, (c->n - drop) * sizeof(*c->iv));
		c->n -= drop;
	}
	if (!len)
		return t;
	for (j = ssdm_chan_first_after(c, t); j < c->n; j++) {
		if (cand + len <= c->iv[j].start)
			break;
		cand = ssdm_max(cand, c->iv[j].end);
	}
	c->busy_ns += len;
	prev = j > 0 && c->iv[j - 1].end == cand;
	next = j < c->n && c->iv[j].start == cand + len;
	if (prev && next) {
		c->iv[j - 1].end = c->iv[j].end;
		memmove(c->iv + j, c->iv + j + 1,
			(c->n - j - 1) * sizeof(*c->iv));
		c->n--;
	} else if (prev) {
		c->iv[j - 1].end = cand + len;
	} else if (next) {
		c->iv[j].start = cand;
	} else {
		if (c->n == c->cap) {
			memmove(c->iv, c->iv + 1, (c->n - 1) * sizeof(*c->iv));
			c->n--;
			if (j)
				j--;
		}
		memmove(c->iv + j + 1, c->iv + j, (c->n - j) * sizeof(*c->iv));
		c->iv[j].start = cand;
		c->iv[j].end = cand + len;
		c->n++;
	}
	return cand;
}

/* --- die operations ------------------------------------------------------ */

/*
 * A page read on die @d, not before @ready: the array read starts when
 * the die is free, the transfer out when the channel is, and the die is
 * held until its data register is emptied.  Returns the end.
 */
static u64 ssdm_die_read(struct ssdm *m, u64 now, u32 d, u64 ready,
			 enum ssdm_op op)
{
	struct ssdm_die *die = &m->die[d];
	struct ssdm_chan *ch = &m->chan[ssdm_die_channel(m, d)];
	u64 s = ssdm_max(ready, die->busy_until);
	u64 x, e;

	if (op == SSDM_OP_READ && s > ready && die->prog_until > ready) {
		/* waits behind a program, erase or GC on its die */
		m->st.reads_delayed++;
		m->st.read_delay_ns += s - ready;
	}
	x = ssdm_chan_reserve(ch, now, s + m->t_read, m->t_xfer);
	e = x + m->t_xfer;
	die->busy_until = e;
	die->busy_ns += e - s;
	die->reads++;
	if (m->hooks.die_op)
		m->hooks.die_op(m->hooks.priv, d, op, s, e);
	return e;
}

/*
 * A page program on die @d, not before @ready: the data goes over the
 * channel when both die and channel are free, then the array programs.
 */
static u64 ssdm_die_program(struct ssdm *m, u64 now, u32 d, u64 ready,
			    enum ssdm_op op)
{
	struct ssdm_die *die = &m->die[d];
	struct ssdm_chan *ch = &m->chan[ssdm_die_channel(m, d)];
	u64 s = ssdm_chan_reserve(ch, now, ssdm_max(ready, die->busy_until),
				  m->t_xfer);
	u64 e = s + m->t_xfer + m->t_prog;

	die->busy_until = e;
	die->prog_until = e;
	die->busy_ns += e - s;
	die->programs++;
	m->st.pages_programmed++;
	if (m->hooks.die_op)
		m->hooks.die_op(m->hooks.priv, d, op, s, e);
	return e;
}

/* --- FTL ----------------------------------------------------------------- */

/* The next page of die @d's open block, opening a free one if needed. */
static u32 ssdm_take_page(struct ssdm *m, u32 d)
{
	struct ssdm_die *die = &m->die[d];
	u32 ppb = m->p.pages_per_block;
	u32 ppn;

	if (die->open == SSDM_NONE) {
		if (!die->nfree)
			return SSDM_NONE;
		die->open = die->free[--die->nfree];
		die->next_page = 0;
		m->bstate[die->open] = SSDM_BLK_OPEN;
	}
	ppn = die->open * ppb + die->next_page++;
	if (die->next_page == ppb) {
		m->bstate[die->open] = SSDM_BLK_FULL;
		die->open = SSDM_NONE;
	}
	return ppn;
}

/* Pages die @d can still be written without an erase. */
static u64 ssdm_room(const struct ssdm *m, u32 d)
{
	const struct ssdm_die *die = &m->die[d];
	u64 room = (u64)die->nfree * m->p.pages_per_block;

	if (die->open != SSDM_NONE)
		room += m->p.pages_per_block - die->next_page;
	return room;
}

static void ssdm_map(struct ssdm *m, u32 lpn, u32 ppn)
{
	m->l2p[lpn] = ppn;
	m->p2l[ppn] = lpn;
	m->valid[ssdm_ppn_block(m, ppn)]++;
}

static bool ssdm_unmap(struct ssdm *m, u32 lpn)
{
	u32 ppn = m->l2p[lpn];

	if (ppn == SSDM_NONE)
		return false;
	m->valid[ssdm_ppn_block(m, ppn)]--;
	m->p2l[ppn] = SSDM_NONE;
	m->l2p[lpn] = SSDM_NONE;
	return true;
}

/**
 * ssdm_gc_victim() - the block garbage collection takes next on a die
 * @m: the model
 * @die: the die
 *
 * Greedy: the full block with the fewest valid pages (the lowest index on
 * a tie); a block with every page valid gains nothing and is never taken.
 *
 * Return: a global block index, or SSDM_NONE.
 */
u32 ssdm_gc_victim(const struct ssdm *m, u32 die)
{
	u32 first = die * m->blocks_per_die;
	u32 best = SSDM_NONE, best_valid = m->p.pages_per_block;
	u32 b;

	for (b = first; b < first + m->blocks_per_die; b++) {
		if (m->bstate[b] == SSDM_BLK_FULL && m->valid[b] < best_valid) {
			best = b;
			best_valid = m->valid[b];
		}
	}
	return best;
}

/* A die needs GC when it must open a block and is low on free ones. */
static bool ssdm_needs_gc(const struct ssdm *m, u32 d)
{
	return m->die[d].open == SSDM_NONE &&
	       m->die[d].nfree <= m->p.gc_free_blocks;
}

struct ssdm_gc_work {
	u32 copies;
	u32 erases;
	u32 victim;	/* the last one */
};

/* Collect one victim on die @d; false if none can be collected. */
static bool ssdm_gc_one(struct ssdm *m, u32 d, struct ssdm_gc_work *w)
{
	u32 victim = ssdm_gc_victim(m, d);
	u32 ppb = m->p.pages_per_block;
	u32 i, first;

	if (victim == SSDM_NONE || m->valid[victim] > ssdm_room(m, d))
		return false;
	first = victim * ppb;
	for (i = 0; i < ppb && m->valid[victim]; i++) {
		u32 lpn = m->p2l[first + i];

		if (lpn == SSDM_NONE)
			continue;
		ssdm_unmap(m, lpn);
		ssdm_map(m, lpn, ssdm_take_page(m, d));	/* room checked */
		w->copies++;
	}
	m->bstate[victim] = SSDM_BLK_FREE;
	m->die[d].free[m->die[d].nfree++] = victim;
	w->erases++;
	w->victim = victim;
	return true;
}

/*
 * Charge garbage collection on die @d: each copy is a copyback (array
 * read and program inside the die, no channel), each victim an erase.
 */
static void ssdm_gc_time(struct ssdm *m, u32 d, u64 ready,
			 const struct ssdm_gc_work *w)
{
	struct ssdm_die *die = &m->die[d];
	u64 s = ssdm_max(ready, die->busy_until);
	u64 e = s + w->copies * (m->t_read + m->t_prog) +
		w->erases * m->t_erase;

	die->busy_until = e;
	die->prog_until = e;
	die->busy_ns += e - s;
	die->reads += w->copies;
	die->programs += w->copies;
	die->erases += w->erases;
	m->st.gc_runs += w->erases;
	m->st.gc_copies += w->copies;
	m->st.erases += w->erases;
	m->st.pages_programmed += w->copies;
	if (m->hooks.gc)
		m->hooks.gc(m->hooks.priv, d, w->victim, w->erases,
			    w->copies, s, e);
}

/*
 * Place logical page @lpn (already unmapped) on the next die in
 * round-robin order, collecting garbage on that die first if it needs a
 * block and is low on free ones.  A die that is full even after GC is
 * skipped.  With @timed, GC occupies the die from @ready on.
 * Returns the die, or SSDM_NONE if no die has room.
 */
static u32 ssdm_place(struct ssdm *m, u32 lpn, u64 ready, bool timed)
{
	u32 tries;

	for (tries = 0; tries < m->ndies; tries++) {
		u32 d = m->next_die;
		u32 ppn;

		m->next_die = d + 1 == m->ndies ? 0 : d + 1;
		if (ssdm_needs_gc(m, d)) {
			struct ssdm_gc_work w = { 0, 0, SSDM_NONE };
			u32 guard = m->blocks_per_die;

			while (ssdm_needs_gc(m, d) && guard-- &&
			       ssdm_gc_one(m, d, &w))
				;
			if (timed && w.erases)
				ssdm_gc_time(m, d, ready, &w);
		}
		ppn = ssdm_take_page(m, d);
		if (ppn != SSDM_NONE) {
			ssdm_map(m, lpn, ppn);
			return d;
		}
	}
	return SSDM_NONE;
}

/* --- mapping-table cache ------------------------------------------------- */

/*
 * Look @lpn's translation page up in the cache (LRU, searched linearly:
 * a few thousand entries at most).  A miss reads the translation page
 * from die tvpn % dies, after writing back the evicted page if dirty.
 * Returns when the mapping is known.
 */
static u64 ssdm_cmt_access(struct ssdm *m, u64 now, u64 t, u32 lpn,
			   bool dirty)
{
	struct ssdm_cmt_entry *e;
	u32 tvpn, i, lru = 0;

	if (!m->p.cmt_pages)
		return t;
	tvpn = lpn / m->map_per_tpage;
	for (i = 0; i < m->p.cmt_pages; i++) {
		e = &m->cmt[i];
		if (e->tvpn == tvpn) {
			e->last_use = ++m->cmt_clock;
			e->dirty |= dirty;
			m->st.cmt_hits++;
			return t;
		}
		if (e->last_use < m->cmt[lru].last_use)
			lru = i;
	}
	m->st.cmt_misses++;
	e = &m->cmt[lru];
	if (e->tvpn != SSDM_NONE && e->dirty) {
		ssdm_die_program(m, now, e->tvpn % m->ndies, t,
				 SSDM_OP_MAP_WRITE);
		m->st.cmt_writebacks++;
	}
	e->tvpn = tvpn;
	e->dirty = dirty;
	e->last_use = ++m->cmt_clock;
	return ssdm_die_read(m, now, tvpn % m->ndies, t, SSDM_OP_MAP_READ);
}

/* --- write buffer -------------------------------------------------------- */

/* Replace the earliest slot of the min-heap @h of @n slots with @v. */
static void ssdm_heap_replace_top(u64 *h, u32 n, u64 v)
{
	u32 i = 0;

	for (;;) {
		u32 l = 2 * i + 1, r = l + 1, s = i;
		u64 sv = v;

		if (l < n && h[l] < sv) {
			s = l;
			sv = h[l];
		}
		if (r < n && h[r] < sv)
			s = r;
		if (s == i)
			break;
		h[i] = h[s];
		i = s;
	}
	h[i] = v;
}

/* --- host operations ----------------------------------------------------- */

/* Program logical page @lpn, admitted at @t; returns when programmed. */
static u64 ssdm_program_lpn(struct ssdm *m, u64 now, u64 t, u32 lpn)
{
	u64 ready = ssdm_cmt_access(m, now, t, lpn, true);
	u32 d;

	ssdm_unmap(m, lpn);
	d = ssdm_place(m, lpn, ready, true);
	if (d == SSDM_NONE)	/* impossible with the reserve checked */
		return ready;
	return ssdm_die_program(m, now, d, ready, SSDM_OP_PROGRAM);
}

/**
 * ssdm_write() - the host writes logical pages
 * @m: the model
 * @now: the current time
 * @lpn: the first page
 * @n: number of pages
 * @fua: complete only once on flash
 *
 * With a write buffer each page takes a buffer slot when one is free (the
 * request stalls until then) and its program is queued on its die at
 * once; the slot frees when the program ends.  Without a buffer, or with
 * @fua, the request completes when its programs have.
 *
 * Return: the completion time.
 */
u64 ssdm_write(struct ssdm *m, u64 now, u32 lpn, u32 n, bool fua)
{
	u64 done = now, stall = 0;
	u32 end = lpn + n;

	if (end > m->lpns || end < lpn)
		end = m->lpns;
	for (; lpn < end; lpn++) {
		u64 admit = now, rel;

		if (m->p.buffer_pages) {
			admit = ssdm_max(now, m->buf_free_at[0]);
			stall = ssdm_max(stall, admit - now);
		}
		rel = ssdm_program_lpn(m, now, admit, lpn);
		m->st.host_write_pages++;
		if (m->p.buffer_pages) {
			ssdm_heap_replace_top(m->buf_free_at,
					      m->p.buffer_pages, rel);
			m->buf_until[lpn] = rel;
			m->buf_drain = ssdm_max(m->buf_drain, rel);
			done = ssdm_max(done, fua ? rel : admit);
		} else {
			done = ssdm_max(done, rel);
		}
	}
	if (stall) {
		m->st.buf_stalls++;
		m->st.buf_stall_ns += stall;
	}
	return done;
}

/**
 * ssdm_read() - the host reads logical pages
 * @m: the model
 * @now: the current time
 * @lpn: the first page
 * @n: number of pages
 *
 * A page still in the write buffer is served from it; others are read
 * from their die.
 *
 * Return: the completion time.
 */
u64 ssdm_read(struct ssdm *m, u64 now, u32 lpn, u32 n)
{
	u64 done = now;
	u32 end = lpn + n;

	if (end > m->lpns || end < lpn)
		end = m->lpns;
	for (; lpn < end; lpn++) {
		u64 ready;

		m->st.host_read_pages++;
		if (m->p.buffer_pages && m->buf_until[lpn] > now) {
			m->st.buf_read_hits++;
			continue;
		}
		ready = ssdm_cmt_access(m, now, now, lpn, false);
		done = ssdm_max(done, ssdm_die_read(m, now, ssdm_lpn_die(m, lpn),
						    ready, SSDM_OP_READ));
	}
	return done;
}

/* Flush: complete when everything buffered so far is on flash. */
u64 ssdm_flush(struct ssdm *m, u64 now)
{
	m->st.flushes++;
	return ssdm_max(now, m->buf_drain);
}

/* Discard: the pages' flash copies become invalid (no device time). */
void ssdm_trim(struct ssdm *m, u32 lpn, u32 n)
{
	u32 end = lpn + n;

	if (end > m->lpns || end < lpn)
		end = m->lpns;
	for (; lpn < end; lpn++) {
		if (ssdm_unmap(m, lpn))
			m->st.trimmed_pages++;
		if (m->p.buffer_pages)
			m->buf_until[lpn] = 0;
	}
}

/* --- set-up -------------------------------------------------------------- */

static u64 ssdm_rand(u64 *s)
{
	/* xorshift64*: a fixed seed gives the same preconditioned drive */
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1DULL;
}

/*
 * fill_percent: write that share of the logical pages in order, as a
 * drive preconditioned by a sequential fill, then overwrite random pages
 * of it (untimed, with GC) as often again and on until the next write
 * needs GC: the drive starts in a used steady state, GC from the first
 * writes on.
 */
static void ssdm_precondition(struct ssdm *m)
{
	u32 n = (u32)ssdm_div64((u64)m->lpns * m->p.fill_percent, 100);
	u64 seed = 0x5eed55d5ULL, i, guard = 4ULL * m->ppns;
	u32 lpn;

	if (!n)
		return;
	for (lpn = 0; lpn < n; lpn++)
		ssdm_place(m, lpn, 0, false);
	for (i = 0; i < guard; i++) {
		if (i >= n && ssdm_needs_gc(m, m->next_die))
			break;
		lpn = (u32)(ssdm_rand(&seed) % n);
		ssdm_unmap(m, lpn);
		ssdm_place(m, lpn, 0, false);
	}
}

/**
 * ssdm_init() - build a model (fresh or preconditioned drive)
 * @m: the model, zeroed or not
 * @p: parameters accepted by ssdm_check_params()
 *
 * Return: 0, -EINVAL or -ENOMEM.
 */
int ssdm_init(struct ssdm *m, const struct ssdm_params *p)
{
	const char *why;
	u64 lpns, bpd;
	u32 d, b, nblocks;

	memset(m, 0, sizeof(*m));
	if (ssdm_check_params(p, &why))
		return -EINVAL;
	m->p = *p;
	ssdm_geometry(p, &lpns, &bpd);
	m->ndies = p->channels * p->dies_per_channel;
	m->blocks_per_die = (u32)bpd;
	m->pages_per_die = m->blocks_per_die * p->pages_per_block;
	m->lpns = (u32)lpns;
	m->ppns = m->pages_per_die * m->ndies;
	m->map_per_tpage = p->page_size / sizeof(u32);
	m->t_read = (u64)p->read_ns * p->time_scale;
	m->t_prog = (u64)p->program_ns * p->time_scale;
	m->t_erase = (u64)p->erase_ns * p->time_scale;
	m->t_xfer = (u64)p->xfer_ns * p->time_scale;
	nblocks = m->blocks_per_die * m->ndies;

	m->l2p = ssdm_calloc(m->lpns, sizeof(*m->l2p));
	m->p2l = ssdm_calloc(m->ppns, sizeof(*m->p2l));
	m->valid = ssdm_calloc(nblocks, sizeof(*m->valid));
	m->bstate = ssdm_calloc(nblocks, sizeof(*m->bstate));
	m->die = ssdm_calloc(m->ndies, sizeof(*m->die));
	m->chan = ssdm_calloc(p->channels, sizeof(*m->chan));
	if (!m->l2p || !m->p2l || !m->valid || !m->bstate || !m->die ||
	    !m->chan)
		goto nomem;
	if (p->buffer_pages) {
		m->buf_free_at = ssdm_calloc(p->buffer_pages,
					     sizeof(*m->buf_free_at));
		m->buf_until = ssdm_calloc(m->lpns, sizeof(*m->buf_until));
		if (!m->buf_free_at || !m->buf_until)
			goto nomem;
	}
	if (p->cmt_pages) {
		m->cmt = ssdm_calloc(p->cmt_pages, sizeof(*m->cmt));
		if (!m->cmt)
			goto nomem;
		for (b = 0; b < p->cmt_pages; b++)
			m->cmt[b].tvpn = SSDM_NONE;
	}
	memset(m->l2p, 0xff, (size_t)m->lpns * sizeof(*m->l2p));
	memset(m->p2l, 0xff, (size_t)m->ppns * sizeof(*m->p2l));
	for (d = 0; d < p->channels; d++) {
		struct ssdm_chan *c = &m->chan[d];

		c->cap = p->buffer_pages + SSDM_CHAN_SLOTS;
		c->iv = ssdm_calloc(c->cap, sizeof(*c->iv));
		if (!c->iv)
			goto nomem;
	}
	for (d = 0; d < m->ndies; d++) {
		struct ssdm_die *die = &m->die[d];

		die->open = SSDM_NONE;
		die->free = ssdm_calloc(m->blocks_per_die, sizeof(*die->free));
		if (!die->free)
			goto nomem;
		/* a stack: block 0 of the die is taken first */
		for (b = 0; b < m->blocks_per_die; b++)
			die->free[b] = (d + 1) * m->blocks_per_die - 1 - b;
		die->nfree = m->blocks_per_die;
	}
	ssdm_precondition(m);
	return 0;
nomem:
	ssdm_destroy(m);
	return -ENOMEM;
}

/* Free what ssdm_init() allocated (also after a failed init). */
void ssdm_destroy(struct ssdm *m)
{
	u32 i;

	if (m->chan)
		for (i = 0; i < m->p.channels; i++)
			ssdm_free_mem(m->chan[i].iv);
	if (m->die)
		for (i = 0; i < m->ndies; i++)
			ssdm_free_mem(m->die[i].free);
	ssdm_free_mem(m->l2p);
	ssdm_free_mem(m->p2l);
	ssdm_free_mem(m->valid);
	ssdm_free_mem(m->bstate);
	ssdm_free_mem(m->die);
	ssdm_free_mem(m->chan);
	ssdm_free_mem(m->buf_free_at);
	ssdm_free_mem(m->buf_until);
	ssdm_free_mem(m->cmt);
	memset(m, 0, sizeof(*m));
}
