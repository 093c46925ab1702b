// SPDX-License-Identifier: GPL-2.0
/*
 * K2 I/O scheduler: strict real-time priority and a bound on the requests
 * in flight in the device, after Miemietz, Weisse and Haertig, "K2:
 * Work-Constraining Scheduling of NVMe-Attached Storage", RTSS 2019.
 *
 * Nine staging queues: one per IOPRIO_CLASS_RT level (0 served first) and
 * one for everything else (BE, IDLE, NONE).  Dispatch takes the oldest
 * request of the highest non-empty queue, and only while fewer than the
 * bound (sysfs max_inflight) of the requests K2 dispatched are still in
 * the device.  Optionally (starvation_ms) a non-RT request that waited that
 * long goes next, at most one such promotion per starvation_ms.  Requests
 * merge front and back through the elevator hash and a per-queue
 * sector-sorted tree, as in mq-deadline; only a request that will wait for
 * a slot is indexed (k2_will_wait()).  The decisions themselves live in
 * k2-core.h (unit-tested in userspace).
 *
 * Interface
 * ---------
 * The sysfs attributes (units, ranges, defaults), the debugfs files and the
 * trace events are documented in k2/README.md; tests/python/test_docs.py
 * holds that document to the tables this file registers.
 *
 * Locking
 * -------
 * kd->lock protects the staging queues, their trees and counts, the dispatch
 * statistics and the stall detector, and is the dispatch lock of the per-CPU
 * dispatch batch records (kd->batch: elevator/iosched-batch.h, which says how
 * has_work() ends a batch without it); it is a plain spinlock, never taken in
 * interrupt context.  dispatch_request, bio_merge (when something is
 * queued) and insert_requests at head (requeues, 6.12 flush data) take it;
 * any other insertion posts to kd->inbox, lock-free, and dispatch takes the
 * inbox first thing (elevator/iosched-inbox.h), so a request takes the
 * lock once on its way in.  A request in the inbox is not yet in the
 * elevator hash: a bio cannot merge into it.  Its insert events fire when
 * it is posted, in the submitter's context; one that merges when taken has
 * no other event, as one merged away while queued.  The core calls the merge
 * callbacks (request_merge, request_merged, requests_merged, next_request,
 * former_request) from blk_mq_sched_try_merge() and
 * blk_mq_sched_try_insert_merge(), which K2 calls with it held.  The queues are
 * device-wide, not per hardware queue, because both the priority order and the
 * bound are device-wide; like mq-deadline, K2 sets QUEUE_FLAG_SQ_SCHED and may
 * return a request of another hardware queue than the one being run; but one
 * dispatch batch holds requests of one hardware queue only, since blk-mq would
 * reorder a mixed one (real-time first must hold at the device too:
 * elevator/iosched-batch.h).
 *
 * completed_request, finish_request and requeue_request can run in hard
 * interrupt context (completions) and take no lock: the in-flight count
 * is one atomic word changed by compare-and-exchange, the throttle flag
 * an atomic bit, their statistics per-CPU counters.  Tunables are written
 * by sysfs stores, which the elevator core serialises with the elevator's
 * sysfs_lock on both 6.1 and 6.12 (elv_attr_store()), and read with
 * READ_ONCE().
 *
 * In-flight accounting
 * --------------------
 * Dispatch counts a request only if the core will call finish_request for
 * it (compat_rq_elv_finish(): RQF_ELVPRIV on 6.1, RQF_USE_SCHED on
 * 6.12).  Counting sets K2_RQ_COUNTED in rq->elv.priv[0]; the finish_request
 * or requeue_request that gives the slot back clears it, so only what
 * dispatch counted is ever uncounted, and only once.
 *  - Merges: a request merged into another was queued, never counted;
 *    requests_merged takes it off the queues and its finish_request finds
 *    no flag.  Multi-range discards are kept out of the merge hash, because
 *    the core frees a discard merged away by an insert merge without
 *    calling requests_merged (see k2_insert_request()).
 *  - Requeue (blk_mq_requeue_request(), e.g. after a controller reset or
 *    a path failure): a request the driver prepared (RQF_DONTPREP, e.g.
 *    NVMe) is issued again from hctx->dispatch without passing through K2,
 *    so it keeps its slot until it finishes; requeue_request gives the
 *    slot of any other back, and that request is inserted again and
 *    counted again when dispatched.  A request inserted while still
 *    counted (no such path is known) gives its slot back at insert.  A
 *    request dispatch returned but blk-mq could not hand to the driver (no
 *    tag, driver busy) waits in hctx->dispatch, still counted, and
 *    completes normally.
 *  - Flush: flush requests never reach an elevator, nor on 6.1 does a
 *    request of a flush sequence (RQF_FLUSH_SEQ).  6.1 gives REQ_PREFLUSH
 *    and REQ_FUA requests no prepare_request (no RQF_ELVPRIV, no
 *    finish_request); a FUA write the device handles natively bypasses the
 *    elevator, but once requeued it can be inserted: K2 queues it and
 *    dispatches it uncounted (debugfs "uncounted").  On 6.12 the data part
 *    of a flush sequence is inserted (at head after a preflush) and
 *    counted; finish_request runs when the data part completes and the
 *    core then clears RQF_USE_SCHED, so the end of the whole sequence calls
 *    nothing more.
 *  - Passthrough: 6.12 never gives them to an elevator.  6.1 prepares them
 *    (RQF_ELVPRIV) and normally inserts them straight into hctx->dispatch,
 *    but one submitted under a plug reaches insert_requests; it is queued
 *    and counted like any request, and its finish_request is called.
 *  - Bypass: prepared requests that never pass through K2 (freed unused
 *    from a plug, or issued from hctx->dispatch) keep the zero priv
 *    prepare_request gave them; their finish_request finds no flag.
 * If the count goes wrong anyway: a decrement below zero is refused with a
 * WARN; when the count stays at the bound while nothing completes, is
 * requeued or is dispatched for K2_STALL_MS, dispatch counts the requests
 * that still exist and hold a slot (k2_count_holders()) and gives back the
 * slots of the others.  A slow device (a disk spinning up, a throttled
 * volume, NVMe/TCP waiting for its target) holds every slot with a request
 * that exists, and keeps the bound however long it takes.  debugfs counts
 * the checks and the recoveries.
 *
 * Restart
 * -------
 * When the bound holds queued requests back, has_work stays true and
 * dispatch returns NULL; blk-mq then re-runs the queue after a few
 * milliseconds (BLK_MQ_BUDGET_DELAY).  Dispatch also sets K2_THROTTLED, and
 * the finish or requeue that frees a slot clears it and re-runs the hardware
 * queues, so a freed slot is refilled at once.  Dispatch sets the flag,
 * issues a full barrier and reads the count again; finish decrements with
 * a fully ordered cmpxchg and then reads the flag: one of the two sees the
 * other's write, so no freed slot goes unnoticed.  Raising max_inflight
 * re-runs the queues too.
 */
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/init.h>
#include <linux/slab.h>
#include <linux/percpu.h>
#include <linux/spinlock.h>
#include <linux/atomic.h>
#include <linux/bitops.h>
#include <linux/jiffies.h>
#include <linux/list.h>
#include <linux/rbtree.h>
#include <linux/string.h>
#include <linux/sysfs.h>
#include <linux/seq_file.h>
#include <linux/bio.h>
#include <linux/blkdev.h>
#include <linux/blk-mq.h>
#include <linux/ioprio.h>

#include <trace/events/block.h>

#include "elevator.h"
#include "blk.h"
#include "blk-mq-sched.h"
#include "blk-mq-debugfs.h"
#include "iosched-compat.h"
#include "iosched-batch.h"
#include "iosched-inbox.h"
#include "iosched-merge.h"
#include "iosched-sysfs.h"
#include "k2-core.h"

#define CREATE_TRACE_POINTS
#include <trace/events/k2.h>

/*
 * A count stuck at the bound for this long without any completion,
 * requeue or dispatch is treated as leaked (see k2_check_stall()).  Healthy
 * NVMe requests take micro- to milliseconds.
 */
#define K2_STALL_MS		5000

/* Bits of k2_data.flags. */
enum {
	K2_THROTTLED,		/* dispatch waits for a slot to free */
};

static const char *const k2_queue_name[K2_NR_QUEUES] = {
	"rt0", "rt1", "rt2", "rt3", "rt4", "rt5", "rt6", "rt7", "be",
};

struct k2_queue {
	struct list_head fifo;		/* kd->lock; arrival order */
	struct rb_root sort[2];		/* kd->lock; by sector, READ/WRITE */
	unsigned int nr;		/* kd->lock; requests on @fifo */
};

/*
 * Statistics of the lock-free paths, per CPU; summed by debugfs and, for
 * the adaptive bound, by dispatch under kd->lock (k2_adapt_tick()).
 */
struct k2_pcpu_stats {
	u64 completed[K2_NR_QUEUES];	/* counted requests finished */
	u64 requeued[K2_NR_QUEUES];	/* counted requests requeued */
	/*
	 * Real-time latencies (allocation to completion) while
	 * target_latency_us is set: a histogram (k2_lat_bucket()) and its
	 * sample count, cumulative and wrapping; a window is the difference
	 * to k2_adapt.seen.
	 */
	u32 lat[K2_LAT_BUCKETS];
	u32 lat_samples;
	u64 rt_over_target;	/* of those, above the target then */
};

/* One change of the adaptive bound, for debugfs adapt_history. */
struct k2_adapt_rec {
	u64 ns;			/* ktime_get_ns() */
	u32 old, new;		/* bound in force before and after */
	u32 est_us;		/* the window's estimate (0: none) */
	u32 samples;		/* samples it rests on */
	u32 rate_kib;		/* its best-effort dispatch rate, KiB/s (0: none) */
	u8 reason;		/* enum k2_adapt_reason */
};

#define K2_ADAPT_HISTORY	32
/* No real-time request for this long (or 20 targets): max_inflight. */
#define K2_ADAPT_IDLE_MS	500U

/*
 * The adaptive bound's state, all under kd->lock, except @in_force, which
 * is written under it with WRITE_ONCE() and read locklessly
 * (k2_cur_bound()).
 */
struct k2_adapt {
	u32 bound;		/* the controller's bound, 1..max_inflight */
	u32 in_force;		/* k2_adapt_in_force() of it */
	bool idle;		/* no real-time request lately */
	bool fresh;		/* no dispatch since k2_adapt_reset() */
	u32 falls;		/* k2_adapt_falls() */
	unsigned long rt_seen;	/* jiffies of the last real-time insert */
	u64 win_start;		/* ns, when the window began */
	unsigned long next_check; /* jiffies: when to count its samples again */
	u64 est_us;		/* the last window's estimate */
	u32 seen[K2_LAT_BUCKETS];	/* per-CPU sums at the window's start */
	u32 win[K2_LAT_BUCKETS];	/* scratch: the window's histogram */
	u32 seen_samples;
	u64 seen_over;		/* rt_over_target summed, at its start */
	u32 acc[K2_LAT_BUCKETS];	/* k2_lat_fold() of past windows */
	u32 base[K2_LAT_BUCKETS];	/* per-CPU sums when the target was set */
	u64 win_sectors;	/* kd->be_sectors at its start */
	struct k2_gain gain;	/* k2_adapt_gain()'s state */
	struct k2_miss miss;	/* k2_adapt_miss()'s state */
	struct k2_ref ref;	/* k2_adapt_slope()'s state */
	u64 reasons[K2_ADAPT_NR_REASONS];	/* decisions, by reason */
	struct k2_adapt_rec history[K2_ADAPT_HISTORY];
	unsigned int history_next;	/* next slot of @history */
};

struct k2_data {
	struct request_queue *q;	/* constant */
	/* constant pointer: the dispatch batch records (iosched-batch.h) */
	struct iosched_batch __percpu *batch;

	/* requests inserted, lock-free, not yet taken ("Locking") */
	struct iosched_inbox inbox ____cacheline_aligned_in_smp;

	/*
	 * Staging queues: everything from here to @adapt under @lock.  What
	 * every dispatch writes comes first, on the lock's cache lines: the
	 * fewer lines a section writes, the fewer move to the next CPU that
	 * takes the lock.
	 */
	spinlock_t lock ____cacheline_aligned_in_smp;
	/*
	 * Bit i set iff queues[i].nr != 0.  Written under @lock with
	 * WRITE_ONCE(); has_work and bio_merge read it locklessly.
	 */
	unsigned int nonempty;
	u64 dispatch_seq;	/* dispatches, for the stall check */
	u64 be_sectors;		/* best effort's sectors (adaptive gain check) */
	unsigned long be_served;	/* jiffies of the last non-RT dispatch */
	struct k2_stall stall;
	u64 dispatched[K2_NR_QUEUES];	/* requests dispatched, per queue */
	unsigned int queued;		/* requests on all queues */
	struct k2_queue queues[K2_NR_QUEUES];
	u64 merged[K2_NR_QUEUES];	/* queued requests merged away */
	u64 uncounted;		/* dispatched without finish_request */
	u64 throttled;		/* dispatch calls the bound held back */
	u64 promotions;		/* non-RT requests sent ahead of RT */
	u64 batch_ended;	/* dispatch calls ended for another hw queue */
	u64 stall_checks;	/* stalls looked into (k2_check_stall()) */
	struct k2_adapt adapt;

	/* Lock-free state, written from completion context. */
	atomic_t inflight ____cacheline_aligned_in_smp; /* requests counted */
	unsigned long flags;		/* K2_THROTTLED; atomic bitops */
	atomic_t recover_underflow;	/* decrements refused at zero */
	atomic_t recover_stall;		/* lost slots given back */
	atomic_t recover_reinsert;	/* counted requests inserted again */
	atomic_t slots_lost;		/* counted by debugfs lose_slots */
	struct k2_pcpu_stats __percpu *stats;

	/*
	 * Tunables: written by sysfs stores (serialised by the elevator's
	 * sysfs_lock) with WRITE_ONCE(), read with READ_ONCE().
	 */
	unsigned int max_inflight ____cacheline_aligned_in_smp;
	unsigned int starvation_ms;
	unsigned int rt_tags;
	unsigned int target_us;		/* 0: the fixed bound */
	unsigned long starvation_jiffies;	/* 0: no promotion */
};

/*
 * Per-request state in rq->elv.priv (zeroed by prepare_request): priv[0]
 * holds the K2_RQ_* state (k2-core.h); priv[1] is the dispatch time in ns
 * while the k2_complete tracepoint is enabled, else 0.  Only the context
 * that owns the request writes them: insert, dispatch and the merge
 * callbacks under kd->lock, then finish or requeue.  The stall check reads
 * K2_RQ_COUNTED of requests it does not own (k2_count_holders()), so that
 * flag is written with WRITE_ONCE() and read with READ_ONCE().
 */
static inline unsigned long k2_rq_state(struct request *rq)
{
	return (unsigned long)rq->elv.priv[0];
}

static inline void k2_rq_set_state(struct request *rq, unsigned long state)
{
	WRITE_ONCE(rq->elv.priv[0], (void *)state);
}

static inline u64 k2_rq_dispatch_ns(struct request *rq)
{
	return (u64)(unsigned long)rq->elv.priv[1];
}

static inline void k2_rq_set_dispatch_ns(struct request *rq, u64 ns)
{
	rq->elv.priv[1] = (void *)(unsigned long)ns;
}

static const char *k2_disk_name(struct k2_data *kd)
{
	return kd->q->disk ? kd->q->disk->disk_name : "?";
}

/*
 * Tracepoints (trace system "k2"): tracepoints/trace/events/k2.h.  Inlined
 * in both dispatch paths: with the events off it is a few patched-out
 * branches and a store, less than the call.
 */
static __always_inline void k2_trace_dispatch(struct k2_data *kd,
					      struct request *rq,
					      unsigned int qidx, bool promoted,
					      unsigned long now)
{
	bool stamp = trace_k2_complete_enabled();
	u64 ns = 0;

	if (stamp || trace_k2_dispatch_enabled() ||
	    (promoted && trace_k2_promote_enabled()))
		ns = ktime_get_ns();
	if (promoted)
		trace_k2_promote(rq, jiffies_to_nsecs(now - rq->fifo_time));
	trace_k2_dispatch(rq, qidx,
			  rq->start_time_ns && ns > rq->start_time_ns ?
			  ns - rq->start_time_ns : 0,
			  atomic_read(&kd->inflight),
			  promoted);
	k2_rq_set_dispatch_ns(rq, stamp ? ns : 0);
}

/*
 * A counted request completed, with @left still in flight: its device
 * time (from dispatch, stamped only while the tracepoint is on) goes to
 * the k2_complete tracepoint.  Lock-free; may run in hard interrupt
 * context.
 */
static void k2_complete_trace(struct request *rq, unsigned int qidx, u32 left)
{
	u64 start = k2_rq_dispatch_ns(rq), lat_ns = 0;

	if (start)
		lat_ns = ktime_get_ns() - start;
	trace_k2_complete(rq, qidx, lat_ns, left);
}

/*
 * blk-mq's completion callback, before finish_request, with the time the
 * core reads for the completion anyway (its I/O accounting: batched
 * completions share one read, and in task context the plug's cached
 * clock, as for rq->start_time_ns).  While target_latency_us is set, a
 * counted real-time request's latency (from its allocation,
 * rq->start_time_ns, which the core stamps for every request an elevator
 * sees: its wait for a slot and its device time) goes to this CPU's
 * latency histogram; taking the core's time saves a clock read per
 * request.  Lock-free; may run in hard interrupt context.  6.1 calls it
 * for flush and passthrough requests too: priv is ours only if
 * prepare_request ran (compat_rq_elv_finish()).
 */
static void k2_completed_request(struct request *rq, u64 now)
{
	struct k2_data *kd = rq->q->elevator->elevator_data;
	unsigned int target = READ_ONCE(kd->target_us);
	unsigned long state;
	unsigned int b;
	u64 us;

	if (!target || !compat_rq_elv_finish(rq))
		return;
	state = k2_rq_state(rq);
	if (!(state & K2_RQ_COUNTED) ||
	    k2_rq_state_queue(state) >= K2_NR_RT_QUEUES ||
	    !rq->start_time_ns || now <= rq->start_time_ns)
		return;
	us = div_u64(now - rq->start_time_ns, NSEC_PER_USEC);
	b = k2_lat_bucket(us);
	/* interrupts may nest: per-CPU operations, not ++ */
	this_cpu_inc(kd->stats->lat[b]);
	this_cpu_inc(kd->stats->lat_samples);
	if (us > target)
		this_cpu_inc(kd->stats->rt_over_target);
}

/*
 * The core only merges a multi-range discard without telling the elevator
 * (no requests_merged); block/blk.h has the same test, not for modules.
 */
static bool k2_discard_mergable(struct request *rq)
{
	return req_op(rq) == REQ_OP_DISCARD &&
		queue_max_discard_segments(rq->q) > 1;
}

/* Re-run the hardware queues if a dispatch is waiting for a slot. */
static void k2_kick_throttled(struct k2_data *kd)
{
	if (test_bit(K2_THROTTLED, &kd->flags) &&
	    test_and_clear_bit(K2_THROTTLED, &kd->flags))
		blk_mq_run_hw_queues(kd->q, true);
}

/* k2_uncount() for a request counted in flight (its @state). */
static noinline void __k2_uncount(struct k2_data *kd, struct request *rq,
				  unsigned long state, u32 *left)
{
	int old = atomic_read(&kd->inflight);
	bool ok;
	u32 new;

	do {
		ok = k2_inflight_dec(old, &new);
		if (!ok) {
			new = old;
			break;
		}
	} while (!atomic_try_cmpxchg(&kd->inflight, &old, new));
	/*
	 * The flag goes only after the slot (the fully ordered cmpxchg): a
	 * stall check that finds it gone also finds the count changed.
	 */
	k2_rq_set_state(rq, state & ~K2_RQ_COUNTED);

	if (unlikely(!ok)) {
		atomic_inc(&kd->recover_underflow);
		WARN_ONCE(1, "k2: %s: in-flight count would go below zero; left at zero\n",
			  k2_disk_name(kd));
	}
	*left = new;
}

/*
 * Give back the slot @rq holds, if it holds one.  Lock-free; may run in
 * hard interrupt context.  Returns whether @rq was counted, and stores the
 * count left in *@left.  The caller re-runs a throttled queue
 * (k2_kick_throttled()) once it may.  The test is inline: most insertions
 * find no slot to give back.
 */
static __always_inline bool k2_uncount(struct k2_data *kd, struct request *rq,
				       u32 *left)
{
	unsigned long state = k2_rq_state(rq);

	if (!(state & K2_RQ_COUNTED))
		return false;
	__k2_uncount(kd, rq, state, left);
	return true;
}

/* Take a slot for @rq, which dispatch is handing to blk-mq. */
static __always_inline void k2_count(struct k2_data *kd, struct request *rq)
{
	int old = atomic_read(&kd->inflight);
	u32 new;

	lockdep_assert_held(&kd->lock);

	/*
	 * Dispatch runs under kd->lock and found the count below the bound;
	 * only decrements can have happened since, so the increment cannot
	 * fail on the bound.
	 */
	do {
		if (!k2_inflight_inc(old, U32_MAX, &new))
			return;
	} while (!atomic_try_cmpxchg(&kd->inflight, &old, new));

	k2_rq_set_state(rq, k2_rq_state(rq) | K2_RQ_COUNTED);
}

/*
 * How many requests of this queue exist and hold a slot: allocated
 * scheduler requests (a reference held) with K2_RQ_COUNTED.  A request K2
 * counted keeps its scheduler tag until it is freed, wherever it is (in
 * the driver, in hctx->dispatch, on the requeue list).  Called by dispatch
 * under kd->lock, so nothing is counted meanwhile, and while dispatch runs
 * the scheduler tags cannot be replaced (nr_requests and the hardware
 * queues change only with the queue quiesced).  A freed request that never
 * gave its slot back keeps a stale flag but no reference; one allocated
 * again has its flag cleared by prepare_request.
 */
static u32 k2_count_holders(struct k2_data *kd)
{
	struct request_queue *q = kd->q;
	bool shared = blk_mq_is_shared_tags(q->tag_set->flags);
	struct blk_mq_hw_ctx *hctx;
	unsigned long i;
	u32 found = 0;

	queue_for_each_hw_ctx(q, hctx, i) {
		struct blk_mq_tags *tags = hctx->sched_tags;
		unsigned int t;

		/* shared scheduler tags: every hctx has the same ones */
		if (!tags || (shared && i))
			continue;
		for (t = 0; t < tags->nr_tags; t++) {
			struct request *rq = tags->static_rqs[t];

			if (rq && atomic_read(&rq->ref) &&
			    ((unsigned long)READ_ONCE(rq->elv.priv[0]) &
			     K2_RQ_COUNTED))
				found++;
		}
	}
	return found;
}

/*
 * Dispatch found the bound reached.  If nothing has completed, been
 * requeued or been dispatched for K2_STALL_MS, look for the requests that
 * hold the slots, and give back the slots of those that no longer exist
 * (k2_inflight_recover()).  A slow device keeps its slots: its requests
 * exist.  Returns whether slots were given back.
 */
static bool k2_check_stall(struct k2_data *kd, u32 count, unsigned long now)
{
	int before, after;
	u32 found, new;

	lockdep_assert_held(&kd->lock);

	if (!k2_stall_check(&kd->stall, count, kd->dispatch_seq, now,
			    msecs_to_jiffies(K2_STALL_MS)))
		return false;

	/* Whatever comes of it, the next check is K2_STALL_MS away. */
	k2_stall_disarm(&kd->stall);
	kd->stall_checks++;
	before = atomic_read(&kd->inflight);
	found = k2_count_holders(kd);
	/* Pairs with the cmpxchg before the flag's clearing in k2_uncount(). */
	smp_rmb();
	after = atomic_read(&kd->inflight);
	if (!k2_inflight_recover(before, after, found, &new) ||
	    !atomic_try_cmpxchg(&kd->inflight, &before, new))
		return false;

	atomic_inc(&kd->recover_stall);
	pr_warn_ratelimited("k2: %s: %u of %u requests counted in flight no longer exist and none completed for %u ms; their slots are given back\n",
			    k2_disk_name(kd), (u32)before - found, (u32)before,
			    K2_STALL_MS);
	return true;
}

/*
 * Take @rq off its staging queue, tree and the merge hash.  Inlined in
 * dispatch, which runs it for every request, called elsewhere
 * (k2_remove_request()), as FlashFQ's __ffq_remove_request().
 */
static __always_inline void __k2_remove_request(struct k2_data *kd,
						struct request *rq)
{
	unsigned long state = k2_rq_state(rq);
	unsigned int idx = k2_rq_state_queue(state);
	struct k2_queue *kq = &kd->queues[idx];

	lockdep_assert_held(&kd->lock);

	list_del_init(&rq->queuelist);
	if (state & K2_RQ_ON_RB)
		elv_rb_del(&kq->sort[rq_data_dir(rq)], rq);
	iosched_forget_merge(kd->q, rq);
	k2_rq_set_state(rq, state & ~(K2_RQ_QUEUED | K2_RQ_ON_RB));

	kd->queued--;
	if (!--kq->nr)
		WRITE_ONCE(kd->nonempty, kd->nonempty & ~(1U << idx));
}

static noinline void k2_remove_request(struct k2_data *kd, struct request *rq)
{
	__k2_remove_request(kd, rq);
}

/*
 * The bound in force: max_inflight or, with target_latency_us set, the
 * adaptive bound in force, clamped to the current nr_requests.  All are
 * read locklessly; sysfs stores and the controller change them.
 */
static unsigned int k2_cur_bound(struct k2_data *kd)
{
	unsigned int set = READ_ONCE(kd->target_us) ?
			   READ_ONCE(kd->adapt.in_force) :
			   READ_ONCE(kd->max_inflight);

	return k2_bound(set, READ_ONCE(kd->q->nr_requests));
}

/* max_inflight clamped to nr_requests, whatever the adaptive bound is. */
static unsigned int k2_setting_bound(struct k2_data *kd)
{
	return k2_bound(READ_ONCE(kd->max_inflight),
			READ_ONCE(kd->q->nr_requests));
}

/* The adaptive bound (target_latency_us; k2-core.h has the controller). */

static const char *const k2_adapt_reason_name[K2_ADAPT_NR_REASONS] = {
	"hold", "down", "up", "up_fast", "idle", "return", "up_double",
	"no_gain",
};

static unsigned long k2_adapt_idle_jiffies(unsigned int target_us)
{
	return msecs_to_jiffies(max(K2_ADAPT_IDLE_MS, target_us / 50));
}

/* Between two countings of a window's samples: a quarter target, a jiffy. */
static unsigned long k2_adapt_check_jiffies(unsigned int target_us)
{
	return max(1UL, usecs_to_jiffies(target_us / 4));
}

/*
 * The real-time samples counted on all CPUs (wrapping); *@over = those of
 * them above the target.
 */
static u32 k2_adapt_samples(struct k2_data *kd, u64 *over)
{
	u64 o = 0;
	u32 n = 0;
	int cpu;

	for_each_possible_cpu(cpu) {
		const struct k2_pcpu_stats *st = per_cpu_ptr(kd->stats, cpu);

		n += READ_ONCE(st->lat_samples);
		o += READ_ONCE(st->rt_over_target);
	}
	*over = o;
	return n;
}

/* @hist = the latency histograms of all CPUs, summed (wrapping). */
static void k2_lat_sum(struct k2_data *kd, u32 *hist)
{
	unsigned int b;
	int cpu;

	memset(hist, 0, K2_LAT_BUCKETS * sizeof(*hist));
	for_each_possible_cpu(cpu) {
		struct k2_pcpu_stats *st = per_cpu_ptr(kd->stats, cpu);

		for (b = 0; b < K2_LAT_BUCKETS; b++)
			hist[b] += READ_ONCE(st->lat[b]);
	}
}

/*
 * Put the bound the controller's state gives (k2_adapt_in_force()) in
 * force; returns it.
 */
static u32 k2_adapt_set_in_force(struct k2_data *kd)
{
	struct k2_adapt *a = &kd->adapt;
	u32 new = k2_adapt_in_force(a->bound, READ_ONCE(kd->max_inflight),
				    a->idle);

	lockdep_assert_held(&kd->lock);
	WRITE_ONCE(a->in_force, new);
	return new;
}

/*
 * A new window from now: what the CPUs counted so far is behind it, no
 * raise is left to judge (the window before was not under this bound),
 * and no bound that missed is remembered (the load was another).
 */
static void k2_adapt_new_window(struct k2_data *kd, u64 now)
{
	struct k2_adapt *a = &kd->adapt;

	lockdep_assert_held(&kd->lock);
	memset(&a->gain, 0, sizeof(a->gain));
	memset(&a->miss, 0, sizeof(a->miss));
	memset(&a->ref, 0, sizeof(a->ref));
	k2_lat_sum(kd, a->seen);
	a->seen_samples = k2_adapt_samples(kd, &a->seen_over);
	a->win_sectors = kd->be_sectors;
	a->win_start = now;
	a->next_check = jiffies;
}

/* A k2_adapt_rate() in KiB/s. */
static u32 k2_adapt_rate_kib(u64 rate)
{
	/* it counts sectors per 2^-30 ns: 2^21 of it is 1 B/ns */
	return min_t(u64, div_u64(rate * (NSEC_PER_SEC / 1024), 2 * 1024 * 1024),
		     U32_MAX);
}

/*
 * Put the controller's decision in force, count it, keep it in the
 * history and trace it.  Lowering needs nothing more; the callers that
 * raise the bound are dispatch itself (k2_adapt_tick()) and sysfs stores,
 * which re-run the queues.
 */
static void k2_adapt_apply(struct k2_data *kd, u64 now, u32 est_us,
			   u32 samples, u64 rate, enum k2_adapt_reason why)
{
	struct k2_adapt *a = &kd->adapt;
	u32 old = a->in_force, new = k2_adapt_set_in_force(kd);
	struct k2_adapt_rec *r;

	a->reasons[why]++;
	r = &a->history[a->history_next++ % K2_ADAPT_HISTORY];
	r->ns = now;
	r->old = old;
	r->new = new;
	r->est_us = est_us;
	r->samples = samples;
	r->rate_kib = k2_adapt_rate_kib(rate);
	r->reason = why;
	trace_k2_adjust(kd->q, old, new, est_us, samples, why);
}

/*
 * Called by dispatch (with the target set): go idle when no real-time
 * request came for a while; otherwise, when the window is complete,
 * decide the next bound (k2_adapt_decide()).  Counting a window's samples
 * reads a word per CPU, so it is done at most every quarter target and
 * once a jiffy, and the clock is read only then (and at the first
 * dispatch after the target is set): a window ends up to a
 * jiffy (1-10 ms) later than it could (blk-iolatency's windows last at
 * least 100 ms), and dispatch does not pay for a clock read each time.
 */
static void k2_adapt_tick(struct k2_data *kd, unsigned int target)
{
	struct k2_adapt *a = &kd->adapt;
	unsigned long j = jiffies;
	enum k2_adapt_reason why;
	u64 now, total, est, over, rate;
	unsigned int b;
	u32 n, next, max;

	lockdep_assert_held(&kd->lock);
	if (a->idle)
		return;
	if (unlikely(a->fresh)) {
		/*
		 * The first window's clock starts with its first dispatch:
		 * the target is often set on an idle device (a benchmark sets
		 * it before its jobs start), and idle time in the window's
		 * rate made the gain check's base too low, so that a raise
		 * from it passed for a gain.
		 */
		a->fresh = false;
		a->win_start = ktime_get_ns();
		a->win_sectors = kd->be_sectors;
	}
	if (!(kd->nonempty & K2_RT_QUEUES_MASK) &&
	    time_after(j, a->rt_seen + k2_adapt_idle_jiffies(target))) {
		a->idle = true;
		k2_adapt_apply(kd, ktime_get_ns(), 0, 0, 0, K2_ADAPT_IDLE);
		return;
	}
	if (time_before(j, a->next_check))
		return;
	now = ktime_get_ns();
	n = k2_adapt_samples(kd, &over) - a->seen_samples;
	over -= a->seen_over;
	if (!k2_adapt_window_done(now - a->win_start, n, over, target)) {
		a->next_check = j + k2_adapt_check_jiffies(target);
		return;
	}
	k2_lat_sum(kd, a->win);
	for (b = 0; b < K2_LAT_BUCKETS; b++) {
		u32 cur = a->win[b];

		a->win[b] = cur - a->seen[b];
		a->seen[b] = cur;
	}
	a->seen_samples += n;
	a->seen_over += over;
	rate = k2_adapt_rate(kd->be_sectors - a->win_sectors,
			     now - a->win_start);
	a->win_sectors = kd->be_sectors;
	a->win_start = now;
	a->next_check = j;
	total = k2_lat_fold(a->acc, a->win);
	est = k2_lat_tail(a->acc, total);
	a->est_us = est;
	max = READ_ONCE(kd->max_inflight);
	why = k2_adapt_decide(a->bound, max, est, total, target,
			      over >= K2_ADAPT_EARLY_OVER ? a->falls : 0, &next);
	next = k2_adapt_lone(a->bound, over, why, next);
	why = k2_adapt_slope(&a->ref, a->bound, max, est, total, target, why,
			     &next);
	why = k2_adapt_gain(&a->gain, a->bound, rate, why, &next);
	why = k2_adapt_miss(&a->miss, a->bound, est, target, why, &next);
	a->bound = next;
	a->falls = k2_adapt_falls(a->falls, why, over);
	if (why == K2_ADAPT_DOWN)
		memset(a->acc, 0, sizeof(a->acc));
	k2_adapt_apply(kd, now, min_t(u64, est, U32_MAX),
		       min_t(u64, total, U32_MAX), rate, why);
}

/*
 * A real-time request arrived (insert, with the target set): after an
 * idle spell the controller's bound is back in force at once, and a new
 * window starts.  Requests the bound let in meanwhile are still in the
 * device: the real-time requests that complete behind them can miss the
 * target (debugfs adapt: rt_over_target).
 */
static void k2_adapt_rt_seen(struct k2_data *kd)
{
	struct k2_adapt *a = &kd->adapt;
	u64 now;

	lockdep_assert_held(&kd->lock);
	a->rt_seen = jiffies;
	if (!a->idle)
		return;
	now = ktime_get_ns();
	a->idle = false;
	a->falls = 0;
	k2_adapt_new_window(kd, now);
	k2_adapt_apply(kd, now, 0, 0, 0, K2_ADAPT_RETURN);
}

/*
 * Start (or restart, for a new target) the controller: from bound 1,
 * which meets any target a bound can meet, with nothing measured yet.
 */
static void k2_adapt_reset(struct k2_data *kd)
{
	struct k2_adapt *a = &kd->adapt;
	u64 now = ktime_get_ns();

	lockdep_assert_held(&kd->lock);
	a->bound = 1;
	a->idle = false;
	a->fresh = true;
	a->falls = 0;
	a->rt_seen = jiffies;
	a->est_us = 0;
	memset(a->acc, 0, sizeof(a->acc));
	k2_adapt_new_window(kd, now);
	memcpy(a->base, a->seen, sizeof(a->base));
	k2_adapt_set_in_force(kd);
}

/*
 * Will a request queued now wait for a slot, i.e. are there at least as
 * many requests queued and in flight as the bound allows?  Only such a
 * request is indexed for merging: one that dispatch hands out at once
 * would only cost the index its insertion and removal (merges into
 * requests waiting in a plug happen before insertion anyway).  A request
 * that ends up waiting after all (a concurrent insert took its slot) only
 * misses merges.
 */
static bool k2_will_wait(struct k2_data *kd)
{
	lockdep_assert_held(&kd->lock);

	return kd->queued + atomic_read(&kd->inflight) >=
	       k2_cur_bound(kd);
}

static void k2_insert_request(struct k2_data *kd, struct request *rq,
			      bool at_head, struct list_head *free)
{
	struct request_queue *q = kd->q;
	unsigned int idx = k2_ioprio_to_queue(req_get_ioprio(rq));
	struct k2_queue *kq = &kd->queues[idx];
	unsigned long now = jiffies;
	unsigned long state = idx;
	u32 left;

	lockdep_assert_held(&kd->lock);

	/*
	 * priv is only known to be ours if prepare_request ran, which is
	 * when finish_request will run too.  Such a request still counted
	 * here came back without requeue_request: give its slot back, or
	 * dispatching it again would count it twice.
	 */
	if (compat_rq_elv_finish(rq) && k2_uncount(kd, rq, &left)) {
		atomic_inc(&kd->recover_reinsert);
		k2_kick_throttled(kd);
	}
	k2_rq_set_state(rq, state);
	if (idx < K2_NR_RT_QUEUES && READ_ONCE(kd->target_us))
		k2_adapt_rt_seen(kd);

	/*
	 * If @rq merges into a queued request it lands on @free, which the
	 * caller frees after dropping the lock.  A queued request merged
	 * away in the same call is taken off the queues by requests_merged
	 * first; the core skips that callback only for multi-range discards,
	 * which is why those stay out of the hash the merge loop searches.
	 */
	if (kd->queued && blk_mq_sched_try_insert_merge(q, rq, free))
		return;

	if (at_head) {
		struct request *head;

		/* posted ones were traced by k2_insert_requests() */
		trace_block_rq_insert(rq);
		trace_k2_insert(rq, idx, true);

		/*
		 * Requeued requests and 6.12 flush data go first in their
		 * queue.  Inherit the head's arrival time if older so that
		 * times stay ordered along the FIFO and the head carries the
		 * oldest (the starvation check looks only at the head).
		 */
		head = list_first_entry_or_null(&kq->fifo, struct request,
						queuelist);
		rq->fifo_time = now;
		if (head && time_before((unsigned long)head->fifo_time, now))
			rq->fifo_time = head->fifo_time;
		list_add(&rq->queuelist, &kq->fifo);
	} else {
		if (rq_mergeable(rq) && k2_will_wait(kd)) {
			elv_rb_add(&kq->sort[rq_data_dir(rq)], rq);
			state |= K2_RQ_ON_RB;
			if (!k2_discard_mergable(rq)) {
				elv_rqhash_add(q, rq);
				if (!q->last_merge)
					q->last_merge = rq;
			}
		}
		/* fifo_time: stamped by k2_insert_requests() */
		list_add_tail(&rq->queuelist, &kq->fifo);
	}
	k2_rq_set_state(rq, state | K2_RQ_QUEUED);
	kd->queued++;
	if (!kq->nr++)
		WRITE_ONCE(kd->nonempty, kd->nonempty | (1U << idx));
}

/*
 * At head (requeues, 6.12 flush data) under kd->lock; anything else is
 * stamped with its arrival (rq->fifo_time), traced in the submitter's
 * context and posted to kd->inbox, lock-free, for the next dispatch
 * ("Locking").  Once posted, a request may be taken, dispatched and
 * completed on another CPU: nothing here touches it after posting.
 */
static void k2_insert_requests(struct blk_mq_hw_ctx *hctx,
			       struct list_head *list, compat_insert_t flags)
{
	struct k2_data *kd = hctx->queue->elevator->elevator_data;
	unsigned long now = jiffies;
	struct request *rq;
	LIST_HEAD(free);

	if (!compat_insert_at_head(flags)) {
		list_for_each_entry(rq, list, queuelist) {
			rq->fifo_time = now;
			trace_block_rq_insert(rq);
			trace_k2_insert(rq, k2_ioprio_to_queue(req_get_ioprio(rq)),
					false);
		}
		iosched_inbox_post(&kd->inbox, list);
		return;
	}
	spin_lock(&kd->lock);
	while (!list_empty(list)) {
		rq = list_first_entry(list, struct request, queuelist);
		list_del_init(&rq->queuelist);
		k2_insert_request(kd, rq, true, &free);
	}
	spin_unlock(&kd->lock);

	compat_free_requests(&free);
}

/*
 * @rq, off the staging queues (or never on them: k2_dispatch_lone()), goes
 * to blk-mq from queue @sel at @now (jiffies), @promoted ahead of real-time
 * requests: it takes a slot if finish_request will give it back, and is
 * counted and traced.  Under kd->lock; inlined in both dispatch paths.
 */
static __always_inline void k2_send(struct k2_data *kd, struct request *rq,
				    unsigned int sel, bool promoted,
				    unsigned long now)
{
	lockdep_assert_held(&kd->lock);

	k2_stall_disarm(&kd->stall);
	/* As mq-deadline: no more merging into a request handed out. */
	rq->rq_flags |= RQF_STARTED;
	if (compat_rq_elv_finish(rq))
		k2_count(kd, rq);
	else
		kd->uncounted++;
	kd->dispatched[sel]++;
	kd->dispatch_seq++;
	if (sel == K2_BE_QUEUE) {
		kd->be_served = now;
		kd->be_sectors += blk_rq_sectors(rq);
	}
	if (promoted)
		kd->promotions++;
	k2_trace_dispatch(kd, rq, sel, promoted, now);
}

/*
 * @batch: the hardware queue of the requests handed out so far in this
 * dispatch batch (NULL: none, or any may follow); a request of another
 * ends the batch (elevator/iosched-batch.h).  @tick: make the adaptive
 * controller's tick (target_latency_us set), unless the section made it
 * already (k2_dispatch_lone()).
 */
static struct request *__k2_dispatch_request(struct k2_data *kd,
					     const struct blk_mq_hw_ctx *batch,
					     bool tick)
{
	unsigned long now = jiffies;
	unsigned long be_wait = 0;
	unsigned int nonempty = kd->nonempty;
	unsigned int bound, target;
	struct request *rq;
	bool promoted;
	u32 count;
	int sel;

	lockdep_assert_held(&kd->lock);

	if (!nonempty)
		return NULL;

	target = READ_ONCE(kd->target_us);
	if (target && tick)
		k2_adapt_tick(kd, target);
	bound = k2_cur_bound(kd);
	if (nonempty & (1U << K2_BE_QUEUE)) {
		rq = list_first_entry(&kd->queues[K2_BE_QUEUE].fifo,
				      struct request, queuelist);
		be_wait = k2_be_wait(now - (unsigned long)rq->fifo_time,
				     now - kd->be_served);
	}

again:
	count = atomic_read(&kd->inflight);
	sel = k2_pick_queue(nonempty, count, bound, be_wait,
			    READ_ONCE(kd->starvation_jiffies), &promoted);
	if (sel == K2_PICK_THROTTLED) {
		set_bit(K2_THROTTLED, &kd->flags);
		/*
		 * Announce the wait, then look again: pairs with the fully
		 * ordered decrement in k2_uncount() followed by the flag
		 * test in k2_kick_throttled().
		 */
		smp_mb__after_atomic();
		count = atomic_read(&kd->inflight);
		sel = k2_pick_queue(nonempty, count, bound, be_wait,
				    READ_ONCE(kd->starvation_jiffies),
				    &promoted);
	}
	if (sel == K2_PICK_THROTTLED) {
		kd->throttled++;
		trace_k2_throttled(kd->q, count, bound, kd->queued);
		if (k2_check_stall(kd, count, now))
			goto again;
		return NULL;
	}
	if (sel < 0)
		return NULL;

	rq = list_first_entry(&kd->queues[sel].fifo, struct request,
			      queuelist);
	if (iosched_batch_ends(batch, rq)) {
		kd->batch_ended++;
		return NULL;
	}
	__k2_remove_request(kd, rq);
	k2_send(kd, rq, sel, promoted, now);
	return rq;
}

/*
 * A dispatch took one request, @rq, from the inbox, and nothing is queued:
 * if it is a new request (prepared, holding no slot), the bound has room
 * and it is of this dispatch batch's hardware queue (@batch, as
 * __k2_dispatch_request()), hand it out as it is taken, sparing it the
 * staging queue it would only pass through.  Inserted and dispatched, it
 * would find no request to merge into (nothing queued), stay out of the
 * merge indexes (k2_will_wait(): fewer than the bound in flight), and be
 * picked (the only queue non-empty, the bound not reached): its state,
 * slot, statistics and events are those.  With target_latency_us set the
 * controller sees what an insert and a dispatch show it, in their order:
 * a real-time arrival (k2_adapt_rt_seen()), then the dispatch's tick
 * before the bound is read (k2_adapt_tick(); its idle test finds no
 * real-time request queued either way, as a real-time one just set
 * rt_seen); *@ticked says the tick was made, so that the caller's
 * decision does not make it twice.  Returns @rq if it goes; else NULL,
 * @rq queued as k2_insert_request() queues it (@free as there), for the
 * caller's decision.
 */
static struct request *k2_dispatch_lone(struct k2_data *kd, struct request *rq,
					const struct blk_mq_hw_ctx *batch,
					struct list_head *free, bool *ticked)
{
	unsigned int idx = k2_ioprio_to_queue(req_get_ioprio(rq));
	unsigned int target = READ_ONCE(kd->target_us);

	lockdep_assert_held(&kd->lock);

	if (!compat_rq_elv_finish(rq) || k2_rq_state(rq) ||
	    iosched_batch_ends(batch, rq))
		goto insert;
	if (target) {
		if (idx < K2_NR_RT_QUEUES)
			k2_adapt_rt_seen(kd);
		k2_adapt_tick(kd, target);
		*ticked = true;
	}
	if (atomic_read(&kd->inflight) >= k2_cur_bound(kd))
		goto insert;
	k2_rq_set_state(rq, idx);
	k2_send(kd, rq, idx, false, jiffies);
	return rq;
insert:
	k2_insert_request(kd, rq, false, free);
	return NULL;
}

static struct request *k2_dispatch_request(struct blk_mq_hw_ctx *hctx)
{
	struct k2_data *kd = hctx->queue->elevator->elevator_data;
	const struct blk_mq_hw_ctx *batch;
	struct request *rq, *next;
	bool ticked = false;
	LIST_HEAD(free);

	spin_lock(&kd->lock);
	batch = iosched_batch(kd->batch, hctx);
	/* what was posted, in posting order ("Locking") */
	rq = iosched_inbox_take(&kd->inbox);
	if (rq && !rq->rq_next && !kd->queued) {
		/* one request and nothing queued: decided as it is taken */
		rq = k2_dispatch_lone(kd, rq, batch, &free, &ticked);
	} else {
		for (; rq; rq = next) {
			next = rq->rq_next;
			k2_insert_request(kd, rq, false, &free);
		}
	}
	if (!rq)
		rq = __k2_dispatch_request(kd, batch, !ticked);
	iosched_batch_note(kd->batch, hctx, rq);
	spin_unlock(&kd->lock);

	compat_free_requests(&free);
	return rq;
}

/*
 * Tags for real-time submitters.  A request needs a scheduler tag before
 * K2 sees it, and the tags (nr_requests per hardware queue) are shared: a
 * best-effort flood would take them all and leave a real-time submitter
 * asleep in tag allocation, behind best-effort requests completing one at
 * a time through the bound.  So a submitter that is not real-time may hold
 * only k2_be_depth() of them.  The class is the submitting task's
 * (get_current_ioprio(), as the core gives a bio without a priority of its
 * own): limit_depth sees the operation, not the bio, so an I/O that
 * carries its own priority (io_uring's sqe->ioprio, aio's IOCB_FLAG_IOPRIO,
 * the blk-ioprio cgroup policy) is limited by its task's class, though
 * K2 queues it by its own.  Flush and passthrough requests are never
 * limited (the core does not ask).
 */
static void k2_limit_depth(blk_opf_t opf, struct blk_mq_alloc_data *data)
{
	struct k2_data *kd = data->q->elevator->elevator_data;
	unsigned int rt_tags = READ_ONCE(kd->rt_tags);
	unsigned long depth = READ_ONCE(data->q->nr_requests);

	if (!rt_tags ||
	    IOPRIO_PRIO_CLASS(get_current_ioprio()) == IOPRIO_CLASS_RT)
		return;
	data->shallow_depth = compat_shallow_depth(data->hctx,
						   k2_be_depth(rt_tags, depth));
}

/*
 * A shallow depth below the tag bitmap's wake batch could leave its
 * waiters asleep: with a minimum of 1, any depth k2_limit_depth() sets (or
 * the tunable changes to) is woken correctly.  Called for each hardware
 * queue at init and whenever nr_requests reallocates the tags.
 */
static void k2_min_shallow_depth(struct blk_mq_hw_ctx *hctx)
{
	sbitmap_queue_min_shallow_depth(&hctx->sched_tags->bitmap_tags, 1);
}

static void k2_depth_updated(compat_depth_arg arg)
{
	compat_depth_hctxs(arg, k2_min_shallow_depth);
}

static int k2_init_hctx(struct blk_mq_hw_ctx *hctx, unsigned int hctx_idx)
{
	k2_min_shallow_depth(hctx);
	return 0;
}

/*
 * True while requests are queued, also when the bound holds them back:
 * blk-mq then keeps re-running the queue, which drives k2_check_stall().
 * False ends the dispatch batch being built (elevator/iosched-batch.h).
 */
static bool k2_has_work(struct blk_mq_hw_ctx *hctx)
{
	struct k2_data *kd = hctx->queue->elevator->elevator_data;

	return iosched_batch_has_work(kd->batch, READ_ONCE(kd->nonempty) ||
				      !iosched_inbox_empty(&kd->inbox));
}

/* Called when a request is allocated, before any other callback. */
static void k2_prepare_request(struct request *rq)
{
	rq->elv.priv[0] = NULL;
	rq->elv.priv[1] = NULL;
}

/*
 * Called when a request the elevator prepared is freed or, for a flush
 * sequence's data part on 6.12, when that part completes.  Also for
 * requests that bypassed K2: those have no K2_RQ_COUNTED.
 */
static void k2_finish_request(struct request *rq)
{
	struct k2_data *kd = rq->q->elevator->elevator_data;
	unsigned long state = k2_rq_state(rq);
	unsigned int idx = k2_rq_state_queue(state);
	u32 left;

	WARN_ONCE(state & K2_RQ_QUEUED,
		  "k2: %s: request freed while on a staging queue\n",
		  k2_disk_name(kd));

	if (!k2_uncount(kd, rq, &left))
		return;
	this_cpu_inc(kd->stats->completed[idx]);
	if (trace_k2_complete_enabled())
		k2_complete_trace(rq, idx, left);
	k2_kick_throttled(kd);
}

/* Called by blk_mq_requeue_request() for a request the driver gave back. */
static void k2_requeue_request(struct request *rq)
{
	struct k2_data *kd = rq->q->elevator->elevator_data;
	unsigned long state = k2_rq_state(rq);
	unsigned int idx = k2_rq_state_queue(state);
	u32 left;

	/*
	 * A request the driver prepared (RQF_DONTPREP) goes from the requeue
	 * list straight to hctx->dispatch and the driver, not through K2:
	 * it keeps its slot until it finishes, or the device would hold it
	 * beside a request dispatched into its slot.
	 */
	if (rq->rq_flags & RQF_DONTPREP) {
		if (!(state & K2_RQ_COUNTED))
			return;
		this_cpu_inc(kd->stats->requeued[idx]);
		trace_k2_requeue(rq, idx, atomic_read(&kd->inflight));
		return;
	}
	if (!k2_uncount(kd, rq, &left))
		return;
	this_cpu_inc(kd->stats->requeued[idx]);
	trace_k2_requeue(rq, idx, left);
	k2_kick_throttled(kd);
}

/* Merging: front merges through the sorted trees, back merges the hash. */

static int k2_request_merge(struct request_queue *q, struct request **rq,
			    struct bio *bio)
{
	struct k2_data *kd = q->elevator->elevator_data;
	unsigned int idx = k2_ioprio_to_queue(bio->bi_ioprio);
	sector_t sector = bio_end_sector(bio);
	struct request *__rq;

	lockdep_assert_held(&kd->lock);

	__rq = elv_rb_find(&kd->queues[idx].sort[bio_data_dir(bio)], sector);
	if (__rq && elv_bio_merge_ok(__rq, bio)) {
		*rq = __rq;
		if (k2_discard_mergable(__rq))
			return ELEVATOR_DISCARD_MERGE;
		return ELEVATOR_FRONT_MERGE;
	}
	return ELEVATOR_NO_MERGE;
}

/* @rq grew by a bio; a front merge moved its start sector. */
static void k2_request_merged(struct request_queue *q, struct request *rq,
			      enum elv_merge type)
{
	struct k2_data *kd = q->elevator->elevator_data;
	unsigned long state = k2_rq_state(rq);
	struct k2_queue *kq = &kd->queues[k2_rq_state_queue(state)];

	lockdep_assert_held(&kd->lock);

	if (type == ELEVATOR_FRONT_MERGE && (state & K2_RQ_ON_RB)) {
		elv_rb_del(&kq->sort[rq_data_dir(rq)], rq);
		elv_rb_add(&kq->sort[rq_data_dir(rq)], rq);
	}
}

/*
 * @next was merged into @rq and will be freed.  @next is queued, or is the
 * request being inserted (insert merge) and not queued yet.
 */
static void k2_requests_merged(struct request_queue *q, struct request *rq,
			       struct request *next)
{
	struct k2_data *kd = q->elevator->elevator_data;
	unsigned long rstate = k2_rq_state(rq);
	unsigned long nstate = k2_rq_state(next);
	unsigned int idx = k2_rq_state_queue(nstate);

	lockdep_assert_held(&kd->lock);

	if (!(nstate & K2_RQ_QUEUED))
		return;

	/* Keep the older arrival time and its place in the FIFO. */
	if ((rstate & K2_RQ_QUEUED) && k2_rq_state_queue(rstate) == idx &&
	    time_before((unsigned long)next->fifo_time,
			(unsigned long)rq->fifo_time)) {
		list_move(&rq->queuelist, &next->queuelist);
		rq->fifo_time = next->fifo_time;
	}
	k2_remove_request(kd, next);
	kd->merged[idx]++;
}

static struct request *k2_former_request(struct request_queue *q,
					 struct request *rq)
{
	if (!(k2_rq_state(rq) & K2_RQ_ON_RB))
		return NULL;
	return elv_rb_former_request(q, rq);
}

static struct request *k2_next_request(struct request_queue *q,
				       struct request *rq)
{
	if (!(k2_rq_state(rq) & K2_RQ_ON_RB))
		return NULL;
	return elv_rb_latter_request(q, rq);
}

static bool k2_bio_merge(struct request_queue *q, struct bio *bio,
			 unsigned int nr_segs)
{
	struct k2_data *kd = q->elevator->elevator_data;
	struct request *free = NULL;
	bool ret;

	/*
	 * A bio merges only into a queued request.  With none queued, as
	 * is usual below the bound, skip the lock: a request queued just
	 * after this test is a merge missed, which is harmless.
	 */
	if (!READ_ONCE(kd->nonempty))
		return false;

	spin_lock(&kd->lock);
	ret = blk_mq_sched_try_merge(q, bio, nr_segs, &free);
	spin_unlock(&kd->lock);

	if (free)
		blk_mq_free_request(free);
	return ret;
}

static int k2_init_sched(struct request_queue *q, compat_init_sched_arg arg)
{
	struct elevator_queue *eq;
	struct k2_data *kd;
	unsigned int i;

	eq = compat_elevator_alloc(q, arg);
	if (!eq)
		return -ENOMEM;

	kd = kzalloc_node(sizeof(*kd), GFP_KERNEL, q->node);
	if (!kd)
		goto put_eq;
	kd->stats = alloc_percpu(struct k2_pcpu_stats);
	if (!kd->stats)
		goto free_kd;
	kd->batch = iosched_batch_alloc();
	if (!kd->batch)
		goto free_stats;

	kd->q = q;
	spin_lock_init(&kd->lock);
	for (i = 0; i < K2_NR_QUEUES; i++) {
		INIT_LIST_HEAD(&kd->queues[i].fifo);
		kd->queues[i].sort[READ] = RB_ROOT;
		kd->queues[i].sort[WRITE] = RB_ROOT;
	}
	atomic_set(&kd->inflight, 0);
	kd->max_inflight = K2_DEFAULT_MAX_INFLIGHT;
	kd->rt_tags = k2_default_rt_tags(q->nr_requests);
	kd->be_served = jiffies;

	eq->elevator_data = kd;

	/* Dispatch is device-wide: run one hardware queue, not all. */
	blk_queue_flag_set(QUEUE_FLAG_SQ_SCHED, q);

	q->elevator = eq;
	return 0;

free_stats:
	free_percpu(kd->stats);
free_kd:
	kfree(kd);
put_eq:
	compat_elevator_put(eq);
	return -ENOMEM;
}

/*
 * The queue is frozen: every request has been freed, so nothing may be
 * queued and the count must be zero.
 */
static void k2_exit_sched(struct elevator_queue *e)
{
	struct k2_data *kd = e->elevator_data;
	u32 count = atomic_read(&kd->inflight);
	unsigned int i;

	for (i = 0; i < K2_NR_QUEUES; i++)
		WARN_ONCE(!list_empty(&kd->queues[i].fifo),
			  "k2: %s: %u requests left on queue %s at exit\n",
			  k2_disk_name(kd), kd->queues[i].nr,
			  k2_queue_name[i]);
	WARN_ONCE(count, "k2: %s: in-flight count %u at exit\n",
		  k2_disk_name(kd), count);
	WARN_ONCE(!iosched_inbox_empty(&kd->inbox),
		  "k2: %s: requests left in the inbox at exit\n",
		  k2_disk_name(kd));

	iosched_batch_free(kd->batch);
	free_percpu(kd->stats);
	kfree(kd);
}

/*
 * sysfs: /sys/block/<dev>/queue/iosched/, parsed by iosched_parse_uint():
 * junk fails with EINVAL and changes nothing.
 */
#define K2_SHOW_UINT(name, expr)					\
static ssize_t k2_##name##_show(struct elevator_queue *e, char *page)	\
{									\
	struct k2_data *kd = e->elevator_data;				\
									\
	return sysfs_emit(page, "%u\n", (unsigned int)(expr));		\
}

K2_SHOW_UINT(max_inflight, k2_setting_bound(kd));
K2_SHOW_UINT(target_latency_us, READ_ONCE(kd->target_us));
K2_SHOW_UINT(effective_inflight, k2_cur_bound(kd));
K2_SHOW_UINT(starvation_ms, READ_ONCE(kd->starvation_ms));
K2_SHOW_UINT(rt_tags,
	     k2_rt_tags(READ_ONCE(kd->rt_tags), READ_ONCE(kd->q->nr_requests)));
K2_SHOW_UINT(inflight, atomic_read(&kd->inflight));
#undef K2_SHOW_UINT

/*
 * 1..nr_requests.  Lowering below the current count takes effect as
 * requests complete; raising re-runs the queues for the new slots.
 */
static ssize_t k2_max_inflight_store(struct elevator_queue *e,
				     const char *page, size_t count)
{
	struct k2_data *kd = e->elevator_data;
	unsigned int max = min_t(unsigned long, READ_ONCE(kd->q->nr_requests),
				 UINT_MAX);
	unsigned int val;

	if (iosched_parse_uint(page, count, 1, max, &val))
		return -EINVAL;
	spin_lock(&kd->lock);
	WRITE_ONCE(kd->max_inflight, val);
	if (kd->target_us) {
		kd->adapt.bound = min(kd->adapt.bound, val);
		k2_adapt_set_in_force(kd);
	}
	spin_unlock(&kd->lock);
	blk_mq_run_hw_queues(kd->q, true);
	return count;
}

/*
 * 0 (the fixed bound) .. K2_MAX_TARGET_US.  Setting a target (or another
 * one) starts the controller afresh from bound 1 (k2_adapt_reset()).
 */
static ssize_t k2_target_latency_us_store(struct elevator_queue *e,
					  const char *page, size_t count)
{
	struct k2_data *kd = e->elevator_data;
	unsigned int val;

	if (iosched_parse_uint(page, count, 0, K2_MAX_TARGET_US, &val))
		return -EINVAL;
	spin_lock(&kd->lock);
	if (val)
		k2_adapt_reset(kd);
	WRITE_ONCE(kd->target_us, val);
	spin_unlock(&kd->lock);
	blk_mq_run_hw_queues(kd->q, true);
	return count;
}

/* 0 (strict priority) .. K2_MAX_STARVATION_MS. */
static ssize_t k2_starvation_ms_store(struct elevator_queue *e,
				      const char *page, size_t count)
{
	struct k2_data *kd = e->elevator_data;
	unsigned int val;
	unsigned long j;

	if (iosched_parse_uint(page, count, 0, K2_MAX_STARVATION_MS, &val))
		return -EINVAL;
	j = val ? max(msecs_to_jiffies(val), 1UL) : 0;
	WRITE_ONCE(kd->starvation_jiffies, j);
	WRITE_ONCE(kd->starvation_ms, val);
	return count;
}

/* rt_tags: 0..nr_requests / 2. */
static ssize_t k2_rt_tags_store(struct elevator_queue *e, const char *page,
				size_t count)
{
	struct k2_data *kd = e->elevator_data;
	unsigned long depth = READ_ONCE(kd->q->nr_requests);
	unsigned int val;

	if (iosched_parse_uint(page, count, 0,
			       min_t(unsigned long, depth / 2, UINT_MAX), &val))
		return -EINVAL;
	WRITE_ONCE(kd->rt_tags, val);
	return count;
}

#define K2_ATTR(name)	__ATTR(name, 0644, k2_##name##_show, k2_##name##_store)
#define K2_ATTR_RO(name) __ATTR(name, 0444, k2_##name##_show, NULL)

static struct elv_fs_entry k2_attrs[] = {
	K2_ATTR(max_inflight),
	K2_ATTR(starvation_ms),
	K2_ATTR(rt_tags),
	K2_ATTR(target_latency_us),
	K2_ATTR_RO(effective_inflight),
	K2_ATTR_RO(inflight),
	__ATTR_NULL
};

#undef K2_ATTR
#undef K2_ATTR_RO

/* debugfs: /sys/kernel/debug/block/<dev>/sched/ */
#ifdef CONFIG_BLK_DEBUG_FS

/* <queue>_list: the requests on one staging queue, in FIFO order. */
#define K2_DEBUGFS_QUEUE(idx, name)					\
enum { k2_##name##_idx = (idx) };					\
									\
static void *k2_##name##_start(struct seq_file *m, loff_t *pos)	\
	__acquires(&kd->lock)						\
{									\
	struct request_queue *q = m->private;				\
	struct k2_data *kd = q->elevator->elevator_data;		\
									\
	spin_lock(&kd->lock);						\
	return seq_list_start(&kd->queues[k2_##name##_idx].fifo, *pos);	\
}									\
									\
static void *k2_##name##_next(struct seq_file *m, void *v, loff_t *pos)	\
{									\
	struct request_queue *q = m->private;				\
	struct k2_data *kd = q->elevator->elevator_data;		\
									\
	return seq_list_next(v, &kd->queues[k2_##name##_idx].fifo, pos);	\
}									\
									\
static void k2_##name##_stop(struct seq_file *m, void *v)		\
	__releases(&kd->lock)						\
{									\
	struct request_queue *q = m->private;				\
	struct k2_data *kd = q->elevator->elevator_data;		\
									\
	spin_unlock(&kd->lock);						\
}									\
									\
static const struct seq_operations k2_##name##_seq_ops = {		\
	.start	= k2_##name##_start,					\
	.next	= k2_##name##_next,					\
	.stop	= k2_##name##_stop,					\
	.show	= blk_mq_debugfs_rq_show,				\
}

K2_DEBUGFS_QUEUE(0, rt0);
K2_DEBUGFS_QUEUE(1, rt1);
K2_DEBUGFS_QUEUE(2, rt2);
K2_DEBUGFS_QUEUE(3, rt3);
K2_DEBUGFS_QUEUE(4, rt4);
K2_DEBUGFS_QUEUE(5, rt5);
K2_DEBUGFS_QUEUE(6, rt6);
K2_DEBUGFS_QUEUE(7, rt7);
K2_DEBUGFS_QUEUE(K2_BE_QUEUE, be);
#undef K2_DEBUGFS_QUEUE

/* One "<queue> <value>" line per staging queue. */
static void k2_seq_per_queue(struct seq_file *m, const u64 *val)
{
	unsigned int i;

	for (i = 0; i < K2_NR_QUEUES; i++)
		seq_printf(m, "%s %llu\n", k2_queue_name[i], val[i]);
}

/* Copy a per-queue statistic kept under kd->lock. */
static void k2_locked_per_queue(struct k2_data *kd, const u64 *src, u64 *dst)
{
	spin_lock(&kd->lock);
	memcpy(dst, src, K2_NR_QUEUES * sizeof(*dst));
	spin_unlock(&kd->lock);
}

static int k2_dbg_queued_show(void *data, struct seq_file *m)
{
	struct request_queue *q = data;
	struct k2_data *kd = q->elevator->elevator_data;
	u64 val[K2_NR_QUEUES];
	unsigned int i;

	spin_lock(&kd->lock);
	for (i = 0; i < K2_NR_QUEUES; i++)
		val[i] = kd->queues[i].nr;
	spin_unlock(&kd->lock);
	k2_seq_per_queue(m, val);
	return 0;
}

static int k2_dbg_dispatched_show(void *data, struct seq_file *m)
{
	struct request_queue *q = data;
	struct k2_data *kd = q->elevator->elevator_data;
	u64 val[K2_NR_QUEUES];

	k2_locked_per_queue(kd, kd->dispatched, val);
	k2_seq_per_queue(m, val);
	return 0;
}

static int k2_dbg_merged_show(void *data, struct seq_file *m)
{
	struct request_queue *q = data;
	struct k2_data *kd = q->elevator->elevator_data;
	u64 val[K2_NR_QUEUES];

	k2_locked_per_queue(kd, kd->merged, val);
	k2_seq_per_queue(m, val);
	return 0;
}

/* Sum a per-CPU statistic; @completed selects completed or requeued. */
static void k2_sum_pcpu(struct k2_data *kd, bool completed, u64 *val)
{
	unsigned int i;
	int cpu;

	memset(val, 0, K2_NR_QUEUES * sizeof(*val));
	for_each_possible_cpu(cpu) {
		const struct k2_pcpu_stats *s = per_cpu_ptr(kd->stats, cpu);

		for (i = 0; i < K2_NR_QUEUES; i++)
			val[i] += completed ? READ_ONCE(s->completed[i]) :
					      READ_ONCE(s->requeued[i]);
	}
}

static int k2_dbg_completed_show(void *data, struct seq_file *m)
{
	struct request_queue *q = data;
	struct k2_data *kd = q->elevator->elevator_data;
	u64 val[K2_NR_QUEUES];

	k2_sum_pcpu(kd, true, val);
	k2_seq_per_queue(m, val);
	return 0;
}

static int k2_dbg_requeued_show(void *data, struct seq_file *m)
{
	struct request_queue *q = data;
	struct k2_data *kd = q->elevator->elevator_data;
	u64 val[K2_NR_QUEUES];

	k2_sum_pcpu(kd, false, val);
	k2_seq_per_queue(m, val);
	return 0;
}

static int k2_dbg_inflight_show(void *data, struct seq_file *m)
{
	struct request_queue *q = data;
	struct k2_data *kd = q->elevator->elevator_data;

	seq_printf(m, "%u\n", atomic_read(&kd->inflight));
	return 0;
}

/* Single counters kept under kd->lock. */
static int k2_dbg_locked_u64(struct seq_file *m, struct k2_data *kd,
			     const u64 *counter)
{
	u64 val;

	spin_lock(&kd->lock);
	val = *counter;
	spin_unlock(&kd->lock);
	seq_printf(m, "%llu\n", val);
	return 0;
}

static int k2_dbg_throttled_show(void *data, struct seq_file *m)
{
	struct request_queue *q = data;
	struct k2_data *kd = q->elevator->elevator_data;

	return k2_dbg_locked_u64(m, kd, &kd->throttled);
}

static int k2_dbg_batch_ended_show(void *data, struct seq_file *m)
{
	struct request_queue *q = data;
	struct k2_data *kd = q->elevator->elevator_data;

	return k2_dbg_locked_u64(m, kd, &kd->batch_ended);
}

static int k2_dbg_starvation_promotions_show(void *data, struct seq_file *m)
{
	struct request_queue *q = data;
	struct k2_data *kd = q->elevator->elevator_data;

	return k2_dbg_locked_u64(m, kd, &kd->promotions);
}

static int k2_dbg_uncounted_show(void *data, struct seq_file *m)
{
	struct request_queue *q = data;
	struct k2_data *kd = q->elevator->elevator_data;

	return k2_dbg_locked_u64(m, kd, &kd->uncounted);
}

static int k2_dbg_stall_checks_show(void *data, struct seq_file *m)
{
	struct request_queue *q = data;
	struct k2_data *kd = q->elevator->elevator_data;

	return k2_dbg_locked_u64(m, kd, &kd->stall_checks);
}

/*
 * For tests: writing N (1..1000) counts N slots in flight that no request
 * holds, as an accounting bug would lose them; the stall check must give
 * them back.  Reads show how many were counted so.  (blk-mq's debugfs
 * needs a show for every file it opens.)
 */
static int k2_dbg_lose_slots_show(void *data, struct seq_file *m)
{
	struct request_queue *q = data;
	struct k2_data *kd = q->elevator->elevator_data;

	seq_printf(m, "%d\n", atomic_read(&kd->slots_lost));
	return 0;
}

static ssize_t k2_dbg_lose_slots_write(void *data, const char __user *buf,
				       size_t count, loff_t *ppos)
{
	struct request_queue *q = data;
	struct k2_data *kd = q->elevator->elevator_data;
	unsigned int n;
	int ret;

	ret = kstrtouint_from_user(buf, count, 10, &n);
	if (ret)
		return ret;
	if (!n || n > 1000)
		return -EINVAL;
	atomic_add(n, &kd->slots_lost);
	atomic_add(n, &kd->inflight);
	return count;
}

static int k2_dbg_recoveries_show(void *data, struct seq_file *m)
{
	struct request_queue *q = data;
	struct k2_data *kd = q->elevator->elevator_data;

	seq_printf(m, "%d\n", atomic_read(&kd->recover_underflow) +
		   atomic_read(&kd->recover_stall) +
		   atomic_read(&kd->recover_reinsert));
	return 0;
}

static int k2_dbg_recovery_causes_show(void *data, struct seq_file *m)
{
	struct request_queue *q = data;
	struct k2_data *kd = q->elevator->elevator_data;

	seq_printf(m, "underflow %d\nstall %d\nreinsert %d\n",
		   atomic_read(&kd->recover_underflow),
		   atomic_read(&kd->recover_stall),
		   atomic_read(&kd->recover_reinsert));
	return 0;
}

/* The adaptive bound's state and counts, "name value" per line. */
static int k2_dbg_adapt_show(void *data, struct seq_file *m)
{
	struct request_queue *q = data;
	struct k2_data *kd = q->elevator->elevator_data;
	struct k2_adapt *a = &kd->adapt;
	u64 reasons[K2_ADAPT_NR_REASONS], over;
	u32 bound, in_force, samples, window;
	struct k2_gain gain;
	struct k2_miss miss;
	struct k2_ref ref;
	unsigned int i;
	u64 est;
	bool idle;

	spin_lock(&kd->lock);
	bound = a->bound;
	in_force = a->in_force;
	idle = a->idle;
	est = a->est_us;
	gain = a->gain;
	miss = a->miss;
	ref = a->ref;
	samples = k2_adapt_samples(kd, &over);
	window = samples - a->seen_samples;
	memcpy(reasons, a->reasons, sizeof(reasons));
	spin_unlock(&kd->lock);

	seq_printf(m, "target_us %u\nbound %u\nin_force %u\nidle %d\n",
		   READ_ONCE(kd->target_us), bound, in_force, idle);
	seq_printf(m, "estimate_us %llu\nwindow_samples %u\nsamples %u\n",
		   est, window, samples);
	seq_printf(m, "rt_over_target %llu\n", over);
	seq_printf(m, "rate_kib_s %u\n", k2_adapt_rate_kib(gain.rate));
	seq_printf(m, "gain_base %u\ngain_ceiling %u\ngain_hold %u\n",
		   gain.base, gain.ceiling, gain.hold);
	seq_printf(m, "gain_probe %u\ngain_doubt %d\n", gain.probe,
		   gain.doubt);
	seq_printf(m, "miss_bound %u\nmiss_hold %u\nmiss_probe %u\nmiss_met %u\n",
		   miss.bound, miss.hold, miss.probe, miss.met);
	seq_printf(m, "slope_bound %u\nslope_estimate_us %llu\n", ref.bound,
		   ref.est);
	for (i = 0; i < K2_ADAPT_NR_REASONS; i++)
		seq_printf(m, "%s %llu\n", k2_adapt_reason_name[i], reasons[i]);
	return 0;
}

/*
 * The real-time latencies K2 measured since the target was set, as the
 * controller sees them (from the histogram, so within about 6 %):
 * "samples N" and "p50_us", "p99_us", "p999_us", "max_us".
 */
static int k2_dbg_adapt_latency_show(void *data, struct seq_file *m)
{
	static const unsigned int permille[] = { 500, 990, 999, 1000 };
	static const char *const name[] = { "p50_us", "p99_us", "p999_us",
					    "max_us" };
	struct request_queue *q = data;
	struct k2_data *kd = q->elevator->elevator_data;
	u64 total = 0;
	unsigned int b, i;
	u32 *h;

	h = kmalloc_array(K2_LAT_BUCKETS, sizeof(*h), GFP_KERNEL);
	if (!h)
		return -ENOMEM;
	spin_lock(&kd->lock);
	k2_lat_sum(kd, h);
	for (b = 0; b < K2_LAT_BUCKETS; b++) {
		h[b] -= kd->adapt.base[b];
		total += h[b];
	}
	spin_unlock(&kd->lock);

	seq_printf(m, "samples %llu\n", total);
	for (i = 0; i < ARRAY_SIZE(permille); i++)
		seq_printf(m, "%s %llu\n", name[i],
			   k2_lat_percentile(h, total, permille[i]));
	kfree(h);
	return 0;
}

/*
 * The controller's last K2_ADAPT_HISTORY decisions, oldest first:
 * "<ns> <reason> <old> <new> <estimate_us> <samples>".
 */
static int k2_dbg_adapt_history_show(void *data, struct seq_file *m)
{
	struct request_queue *q = data;
	struct k2_data *kd = q->elevator->elevator_data;
	struct k2_adapt_rec *h;
	unsigned int i, n, next;

	h = kmalloc_array(K2_ADAPT_HISTORY, sizeof(*h), GFP_KERNEL);
	if (!h)
		return -ENOMEM;
	spin_lock(&kd->lock);
	memcpy(h, kd->adapt.history, K2_ADAPT_HISTORY * sizeof(*h));
	next = kd->adapt.history_next;
	spin_unlock(&kd->lock);

	n = min_t(unsigned int, next, K2_ADAPT_HISTORY);
	for (i = next - n; i != next; i++) {
		const struct k2_adapt_rec *r = &h[i % K2_ADAPT_HISTORY];

		seq_printf(m, "%llu %s %u %u %u %u %u\n", r->ns,
			   k2_adapt_reason_name[r->reason], r->old, r->new,
			   r->est_us, r->samples, r->rate_kib);
	}
	kfree(h);
	return 0;
}

#define K2_QUEUE_LIST_ATTR(name)					\
	{#name "_list", 0400, .seq_ops = &k2_##name##_seq_ops}

static const struct blk_mq_debugfs_attr k2_queue_debugfs_attrs[] = {
	{"queued", 0400, k2_dbg_queued_show},
	{"dispatched", 0400, k2_dbg_dispatched_show},
	{"completed", 0400, k2_dbg_completed_show},
	{"requeued", 0400, k2_dbg_requeued_show},
	{"merged", 0400, k2_dbg_merged_show},
	{"inflight", 0400, k2_dbg_inflight_show},
	{"throttled", 0400, k2_dbg_throttled_show},
	{"starvation_promotions", 0400, k2_dbg_starvation_promotions_show},
	{"batch_ended", 0400, k2_dbg_batch_ended_show},
	{"uncounted", 0400, k2_dbg_uncounted_show},
	{"stall_checks", 0400, k2_dbg_stall_checks_show},
	{"lose_slots", 0600, k2_dbg_lose_slots_show, k2_dbg_lose_slots_write},
	{"recoveries", 0400, k2_dbg_recoveries_show},
	{"recovery_causes", 0400, k2_dbg_recovery_causes_show},
	{"adapt", 0400, k2_dbg_adapt_show},
	{"adapt_history", 0400, k2_dbg_adapt_history_show},
	{"adapt_latency", 0400, k2_dbg_adapt_latency_show},
	K2_QUEUE_LIST_ATTR(rt0),
	K2_QUEUE_LIST_ATTR(rt1),
	K2_QUEUE_LIST_ATTR(rt2),
	K2_QUEUE_LIST_ATTR(rt3),
	K2_QUEUE_LIST_ATTR(rt4),
	K2_QUEUE_LIST_ATTR(rt5),
	K2_QUEUE_LIST_ATTR(rt6),
	K2_QUEUE_LIST_ATTR(rt7),
	K2_QUEUE_LIST_ATTR(be),
	{},
};

#undef K2_QUEUE_LIST_ATTR

#endif /* CONFIG_BLK_DEBUG_FS */

static struct elevator_type k2_sched = {
	.ops = {
		.init_sched		= k2_init_sched,
		.exit_sched		= k2_exit_sched,
		.insert_requests	= k2_insert_requests,
		.dispatch_request	= k2_dispatch_request,
		.has_work		= k2_has_work,
		.limit_depth		= k2_limit_depth,
		.depth_updated		= k2_depth_updated,
		.init_hctx		= k2_init_hctx,
		.prepare_request	= k2_prepare_request,
		.completed_request	= k2_completed_request,
		.finish_request		= k2_finish_request,
		.requeue_request	= k2_requeue_request,
		.bio_merge		= k2_bio_merge,
		.request_merge		= k2_request_merge,
		.request_merged		= k2_request_merged,
		.requests_merged	= k2_requests_merged,
		.former_request		= k2_former_request,
		.next_request		= k2_next_request,
	},
#ifdef CONFIG_BLK_DEBUG_FS
	.queue_debugfs_attrs = k2_queue_debugfs_attrs,
#endif
	.elevator_attrs = k2_attrs,
	.elevator_name = "k2",
	.elevator_owner = THIS_MODULE,
};

static int __init k2_init(void)
{
	return elv_register(&k2_sched);
}

static void __exit k2_exit(void)
{
	elv_unregister(&k2_sched);
}

module_init(k2_init);
module_exit(k2_exit);

MODULE_AUTHOR("ssd-iosched project");
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("K2 I/O scheduler: bounded in-flight requests, strict real-time priority");
MODULE_VERSION(IOSCHED_VERSION);
MODULE_INFO(elevator, "k2");
