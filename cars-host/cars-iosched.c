// SPDX-License-Identifier: GPL-2.0
/*
 * CARS I/O scheduler, host side: conflict-aware dispatch for NVMe SSDs,
 * after "CARS: A Multi-layer Conflict-Aware Request Scheduler for NVMe
 * SSDs".  The paper's scheduler is firmware that skips a submission
 * queue's head when its flash die is busy; this one predicts the dies from
 * what it dispatched (cars-core.h, unit-tested in userspace) and holds
 * back a request whose die is predicted busy, taking another flow's
 * instead, with at most `depth` requests in the device.
 *
 * Interface
 * ---------
 * The sysfs attributes (units, ranges, defaults), the debugfs files and the
 * trace events are documented in cars-host/README.md;
 * tests/python/test_docs.py holds that document to the tables this file
 * registers.
 *
 * Locking
 * -------
 * cd->lock protects the tunables and struct cars_data from @placed to
 * @die but each die's @done (cars-core.h), each CPU's
 * cars_releases.applied and every flow's state but @completed, and is
 * the dispatch lock of the per-CPU dispatch batch records (cd->batch:
 * elevator/iosched-batch.h).  It is taken in task context only
 * (dispatch, bio_merge, sysfs, debugfs), with spin_lock():
 * insert_requests posts to cd->inbox instead ("Insertion"),
 * and finish_request, requeue_request and the hrtimer, which can run in
 * hard interrupt context, do not take it (see "Completions").  The
 * merge callbacks run under it (called from blk_mq_sched_try_merge() and
 * blk_mq_sched_try_insert_merge() with it held).  It is never held while
 * running the hardware queues (which can take the queue lock, held around
 * io_cq creation) nor in hrtimer_cancel().  The queues are device-wide:
 * QUEUE_FLAG_SQ_SCHED as mq-deadline.
 *
 * Flows
 * -----
 * A flow is an I/O context's io_cq (icq_size), found by prepare_request
 * (without the queue lock: iosched_icq_find_get()) or created there,
 * which takes a reference on the io_context that finish_request drops:
 * the flow lives while any of its requests does.  prepare_request waits
 * for init_icq to have set ready (iosched_icq_wait_ready(): another task
 * of the context can find an io_cq init_icq has not set up yet).  Requests
 * without one share cd->anon.  A flow with queued requests is on cd->rr, in
 * round-robin order: a flow served goes to its tail.  A pick looks at the
 * oldest @lookahead requests of each flow, CARS_SCAN in all.
 *
 * In-flight accounting
 * --------------------
 * A dispatched request holds a depth slot and die reservations
 * (CARS_RQ_PLACED in its word) until finish_request.  Requeue: a
 * driver-prepared request (RQF_DONTPREP, NVMe) goes back to the device
 * from hctx->dispatch without passing through the elevator, so it keeps
 * both; any other gives them back and, inserted again, goes first in its
 * flow.  Flush requests never reach an elevator; on 6.1 a REQ_PREFLUSH or
 * REQ_FUA request gets no prepare_request and one requeued after a reset
 * can be inserted: such unprepared requests go to cd->bypass, dispatched
 * first, uncounted.  Merges: back merges through the elevator hash, any
 * flows, into requests queued when they would wait (cars_will_wait()); a
 * request merged away leaves its flow's FIFO in requests_merged.
 *
 * Insertion
 * ---------
 * insert_requests stamps each new request's queue time, fires the insert
 * events (block_rq_insert, cars_insert) in the submitter's context and
 * posts the list to cd->inbox, lock-free (elevator/iosched-inbox.h),
 * touching no request after posting; dispatch takes what
 * was posted under cd->lock and inserts it into the flows first thing
 * (cars_insert_list()), so a request takes cd->lock once on its way in.
 * has_work counts the inbox.  A request in the inbox is not yet in the
 * elevator hash: bio_merge cannot merge into it.  One new request taken
 * with nothing queued is decided as it is taken (cars_dispatch_lone()):
 * if the pick takes it, the only head, it goes without passing through
 * its flow's FIFO and the round-robin list.
 *
 * Completions
 * -----------
 * finish_request (and requeue_request of a request that gives its
 * reservations back) takes no lock: it posts the release lock-free
 * (cars_post_release()): one atomic count per die the request was placed
 * on, in the die (cars_released(): a die's pending requests are its
 * reservations less its releases, both counters), then one in its CPU's
 * struct cars_releases, the requests released there.  A die is thus
 * predicted idle from its last request's release, for whichever CPU
 * looks at it next; the die's line is the one that request's dispatch
 * wrote.  A holder of cd->lock applies its own CPU's count of released
 * requests to @released first thing (cars_apply_posted()), and every
 * CPU's when the depth bound looks full (cars_refresh()), before a hold,
 * and for the check at exit.  A release only frees a slot, so a request
 * that the stale count lets go, the fresh one lets go too.  In the common
 * case a completion comes on the CPU that submitted and dispatched it (a
 * hardware queue per CPU), and its record never leaves that CPU's cache.
 *
 * Restart
 * -------
 * Requests held back (depth, or every head conflicting) keep has_work
 * true and set CARS_HELD (an atomic bit: the posters test it without the
 * lock); a release posted takes the bit and re-runs the queues, and the
 * hrtimer, armed for the earliest time a predicted die frees or a held
 * request's max_hold_us ends, takes it and re-runs them then.  A release
 * posted while dispatch decided to hold may not see the bit yet: dispatch
 * sets the bit, and, after a full barrier, applies every CPU's record
 * again, deciding again if it had releases; the poster counts its dies,
 * then its release and, after a full barrier, tests the bit; one of the
 * two sees the other (cars_hold()).
 */
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/init.h>
#include <linux/slab.h>
#include <linux/mm.h>
#include <linux/percpu.h>
#include <linux/spinlock.h>
#include <linux/list.h>
#include <linux/hrtimer.h>
#include <linux/ktime.h>
#include <linux/log2.h>
#include <linux/sysfs.h>
#include <linux/seq_file.h>
#include <linux/sched.h>
#include <linux/bio.h>
#include <linux/blkdev.h>
#include <linux/blk-mq.h>
#include <linux/iocontext.h>

#include <trace/events/block.h>

#include "elevator.h"
#include "blk.h"
#include "blk-mq-sched.h"
#include "blk-mq-debugfs.h"
#include "iosched-compat.h"
#include "iosched-batch.h"
#include "iosched-inbox.h"
#include "iosched-merge.h"
#include "iosched-icq.h"
#include "iosched-sysfs.h"
#include "cars-core.h"

#define CREATE_TRACE_POINTS
#include <trace/events/cars.h>

/* Flows a pick looks at, from the head of the round-robin list. */
#define CARS_SCAN		32
/* Chunks of the record of writes: 4096 x 256 pages, 4 GiB at 4 KiB. */
#define CARS_MAP_CHUNKS		4096U
#define CARS_MAX_CMT		4096U
#define CARS_MAX_REGION_KB	1048576U

/* A flow: all under cd->lock except @pid. */
struct cars_flow {
	struct list_head fifo;		/* queued requests, oldest first */
	struct list_head rr_node;	/* on cd->rr while @fifo is not empty */
	pid_t pid;			/* constant: the context's creator */
	u32 queued;
	u64 dispatched;
	atomic64_t completed;		/* lock-free: finish_request */
};

struct cars_icq {
	struct io_cq icq;		/* first: the core's part */
	struct cars_flow flow;
	bool ready;			/* flow set up: iosched_icq_wait_ready() */
};

/*
 * Counters, per CPU: incremented by holders of cd->lock (this_cpu_inc()),
 * summed by debugfs "counters".  Shared, they would put one more cache
 * line a request in every CPU's way.
 */
struct cars_counts {
	u64 dispatched;
	u64 merged;
	u64 bypassed;
	u64 held_depth;		/* dispatch calls held by the depth */
	u64 held_conflict;	/* ... by every head conflicting */
	u64 batch_ended;	/* ... by a head of another hw queue */
};

enum {
	CARS_HELD,		/* dispatch held queued requests back */
};

/*
 * Requests released on one CPU without cd->lock ("Completions"), per CPU:
 * counted by cars_post_release() in any context, read by holders of
 * cd->lock, mostly on the same CPU (cars_apply_posted(),
 * cars_apply_all()).  A poster preempted and moved meanwhile may count in
 * the record of the CPU it left: only the atomic is written without the
 * lock, so that costs a cache line, nothing else.
 */
struct cars_releases {
	/* requests released here since init, counted after their dies */
	atomic_long_t released;
	unsigned long applied;		/* of @released: under cd->lock */
} ____cacheline_aligned_in_smp;

/* Shared state of the lock-free paths, seldom written. */
struct cars_posted {
	atomic64_t requeued;		/* requeue_request calls counted */
	atomic64_t requeue_released;	/* ... that released a request */
	/*
	 * CARS_HELD, atomic bit operations: set by a dispatch that holds
	 * requests back, tested by each release after it counted itself.
	 */
	unsigned long flags;
};

/*
 * Laid out by who writes what how often: what every request writes under
 * cd->lock shares the lock's cache lines, and the lines other CPUs read
 * locklessly hold nothing written more often than they are read.
 */
struct cars_data {
	/* Constant, read-mostly. */
	struct request_queue *q;	/* constant */
	/* constant pointer: the dispatch batch records (iosched-batch.h) */
	struct iosched_batch __percpu *batch;
	/* constant pointer: counters per CPU, this_cpu_inc() under cd->lock */
	struct cars_counts __percpu *counts;
	/* constant pointer: releases posted per CPU ("Completions") */
	struct cars_releases __percpu *rel;
	void *map_mem;			/* constant: the record's memory */
	void *cmt_mem;			/* constant: the cache model's */
	/*
	 * Requests queued, written under cd->lock, read locklessly by
	 * has_work and bio_merge: here as it changes only when requests
	 * wait, which a request sent as it comes does not
	 * (cars_dispatch_lone()).
	 */
	unsigned int queued;

	/* Tunables in their sysfs units: under cd->lock (see cars_apply()). */
	unsigned int nr_dies;
	unsigned int page_kb;
	unsigned int read_us;
	unsigned int write_us;
	unsigned int erase_us;
	unsigned int depth;
	unsigned int throttle_size;
	unsigned int max_hold_us;
	unsigned int filter;
	unsigned int cmt_regions;
	unsigned int cmt_region_kb;
	unsigned int lookahead;

	/* Under the lock ("Locking" above), written for every request first. */
	spinlock_t lock ____cacheline_aligned_in_smp;
	u64 placed;			/* requests given a slot, since init;
					 * also read locklessly (cars_inflight())
					 */
	u64 released;			/* of them, released and applied */
	struct cars_sched s;		/* dies, record, cache, throttle */
	struct list_head rr;		/* flows with queued requests */
	struct list_head bypass;	/* unprepared requests */
	u64 timer_at;			/* when it was last armed for, 0: not */
	struct hrtimer timer;		/* earliest die free / hold end */
	struct cars_head heads[CARS_SCAN];	/* dispatch's scratch */
	struct cars_flow *head_flow[CARS_SCAN];
	struct request *head_rq[CARS_SCAN];
	struct cars_flow anon;		/* requests without an io_cq */
	/* each die's @done lock-free: cars_post_release() */
	struct cars_die die[CARS_MAX_DIES];

	/* lock-free: see struct cars_posted */
	struct cars_posted posted ____cacheline_aligned_in_smp;
	/* requests inserted, lock-free, not yet taken ("Insertion") */
	struct iosched_inbox inbox ____cacheline_aligned_in_smp;
};

/*
 * Per-request state, only for prepared requests: rq->elv.priv[0] the time
 * it was queued (ns), priv[1] the cars-core.h placement word with the
 * flags below, both zeroed by prepare_request; rq->elv.icq the flow.
 */
#define CARS_RQ_QUEUED		0x0100000000000000ULL	/* on a flow's FIFO */
#define CARS_RQ_OWNED		0x0200000000000000ULL	/* inserted, not freed */
#define CARS_RQ_FLAGS		(CARS_RQ_QUEUED | CARS_RQ_OWNED)

static_assert(BITS_PER_LONG == 64, "CARS keeps 64-bit words in rq->elv.priv");

static inline u64 cars_rq_get(struct request *rq)
{
	return (u64)(unsigned long)rq->elv.priv[1];
}

static inline void cars_rq_put(struct request *rq, u64 word)
{
	rq->elv.priv[1] = (void *)(unsigned long)word;
}

static inline u64 cars_rq_time(struct request *rq)
{
	return (u64)(unsigned long)rq->elv.priv[0];
}

static struct cars_flow *cars_rq_flow(struct cars_data *cd, struct request *rq)
{
	if (!rq->elv.icq)
		return &cd->anon;
	return &container_of(rq->elv.icq, struct cars_icq, icq)->flow;
}

static const char *cars_disk_name(struct cars_data *cd)
{
	return cd->q->disk ? cd->q->disk->disk_name : "?";
}

static void cars_flow_init(struct cars_flow *f, pid_t pid)
{
	INIT_LIST_HEAD(&f->fifo);
	INIT_LIST_HEAD(&f->rr_node);
	f->pid = pid;
	f->queued = 0;
	f->dispatched = 0;
	atomic64_set(&f->completed, 0);
}

static enum cars_op cars_rq_op(struct request *rq)
{
	switch (req_op(rq)) {
	case REQ_OP_READ:
		return CARS_OP_READ;
	case REQ_OP_DISCARD:
	case REQ_OP_SECURE_ERASE:
		return CARS_OP_ERASE;
	default:
		return CARS_OP_WRITE;
	}
}

static u32 cars_cur_depth(struct cars_data *cd)
{
	unsigned long nr = READ_ONCE(cd->q->nr_requests);
	u32 depth = cd->depth;

	lockdep_assert_held(&cd->lock);

	if (nr < depth)
		depth = nr;
	return depth ? depth : 1;
}

/* The tunables in the core's units. */
static struct cars_params cars_params_of(struct cars_data *cd)
{
	struct cars_params p = {
		.nr_dies = cd->nr_dies,
		.page_sectors = cd->page_kb * 2,
		.read_ns = (u64)cd->read_us * NSEC_PER_USEC,
		.write_ns = (u64)cd->write_us * NSEC_PER_USEC,
		.erase_ns = (u64)cd->erase_us * NSEC_PER_USEC,
		.throttle_size = cd->throttle_size,
		.max_hold_ns = (u64)cd->max_hold_us * NSEC_PER_USEC,
		.filter = cd->filter,
		.cmt_region_sectors = cd->cmt_region_kb * 2,
	};

	return p;
}

/*
 * Arm the hrtimer for @at (ns, CLOCK_MONOTONIC) unless it is queued for
 * an earlier time.  The callback takes no lock and leaves @timer_at as it
 * is, so a timer no longer queued is armed again: one that fired a moment
 * ago has re-run the queues or is about to.
 */
static void cars_arm_timer(struct cars_data *cd, u64 at)
{
	lockdep_assert_held(&cd->lock);

	if (!at || (cd->timer_at && cd->timer_at <= at &&
		    hrtimer_is_queued(&cd->timer)))
		return;
	cd->timer_at = at;
	hrtimer_start(&cd->timer, ns_to_ktime(at), HRTIMER_MODE_ABS);
}

/*
 * Whether dispatch held requests back since the flag was last taken; any
 * context, lock-free.  The caller's posting is ordered before the test by
 * a full barrier (see "Restart").
 */
static bool cars_take_held(struct cars_data *cd)
{
	return test_bit(CARS_HELD, &cd->posted.flags) &&
	       test_and_clear_bit(CARS_HELD, &cd->posted.flags);
}

/*
 * Re-run the hardware queues, never under cd->lock (see "Locking").  A
 * completion's interrupt may come while its CPU holds the lock, which is
 * never taken with interrupts off: lockdep then counts the lock as held by
 * the interrupt too, so only task context is checked.  The run is
 * asynchronous and takes no lock of this file's.
 */
static void cars_kick(struct cars_data *cd, bool held)
{
	if (in_task())
		lockdep_assert_not_held(&cd->lock);

	if (held)
		blk_mq_run_hw_queues(cd->q, true);
}

/*
 * Requests released since init, as this CPU sees them: any context, the
 * sum over the CPUs' records (cars_releases), for debugfs, the trace
 * events and the check at exit; dispatch uses @released instead.
 */
static u64 cars_released_posted(struct cars_data *cd)
{
	u64 sum = 0;
	int cpu;

	for_each_possible_cpu(cpu)
		sum += atomic_long_read(&per_cpu_ptr(cd->rel, cpu)->released);
	return sum;
}

/*
 * Requests holding a slot, as this CPU sees them: any context.  The
 * releases are read first, so that a request placed and released since
 * is counted in neither.
 */
static u64 cars_inflight(struct cars_data *cd)
{
	u64 released = cars_released_posted(cd);

	/* a release read is of a placing the later read sees */
	smp_rmb();
	return READ_ONCE(cd->placed) - released;
}

/*
 * Requests holding a slot as the holder of cd->lock knows them: at least
 * as many as hold one (the releases not yet applied are not subtracted).
 */
static u64 cars_held_slots(struct cars_data *cd)
{
	lockdep_assert_held(&cd->lock);

	return cd->placed - cd->released;
}

/*
 * cars_post_release() - the request whose placement word is @word gives
 * back its slot and die reservations ("Completions"): its dies each have
 * one request fewer pending (cars_released()), and the request is counted
 * in this CPU's record for a holder of cd->lock.  Any context, lock-free;
 * the caller owns the request (it is in no list of CARS's).  Ordered
 * before the caller's cars_take_held() by a full barrier.
 */
static void cars_post_release(struct cars_data *cd, u64 word)
{
	/* any CPU's record will do: a task moved since posts to the old one */
	struct cars_releases *r = raw_cpu_ptr(cd->rel);
	struct cars_place pl = cars_rq_place(word);

	cars_released(&cd->s, &pl);
	/* the dies released before the request counted: cars_apply_record() */
	smp_mb__before_atomic();
	atomic_long_inc(&r->released);
	/* the release counted before the caller's test: pairs with cars_hold() */
	smp_mb__after_atomic();
}

/*
 * The time of a section under cd->lock, read once (*@now, 0: not yet) and
 * from the plug's cached clock where there is one (compat_blk_time_ns()):
 * the die model counts in microseconds of flash operations.
 */
static u64 cars_now(u64 *now)
{
	if (!*now)
		*now = compat_blk_time_ns();
	return *now;
}

/*
 * Apply the requests released in record @r since it was last applied to
 * @released; the dies of those requests are read after it (their
 * releases came first: cars_post_release()).  Returns whether any was.
 */
static bool cars_apply_record(struct cars_data *cd, struct cars_releases *r)
{
	unsigned long released = atomic_long_read(&r->released);

	lockdep_assert_held(&cd->lock);

	if (released == r->applied)
		return false;
	cd->released += released - r->applied;
	r->applied = released;
	/* the count read before the dies: pairs with cars_post_release() */
	smp_rmb();
	return true;
}

/*
 * Apply this CPU's record ("Completions"): the first thing every section
 * under cd->lock that decides does.  Any CPU's record would be correct:
 * this one's is the one likely in this CPU's cache.
 */
static void cars_apply_posted(struct cars_data *cd)
{
	cars_apply_record(cd, raw_cpu_ptr(cd->rel));
}

/* Apply every CPU's record; returns whether any had releases. */
static bool cars_apply_all(struct cars_data *cd)
{
	bool any = false;
	int cpu;

	for_each_possible_cpu(cpu)
		any |= cars_apply_record(cd, per_cpu_ptr(cd->rel, cpu));
	return any;
}

/*
 * The depth bound is found full: apply every CPU's record first, once a
 * section (*@all).
 */
static void cars_refresh(struct cars_data *cd, bool *all)
{
	if (*all)
		return;
	*all = true;
	cars_apply_all(cd);
}

/*
 * A tunable changed: the core's parameters follow; @geometry (dies, page
 * size) forgets the die states and the record of writes, @cache (regions,
 * region size) empties the cache model.
 */
static void cars_apply(struct cars_data *cd, bool geometry, bool cache)
{
	lockdep_assert_held(&cd->lock);

	cd->s.p = cars_params_of(cd);
	if (geometry)
		cars_reset_geometry(&cd->s, cd->map_mem, CARS_MAP_CHUNKS);
	if (cache)
		cars_set_cache(&cd->s, cd->cmt_mem, cd->cmt_regions);
}

/*
 * Dispatch holds queued requests back: set CARS_HELD for the next release
 * posted or the hrtimer to take, then apply every CPU's record.  Returns
 * whether one held a release, whose poster may have tested the flag
 * before it was set: the caller then decides again.
 */
static bool cars_hold(struct cars_data *cd)
{
	lockdep_assert_held(&cd->lock);

	set_bit(CARS_HELD, &cd->posted.flags);
	/* pairs with cars_post_release(): the flag set before the reads */
	smp_mb__after_atomic();
	return cars_apply_all(cd);
}

/*
 * A request inserted still placed (no known path does this: a requeue
 * either keeps the placement, RQF_DONTPREP, or gives it back) gives it
 * back as a completion would; the queues run after an insertion anyway.
 */
static __always_inline void cars_release(struct cars_data *cd,
					 struct request *rq)
{
	u64 word = cars_rq_get(rq);

	lockdep_assert_held(&cd->lock);

	if (likely(!(word & CARS_RQ_PLACED)))
		return;
	cars_rq_put(rq, word & CARS_RQ_FLAGS);
	cars_post_release(cd, word);
}

/* Take @rq off its flow: inline at dispatch, a call from the merge path. */
static __always_inline void __cars_remove_request(struct cars_data *cd,
						  struct cars_flow *f,
						  struct request *rq)
{
	lockdep_assert_held(&cd->lock);

	list_del_init(&rq->queuelist);
	iosched_forget_merge(cd->q, rq);
	cars_rq_put(rq, cars_rq_get(rq) & ~CARS_RQ_QUEUED);
	if (!--f->queued)
		list_del_init(&f->rr_node);
	WRITE_ONCE(cd->queued, cd->queued - 1);
}

static noinline void cars_remove_request(struct cars_data *cd,
					 struct cars_flow *f,
					 struct request *rq)
{
	__cars_remove_request(cd, f, rq);
}

/*
 * Will a request queued now wait: are as many requests queued and in
 * flight as the depth allows, or did dispatch last hold requests back
 * (depth, or every head conflicting)?  Only such a request is indexed for
 * merging, as in K2 and FlashFQ: one that dispatch hands out at once would
 * only cost the hash its insertion and removal.  A request that waits
 * after all (its die turns out busy) only misses merges.
 */
static bool cars_will_wait(struct cars_data *cd)
{
	lockdep_assert_held(&cd->lock);

	return cd->queued + cars_held_slots(cd) >= cars_cur_depth(cd) ||
	       test_bit(CARS_HELD, &cd->posted.flags);
}

static void cars_insert_request(struct cars_data *cd, struct request *rq,
				struct list_head *free)
{
	struct request_queue *q = cd->q;
	struct cars_flow *f;
	bool at_head;
	u64 word;

	lockdep_assert_held(&cd->lock);

	if (!compat_rq_elv_finish(rq)) {
		list_add_tail(&rq->queuelist, &cd->bypass);
		WRITE_ONCE(cd->queued, cd->queued + 1);
		return;
	}
	f = cars_rq_flow(cd, rq);
	cars_release(cd, rq);
	word = cars_rq_get(rq);
	at_head = word & CARS_RQ_OWNED;
	if (at_head) {
		/* requeued: goes first in its flow, keeps its queue time */
		list_add(&rq->queuelist, &f->fifo);
	} else {
		if (cd->queued && blk_mq_sched_try_insert_merge(q, rq, free))
			return;
		/* queued since cars_insert_requests() stamped it */
		list_add_tail(&rq->queuelist, &f->fifo);
		if (rq_mergeable(rq) && cars_will_wait(cd)) {
			elv_rqhash_add(q, rq);
			if (!q->last_merge)
				q->last_merge = rq;
		}
	}
	cars_rq_put(rq, word | CARS_RQ_OWNED | CARS_RQ_QUEUED);
	if (!f->queued++)
		list_add_tail(&f->rr_node, &cd->rr);
	WRITE_ONCE(cd->queued, cd->queued + 1);
}

/*
 * Lock-free ("Insertion"): a new request's queue time is its insertion's
 * (a requeued one keeps its own); the list goes to cd->inbox for the next
 * dispatch.  @flags are not needed: a requeued request goes first in its
 * flow by its own word (CARS_RQ_OWNED), an unprepared one to the bypass.
 */
static void cars_insert_requests(struct blk_mq_hw_ctx *hctx,
				 struct list_head *list, compat_insert_t flags)
{
	struct cars_data *cd = hctx->queue->elevator->elevator_data;
	struct request *rq;
	u64 now = compat_blk_time_ns();
	bool owned;

	list_for_each_entry(rq, list, queuelist) {
		trace_block_rq_insert(rq);
		if (!compat_rq_elv_finish(rq))
			continue;
		owned = cars_rq_get(rq) & CARS_RQ_OWNED;
		if (!owned)
			rq->elv.priv[0] = (void *)(unsigned long)now;
		trace_cars_insert(rq, cars_rq_flow(cd, rq)->pid, owned);
	}
	iosched_inbox_post(&cd->inbox, list);
}

/*
 * Insert @rq and those chained after it, taken from cd->inbox
 * (iosched_inbox_take()), in posting order; @free as above.
 */
static void cars_insert_list(struct cars_data *cd, struct request *rq,
			     struct list_head *free)
{
	struct request *next;

	lockdep_assert_held(&cd->lock);

	for (; rq; rq = next) {
		next = rq->rq_next;
		cars_insert_request(cd, rq, free);
	}
}

/* What cars_pick() knows of @rq, the request of flow @f, in @h. */
static __always_inline void cars_head_of(struct cars_head *h,
					 struct cars_flow *f,
					 struct request *rq)
{
	h->flow = (unsigned long)f;
	h->sector = blk_rq_pos(rq);
	h->nr_sectors = blk_rq_sectors(rq);
	h->op = cars_rq_op(rq);
	h->arrival = cars_rq_time(rq);
}

/* Entry @n of what cars_pick() looks at: @rq, the request of flow @f. */
static __always_inline void cars_head(struct cars_data *cd, u32 n,
				      struct cars_flow *f, struct request *rq)
{
	cars_head_of(&cd->heads[n], f, rq);
	cd->head_flow[n] = f;
	cd->head_rq[n] = rq;
}

/*
 * Fill what cars_pick() looks at: the oldest cd->lookahead requests of
 * each flow in round-robin order, CARS_SCAN in all.  Returns how many.
 */
static u32 cars_heads(struct cars_data *cd)
{
	struct cars_flow *f;
	struct request *rq;
	u32 n = 0, k;

	lockdep_assert_held(&cd->lock);

	list_for_each_entry(f, &cd->rr, rr_node) {
		k = 0;
		list_for_each_entry(rq, &f->fifo, queuelist) {
			cars_head(cd, n, f, rq);
			if (++n == CARS_SCAN || ++k == cd->lookahead)
				break;
		}
		if (n == CARS_SCAN)
			break;
	}
	return n;
}

/*
 * @rq, of flow @f, chosen by @c and placed at @pl (cars_place() in this
 * section, with @hit), goes to the device at @now: its dies are reserved
 * and its placement kept in its word; counted, traced.
 */
static __always_inline void cars_send(struct cars_data *cd,
				      struct cars_flow *f, struct request *rq,
				      const struct cars_choice *c,
				      const struct cars_place *pl, bool hit,
				      u64 now)
{
	lockdep_assert_held(&cd->lock);

	/* As mq-deadline: no more merging into a request handed out. */
	rq->rq_flags |= RQF_STARTED;
	cars_reserve(&cd->s, (unsigned long)f, blk_rq_pos(rq), pl, hit, now);
	cars_rq_put(rq, (cars_rq_get(rq) & CARS_RQ_FLAGS) | cars_rq_word(pl));
	WRITE_ONCE(cd->placed, cd->placed + 1);
	f->dispatched++;
	this_cpu_inc(cd->counts->dispatched);
	trace_cars_dispatch(rq, f->pid, pl->die, pl->ndies, pl->op, c->forced,
			    c->cmt_miss, cars_held_slots(cd));
}

/*
 * @batch: the hardware queue of the requests handed out so far in this
 * dispatch batch (NULL: none, or any may follow); the pick of a request
 * of another ends the batch, so that the requests reach the device in the
 * order their dies were predicted in (elevator/iosched-batch.h).
 * @now: the section's time (cars_now()); *@all: every CPU's released
 * requests were applied in the section (cars_refresh()).  Sets *@again
 * when it held requests back as a release was posted: the caller decides
 * again (cars_hold()).
 */
static struct request *__cars_dispatch_request(struct cars_data *cd,
					       const struct blk_mq_hw_ctx *batch,
					       u64 *now, bool *all,
					       bool *again)
{
	struct cars_choice c;
	struct cars_place pl;
	struct cars_flow *f;
	struct request *rq;
	u32 depth;
	bool hit, first;

	lockdep_assert_held(&cd->lock);

	rq = list_first_entry_or_null(&cd->bypass, struct request, queuelist);
	if (rq) {
		list_del_init(&rq->queuelist);
		WRITE_ONCE(cd->queued, cd->queued - 1);
		this_cpu_inc(cd->counts->bypassed);
		return rq;
	}
	if (list_empty(&cd->rr))
		return NULL;
	depth = cars_cur_depth(cd);
	if (cars_held_slots(cd) >= depth)
		cars_refresh(cd, all);
	if (cars_held_slots(cd) >= depth) {
		*again = cars_hold(cd);
		if (!*again)
			this_cpu_inc(cd->counts->held_depth);
		return NULL;
	}
	/* the first flow's oldest, which mostly goes: cars_pick_first() */
	f = list_first_entry(&cd->rr, struct cars_flow, rr_node);
	cars_head(cd, 0, f, list_first_entry(&f->fifo, struct request,
					     queuelist));
	first = cars_pick_first(&cd->s, &cd->heads[0], cars_now(now), &pl,
				&hit);
	if (first) {
		c = (struct cars_choice){ .idx = 0, .first_skip = CARS_NONE };
	} else {
		/*
		 * The full pick weighs each head's wait: by the clock, as a
		 * plug's reading may be older than a queue time another CPU
		 * stamped since.  room: every queued request fits in the free
		 * slots.
		 */
		*now = ktime_get_ns();
		c = cars_pick(&cd->s, cd->heads, cars_heads(cd), *now,
			      cd->queued <= depth - cars_held_slots(cd));
		if (c.idx != CARS_NONE)
			pl = cars_place(&cd->s, cd->heads[c.idx].sector,
					cd->heads[c.idx].nr_sectors,
					cd->heads[c.idx].op, &hit);
	}
	/* counted when made: the next batch picks it again */
	if (c.idx != CARS_NONE &&
	    iosched_batch_ends(batch, cd->head_rq[c.idx])) {
		this_cpu_inc(cd->counts->batch_ended);
		return NULL;
	}
	cars_count_pick(&cd->s, &c);
	if (c.first_skip != CARS_NONE)
		trace_cars_skip(cd->q, cd->head_flow[c.first_skip]->pid,
				c.first_reason, c.first_die,
				c.skipped[CARS_SKIP_DIE_BUSY] +
				c.skipped[CARS_SKIP_CMT_MISS] +
				c.skipped[CARS_SKIP_THROTTLE],
				c.idx != CARS_NONE);
	if (c.idx == CARS_NONE) {
		*again = cars_hold(cd);
		if (!*again) {
			this_cpu_inc(cd->counts->held_conflict);
			cars_arm_timer(cd, c.wake_at);
		}
		return NULL;
	}
	f = cd->head_flow[c.idx];
	rq = cd->head_rq[c.idx];
	__cars_remove_request(cd, f, rq);
	/* the flow served goes to the tail: round-robin */
	if (f->queued)
		list_move_tail(&f->rr_node, &cd->rr);
	cars_send(cd, f, rq, &c, &pl, hit, *now);
	return rq;
}

/*
 * A dispatch took one request, @rq, from the inbox, and nothing is
 * queued: if it is a new request (prepared, not yet inserted) within the
 * depth and of this dispatch batch's hardware queue, and the pick takes
 * it (cars_pick_first(): it is the only head, the first flow's oldest),
 * it goes without passing through its flow's FIFO and the round-robin
 * list, which a request sent at once only passes through: the same
 * placement, counters and events.  Else it is inserted as
 * cars_insert_request() inserts it (@free as there) for the caller's
 * decision, which applies every CPU's releases where the depth would
 * refuse it.  @now as __cars_dispatch_request()'s.  Returns @rq if it
 * went.
 */
static struct request *cars_dispatch_lone(struct cars_data *cd,
					  struct request *rq,
					  const struct blk_mq_hw_ctx *batch,
					  u64 *now, struct list_head *free)
{
	struct cars_choice c = { .idx = 0, .first_skip = CARS_NONE };
	struct cars_head h;	/* not cd->heads[0]: a line less to write */
	struct cars_place pl;
	struct cars_flow *f;
	bool hit;

	lockdep_assert_held(&cd->lock);

	if (!compat_rq_elv_finish(rq) || cars_rq_get(rq) ||
	    cars_held_slots(cd) >= cars_cur_depth(cd) ||
	    iosched_batch_ends(batch, rq))
		goto insert;
	f = cars_rq_flow(cd, rq);
	cars_head_of(&h, f, rq);
	if (!cars_pick_first(&cd->s, &h, cars_now(now), &pl, &hit))
		goto insert;
	cars_rq_put(rq, CARS_RQ_OWNED);
	cars_send(cd, f, rq, &c, &pl, hit, *now);
	return rq;
insert:
	cars_insert_request(cd, rq, free);
	return NULL;
}

static struct request *cars_dispatch_request(struct blk_mq_hw_ctx *hctx)
{
	struct cars_data *cd = hctx->queue->elevator->elevator_data;
	const struct blk_mq_hw_ctx *batch;
	struct request *rq;
	bool again, all = false;
	u64 now = 0;
	LIST_HEAD(free);

	spin_lock(&cd->lock);
	batch = iosched_batch(cd->batch, hctx);
	cars_apply_posted(cd);
	rq = iosched_inbox_take(&cd->inbox);
	if (rq && !rq->rq_next && !cd->queued) {
		/* one request and nothing queued: decided as it is taken */
		rq = cars_dispatch_lone(cd, rq, batch, &now, &free);
	} else {
		cars_insert_list(cd, rq, &free);
		rq = NULL;
	}
	while (!rq) {
		again = false;
		rq = __cars_dispatch_request(cd, batch, &now, &all, &again);
		if (!again)
			break;
	}
	iosched_batch_note(cd->batch, hctx, rq);
	spin_unlock(&cd->lock);

	compat_free_requests(&free);
	return rq;
}

/* False ends the dispatch batch being built (elevator/iosched-batch.h). */
static bool cars_has_work(struct blk_mq_hw_ctx *hctx)
{
	struct cars_data *cd = hctx->queue->elevator->elevator_data;

	return iosched_batch_has_work(cd->batch, READ_ONCE(cd->queued) ||
				      !iosched_inbox_empty(&cd->inbox));
}

static void cars_prepare_request(struct request *rq)
{
	struct io_cq *icq = iosched_icq_find_get(rq->q);

	if (icq)
		iosched_icq_wait_ready(rq->q, &container_of(icq, struct cars_icq, icq)->ready);
	rq->elv.icq = icq;
	rq->elv.priv[0] = NULL;
	rq->elv.priv[1] = NULL;
}

/*
 * Lock-free, any context: a request CARS placed posts its release
 * ("Completions").  The request is in no list of CARS's: dispatched, or
 * merged away (requests_merged zeroed its word under cd->lock, before the
 * same task freed it).
 */
static void cars_finish_request(struct request *rq)
{
	struct cars_data *cd = rq->q->elevator->elevator_data;
	u64 word = cars_rq_get(rq);

	WARN_ONCE(word & CARS_RQ_QUEUED, "cars: %s: request freed while queued\n",
		  cars_disk_name(cd));
	if (word & CARS_RQ_PLACED) {
		struct cars_flow *f = cars_rq_flow(cd, rq);
		struct cars_place pl = cars_rq_place(word);

		atomic64_inc(&f->completed);
		cars_post_release(cd, word);
		/* the in-flight count sums every CPU's: only when traced */
		if (trace_cars_complete_enabled())
			trace_cars_complete(rq, f->pid, pl.die, pl.ndies,
					    cars_inflight(cd));
		cars_kick(cd, cars_take_held(cd));
	}
	rq->elv.priv[0] = NULL;
	rq->elv.priv[1] = NULL;
	if (rq->elv.icq) {
		put_io_context(rq->elv.icq->ioc);
		rq->elv.icq = NULL;
	}
}

/*
 * Lock-free, any context, as finish_request: the request left the device
 * and is in no list of CARS's until blk-mq inserts it again, after this.
 */
static void cars_requeue_request(struct request *rq)
{
	struct cars_data *cd = rq->q->elevator->elevator_data;
	u64 word = cars_rq_get(rq);
	bool kept;

	if (!(word & CARS_RQ_OWNED) || !(word & CARS_RQ_PLACED))
		return;
	atomic64_inc(&cd->posted.requeued);
	/*
	 * A request the driver prepared (RQF_DONTPREP, NVMe) goes back to
	 * the driver from hctx->dispatch, not through CARS: it keeps its
	 * slot and dies until it finishes.
	 */
	kept = rq->rq_flags & RQF_DONTPREP;
	if (!kept) {
		cars_rq_put(rq, word & CARS_RQ_FLAGS);
		atomic64_inc(&cd->posted.requeue_released);
		cars_post_release(cd, word);
	}
	if (trace_cars_requeue_enabled())
		trace_cars_requeue(rq, cars_rq_flow(cd, rq)->pid, kept,
				   cars_inflight(cd));
	if (!kept)
		cars_kick(cd, cars_take_held(cd));
}

/* Hard interrupt context, lock-free: a held request may go now. */
static enum hrtimer_restart cars_timer_fn(struct hrtimer *timer)
{
	struct cars_data *cd = container_of(timer, struct cars_data, timer);

	/* nothing posted: the flag is dispatch's, set before it armed us */
	cars_kick(cd, cars_take_held(cd));
	return HRTIMER_NORESTART;
}

/* Merging: back merges through the elevator hash. */

static bool cars_allow_merge(struct request_queue *q, struct request *rq,
			     struct bio *bio)
{
	struct cars_data *cd = q->elevator->elevator_data;

	lockdep_assert_held(&cd->lock);

	return cars_rq_get(rq) & CARS_RQ_QUEUED;
}

/* @next was merged into @rq and will be freed. */
static void cars_requests_merged(struct request_queue *q, struct request *rq,
				 struct request *next)
{
	struct cars_data *cd = q->elevator->elevator_data;

	lockdep_assert_held(&cd->lock);

	/* only a prepared request's priv is ours */
	if (!compat_rq_elv_finish(next))
		return;
	/* keep the earlier queue time: the older request's hold */
	if (cars_rq_time(next) && cars_rq_time(next) < cars_rq_time(rq))
		rq->elv.priv[0] = next->elv.priv[0];
	if (cars_rq_get(next) & CARS_RQ_QUEUED) {
		cars_remove_request(cd, cars_rq_flow(cd, next), next);
		cars_rq_put(next, 0);
		this_cpu_inc(cd->counts->merged);
	}
}

static bool cars_bio_merge(struct request_queue *q, struct bio *bio,
			   unsigned int nr_segs)
{
	struct cars_data *cd = q->elevator->elevator_data;
	struct request *free = NULL;
	bool ret;

	if (!READ_ONCE(cd->queued))
		return false;
	spin_lock(&cd->lock);
	ret = blk_mq_sched_try_merge(q, bio, nr_segs, &free);
	spin_unlock(&cd->lock);

	if (free)
		blk_mq_free_request(free);
	return ret;
}

static void cars_init_icq(struct io_cq *icq)
{
	struct cars_icq *ci = container_of(icq, struct cars_icq, icq);

	cars_flow_init(&ci->flow, current->pid);
	/* pairs with iosched_icq_wait_ready()'s acquire: flow before ready */
	smp_store_release(&ci->ready, true);
}

static int cars_init_sched(struct request_queue *q, compat_init_sched_arg arg)
{
	struct cars_params params;
	struct elevator_queue *eq;
	struct cars_data *cd;

	eq = compat_elevator_alloc(q, arg);
	if (!eq)
		return -ENOMEM;
	cd = kzalloc_node(sizeof(*cd), GFP_KERNEL, q->node);
	if (!cd)
		goto fail;
	cd->map_mem = kvmalloc_node(cars_map_bytes(CARS_MAP_CHUNKS), GFP_KERNEL,
				    q->node);
	cd->cmt_mem = kvmalloc_node(cars_lru_bytes(CARS_MAX_CMT), GFP_KERNEL,
				    q->node);
	cd->batch = iosched_batch_alloc();
	cd->counts = alloc_percpu(struct cars_counts);
	cd->rel = alloc_percpu(struct cars_releases);
	if (!cd->map_mem || !cd->cmt_mem || !cd->batch || !cd->counts ||
	    !cd->rel)
		goto fail;

	cd->q = q;
	spin_lock_init(&cd->lock);
	cars_flow_init(&cd->anon, 0);
	INIT_LIST_HEAD(&cd->rr);
	INIT_LIST_HEAD(&cd->bypass);
	compat_hrtimer_setup(&cd->timer, cars_timer_fn, CLOCK_MONOTONIC,
			     HRTIMER_MODE_ABS);
	cd->nr_dies = CARS_DEFAULT_DIES;
	cd->page_kb = CARS_DEFAULT_PAGE_KB;
	cd->read_us = CARS_DEFAULT_READ_US;
	cd->write_us = CARS_DEFAULT_WRITE_US;
	cd->erase_us = CARS_DEFAULT_ERASE_US;
	cd->depth = CARS_DEFAULT_DIES;
	cd->throttle_size = CARS_DEFAULT_THROTTLE;
	cd->max_hold_us = CARS_DEFAULT_MAX_HOLD_US;
	cd->filter = 1;
	cd->cmt_regions = 0;
	cd->cmt_region_kb = CARS_DEFAULT_CMT_REGION_KB;
	cd->lookahead = CARS_DEFAULT_LOOKAHEAD;
	params = cars_params_of(cd);
	cars_init(&cd->s, &params, cd->die, cd->map_mem, CARS_MAP_CHUNKS,
		  cd->cmt_mem, cd->cmt_regions);

	eq->elevator_data = cd;
	blk_queue_flag_set(QUEUE_FLAG_SQ_SCHED, q);
	q->elevator = eq;
	return 0;
fail:
	if (cd) {
		iosched_batch_free(cd->batch);
		free_percpu(cd->counts);
		free_percpu(cd->rel);
		kvfree(cd->map_mem);
		kvfree(cd->cmt_mem);
		kfree(cd);
	}
	compat_elevator_put(eq);
	return -ENOMEM;
}

/* The queue is frozen: nothing may be queued or in flight. */
static void cars_exit_sched(struct elevator_queue *e)
{
	struct cars_data *cd = e->elevator_data;

	hrtimer_cancel(&cd->timer);
	WARN_ONCE(cd->queued || cars_inflight(cd) ||
		  !iosched_inbox_empty(&cd->inbox),
		  "cars: %s: %u queued, %llu in flight, inbox %s at exit\n",
		  cars_disk_name(cd), cd->queued, cars_inflight(cd),
		  iosched_inbox_empty(&cd->inbox) ? "empty" : "not empty");
	iosched_batch_free(cd->batch);
	free_percpu(cd->counts);
	free_percpu(cd->rel);
	kvfree(cd->map_mem);
	kvfree(cd->cmt_mem);
	kfree(cd);
}

/* sysfs: /sys/block/<dev>/queue/iosched/, parsed by iosched_parse_uint(). */

static ssize_t cars_show(struct elevator_queue *e, char *page,
			 unsigned int *var)
{
	struct cars_data *cd = e->elevator_data;
	unsigned int val;

	spin_lock(&cd->lock);
	val = *var;
	spin_unlock(&cd->lock);
	return sysfs_emit(page, "%u\n", val);
}

/*
 * Store a tunable in [@min, @max] and apply it (see cars_apply()); the
 * change may release held requests, so the queues run afterwards.
 */
static ssize_t cars_store(struct elevator_queue *e, const char *page,
			  size_t count, unsigned int *var, unsigned int min,
			  unsigned int max, bool geometry, bool cache)
{
	struct cars_data *cd = e->elevator_data;
	unsigned int val;

	if (iosched_parse_uint(page, count, min, max, &val))
		return -EINVAL;
	spin_lock(&cd->lock);
	if (*var != val) {
		*var = val;
		cars_apply(cd, geometry, cache);
	}
	spin_unlock(&cd->lock);
	blk_mq_run_hw_queues(cd->q, true);
	return count;
}

/* @var: the tunable, an lvalue in terms of "cd" (as in FlashFQ). */
#define CARS_SHOW(name, var)						\
static ssize_t cars_##name##_show(struct elevator_queue *e, char *page)	\
{									\
	struct cars_data *cd = e->elevator_data;			\
									\
	return cars_show(e, page, &(var));				\
}

#define CARS_STORE(name, var, min, max, geometry, cache)		\
static ssize_t cars_##name##_store(struct elevator_queue *e,		\
				   const char *page, size_t count)	\
{									\
	struct cars_data *cd = e->elevator_data;			\
									\
	return cars_store(e, page, count, &(var), min, max,		\
			  geometry, cache);				\
}

CARS_SHOW(nr_dies, cd->nr_dies);
CARS_STORE(nr_dies, cd->nr_dies, 1, CARS_MAX_DIES, true, false);
CARS_SHOW(page_kb, cd->page_kb);
CARS_SHOW(read_us, cd->read_us);
CARS_STORE(read_us, cd->read_us, 1, CARS_MAX_OP_US, false, false);
CARS_SHOW(write_us, cd->write_us);
CARS_STORE(write_us, cd->write_us, 1, CARS_MAX_OP_US, false, false);
CARS_SHOW(erase_us, cd->erase_us);
CARS_STORE(erase_us, cd->erase_us, 1, CARS_MAX_OP_US, false, false);
CARS_SHOW(throttle_size, cd->throttle_size);
CARS_STORE(throttle_size, cd->throttle_size, 0, CARS_MAX_THROTTLE, false, false);
CARS_SHOW(max_hold_us, cd->max_hold_us);
CARS_STORE(max_hold_us, cd->max_hold_us, 0, CARS_MAX_HOLD_US, false, false);
CARS_SHOW(filter, cd->filter);
CARS_STORE(filter, cd->filter, 0, 1, false, false);
CARS_SHOW(cmt_regions, cd->cmt_regions);
CARS_STORE(cmt_regions, cd->cmt_regions, 0, CARS_MAX_CMT, false, true);
CARS_SHOW(cmt_region_kb, cd->cmt_region_kb);
CARS_STORE(cmt_region_kb, cd->cmt_region_kb, 4, CARS_MAX_REGION_KB, false, true);
CARS_SHOW(lookahead, cd->lookahead);
CARS_STORE(lookahead, cd->lookahead, 1, CARS_SCAN, false, false);
#undef CARS_SHOW
#undef CARS_STORE

static ssize_t cars_page_kb_store(struct elevator_queue *e, const char *page,
				  size_t count)
{
	struct cars_data *cd = e->elevator_data;
	unsigned int val;

	if (iosched_parse_uint(page, count, 1, CARS_MAX_PAGE_KB, &val) ||
	    !is_power_of_2(val))
		return -EINVAL;
	return cars_store(e, page, count, &cd->page_kb, 1, CARS_MAX_PAGE_KB,
			  true, false);
}

/*
 * write_pointer: the die CARS predicts the next written page goes to.  It
 * starts at 0 and follows the writes CARS dispatches; a device written
 * otherwise (before CARS, or by requests that bypass it) is out of step
 * until this is set from the device (ssdsim: its write_die).
 */
static ssize_t cars_write_pointer_show(struct elevator_queue *e, char *page)
{
	struct cars_data *cd = e->elevator_data;
	u32 wp;

	spin_lock(&cd->lock);
	wp = cd->s.wp;
	spin_unlock(&cd->lock);
	return sysfs_emit(page, "%u\n", wp);
}

static ssize_t cars_write_pointer_store(struct elevator_queue *e,
					const char *page, size_t count)
{
	struct cars_data *cd = e->elevator_data;
	unsigned int val;
	int ret = -EINVAL;

	if (iosched_parse_uint(page, count, 0, CARS_MAX_DIES - 1, &val))
		return -EINVAL;
	spin_lock(&cd->lock);
	if (val < cd->nr_dies) {
		cd->s.wp = val;
		ret = count;
	}
	spin_unlock(&cd->lock);
	return ret;
}

/* depth shows the depth in force (clamped to nr_requests), as K2 does. */
static ssize_t cars_depth_show(struct elevator_queue *e, char *page)
{
	struct cars_data *cd = e->elevator_data;
	u32 depth;

	spin_lock(&cd->lock);
	depth = cars_cur_depth(cd);
	spin_unlock(&cd->lock);
	return sysfs_emit(page, "%u\n", depth);
}

static ssize_t cars_depth_store(struct elevator_queue *e, const char *page,
				size_t count)
{
	struct cars_data *cd = e->elevator_data;
	unsigned int max = min_t(unsigned long, READ_ONCE(cd->q->nr_requests),
				 CARS_MAX_DEPTH);

	return cars_store(e, page, count, &cd->depth, 1, max, false, false);
}

#define CARS_ATTR(name) __ATTR(name, 0644, cars_##name##_show, cars_##name##_store)

static struct elv_fs_entry cars_attrs[] = {
	CARS_ATTR(nr_dies),
	CARS_ATTR(page_kb),
	CARS_ATTR(read_us),
	CARS_ATTR(write_us),
	CARS_ATTR(erase_us),
	CARS_ATTR(depth),
	CARS_ATTR(throttle_size),
	CARS_ATTR(lookahead),
	CARS_ATTR(max_hold_us),
	CARS_ATTR(filter),
	CARS_ATTR(cmt_regions),
	CARS_ATTR(cmt_region_kb),
	CARS_ATTR(write_pointer),
	__ATTR_NULL
};

#undef CARS_ATTR

/* debugfs: /sys/kernel/debug/block/<dev>/sched/ */
#ifdef CONFIG_BLK_DEBUG_FS

static const char *const cars_state_name[] = {
	[CARS_DIE_IDLE] = "idle",
	[CARS_DIE_READ] = "read",
	[CARS_DIE_PROGRAM] = "program",
	[CARS_DIE_ERASE] = "erase",
};

static int cars_dbg_dies_show(void *data, struct seq_file *m)
{
	struct request_queue *q = data;
	struct cars_data *cd = q->elevator->elevator_data;
	u64 now = 0;
	u32 i;

	spin_lock(&cd->lock);
	cars_now(&now);
	for (i = 0; i < cd->s.p.nr_dies; i++) {
		const struct cars_die *d = &cd->die[i];
		enum cars_die_state st = cars_die_state(d, now);

		seq_printf(m, "die %u %s left_ns %llu requests %u\n", i,
			   cars_state_name[st],
			   st == CARS_DIE_IDLE ? 0 : d->busy_until - now,
			   cars_die_pending(d));
	}
	spin_unlock(&cd->lock);
	return 0;
}

static int cars_dbg_counters_show(void *data, struct seq_file *m)
{
	struct request_queue *q = data;
	struct cars_data *cd = q->elevator->elevator_data;
	struct cars_posted *pd = &cd->posted;
	struct cars_counts c = { 0 };
	struct cars_stats st;
	u64 completed;
	int cpu;
	u32 wp;

	spin_lock(&cd->lock);
	for_each_possible_cpu(cpu) {
		const struct cars_counts *pc = per_cpu_ptr(cd->counts, cpu);

		c.dispatched += pc->dispatched;
		c.merged += pc->merged;
		c.bypassed += pc->bypassed;
		c.held_depth += pc->held_depth;
		c.held_conflict += pc->held_conflict;
		c.batch_ended += pc->batch_ended;
	}
	st = cd->s.st;
	wp = cd->s.wp;
	spin_unlock(&cd->lock);
	completed = cars_released_posted(cd) -
		    atomic64_read(&pd->requeue_released);
	seq_printf(m, "dispatched %llu\ncompleted %llu\nrequeued %llu\nmerged %llu\nbypassed %llu\nheld_depth %llu\nheld_conflict %llu\nbatch_ended %llu\n",
		   c.dispatched, completed, (u64)atomic64_read(&pd->requeued),
		   c.merged, c.bypassed, c.held_depth, c.held_conflict,
		   c.batch_ended);
	seq_printf(m, "skip_die_busy %llu\nskip_cmt_miss %llu\nskip_throttle %llu\nthrottle_events %llu\nforced %llu\nunheld %llu\n",
		   st.skips[CARS_SKIP_DIE_BUSY], st.skips[CARS_SKIP_CMT_MISS],
		   st.skips[CARS_SKIP_THROTTLE], st.throttle_events, st.forced,
		   st.unheld);
	seq_printf(m, "map_hits %llu\nmap_misses %llu\nmap_evictions %llu\ncmt_misses %llu\nwrite_pointer %u\n",
		   st.map_hits, st.map_misses, st.map_evictions, st.cmt_misses,
		   wp);
	return 0;
}

static int cars_dbg_inflight_show(void *data, struct seq_file *m)
{
	struct request_queue *q = data;
	struct cars_data *cd = q->elevator->elevator_data;

	seq_printf(m, "%llu\n", cars_inflight(cd));
	return 0;
}

static int cars_dbg_queued_show(void *data, struct seq_file *m)
{
	struct request_queue *q = data;
	struct cars_data *cd = q->elevator->elevator_data;

	seq_printf(m, "%u\n", READ_ONCE(cd->queued));
	return 0;
}

static int cars_dbg_flows_show(void *data, struct seq_file *m)
{
	struct request_queue *q = data;
	struct cars_data *cd = q->elevator->elevator_data;
	struct cars_flow *f;

	spin_lock(&cd->lock);
	list_for_each_entry(f, &cd->rr, rr_node)
		seq_printf(m, "pid %d queued %u dispatched %llu completed %llu\n",
			   f->pid, f->queued, f->dispatched,
			   (u64)atomic64_read(&f->completed));
	spin_unlock(&cd->lock);
	return 0;
}

static int cars_dbg_queue_list_show(void *data, struct seq_file *m)
{
	struct request_queue *q = data;
	struct cars_data *cd = q->elevator->elevator_data;
	struct cars_flow *f;
	struct request *rq;

	spin_lock(&cd->lock);
	list_for_each_entry(rq, &cd->bypass, queuelist) {
		seq_puts(m, "bypass ");
		__blk_mq_debugfs_rq_show(m, rq);
		seq_putc(m, '\n');
	}
	list_for_each_entry(f, &cd->rr, rr_node) {
		list_for_each_entry(rq, &f->fifo, queuelist) {
			seq_printf(m, "flow %d ", f->pid);
			__blk_mq_debugfs_rq_show(m, rq);
			seq_putc(m, '\n');
		}
	}
	spin_unlock(&cd->lock);
	return 0;
}

static const struct blk_mq_debugfs_attr cars_queue_debugfs_attrs[] = {
	{"dies", 0400, cars_dbg_dies_show},
	{"counters", 0400, cars_dbg_counters_show},
	{"inflight", 0400, cars_dbg_inflight_show},
	{"queued", 0400, cars_dbg_queued_show},
	{"flows", 0400, cars_dbg_flows_show},
	{"queue_list", 0400, cars_dbg_queue_list_show},
	{},
};

#endif /* CONFIG_BLK_DEBUG_FS */

static struct elevator_type cars_sched_type = {
	.ops = {
		.init_sched		= cars_init_sched,
		.exit_sched		= cars_exit_sched,
		.insert_requests	= cars_insert_requests,
		.dispatch_request	= cars_dispatch_request,
		.has_work		= cars_has_work,
		.prepare_request	= cars_prepare_request,
		.finish_request		= cars_finish_request,
		.requeue_request	= cars_requeue_request,
		.allow_merge		= cars_allow_merge,
		.bio_merge		= cars_bio_merge,
		.requests_merged	= cars_requests_merged,
		.init_icq		= cars_init_icq,
	},
	.icq_size = sizeof(struct cars_icq),
	.icq_align = __alignof__(struct cars_icq),
#ifdef CONFIG_BLK_DEBUG_FS
	.queue_debugfs_attrs = cars_queue_debugfs_attrs,
#endif
	.elevator_attrs = cars_attrs,
	.elevator_name = "cars",
	.elevator_owner = THIS_MODULE,
};

static int __init cars_init_module(void)
{
	return elv_register(&cars_sched_type);
}

static void __exit cars_exit_module(void)
{
	elv_unregister(&cars_sched_type);
}

module_init(cars_init_module);
module_exit(cars_exit_module);

MODULE_AUTHOR("ssd-iosched project");
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("CARS I/O scheduler: host-side conflict-aware dispatch around busy flash dies");
MODULE_VERSION(IOSCHED_VERSION);
MODULE_INFO(elevator, "cars");
