// SPDX-License-Identifier: GPL-2.0
/*
 * FlashFQ I/O scheduler: fair queueing for flash, after Shen and Park,
 * "FlashFQ: A Fair Queueing I/O Scheduler for Flash-Based SSDs", USENIX ATC
 * 2013.  Throttled Min-SFQ(D) with anticipation over I/O contexts.
 *
 * Each I/O context (a process, a thread, or the processes sharing one
 * through CLONE_IO) is a task with its own FIFO of requests.  A request is
 * tagged when it arrives: start = max(virtual time, the task's last finish
 * tag), finish = start + its cost (linear in size, read and write apart)
 * scaled by its weight.  Dispatch sends the queued request with the
 * smallest start tag while fewer than `depth` requests are in the device,
 * unless the throttle or a blocking anticipation holds it back.  The
 * decisions (tags, virtual time, throttle, anticipation, timer order) live
 * in flashfq-core.h and are unit-tested in userspace; this file keeps the
 * requests, the locking and the interfaces.
 *
 * Interface
 * ---------
 * The sysfs attributes (units, ranges, defaults), the debugfs files and the
 * trace events are documented in flashfq/README.md;
 * tests/python/test_docs.py holds that document to the tables this file
 * registers.
 *
 * Locking
 * -------
 * fd->lock protects everything in struct ffq_data from @s to @stats,
 * and every task's state (struct ffq_tq), and is the dispatch lock of the
 * per-CPU dispatch batch records (fd->batch: elevator/iosched-batch.h).
 * finish_request and requeue_request can run in hard interrupt context and
 * must update virtual time and anticipation, so the lock is taken with
 * interrupts off everywhere:
 * spin_lock_irq() in insert, dispatch, bio_merge and debugfs,
 * spin_lock_irqsave() in finish, requeue, exit_icq and the hrtimer.  The
 * merge callbacks run under it (the core calls them from
 * blk_mq_sched_try_merge() and blk_mq_sched_try_insert_merge(), which this
 * file calls with it held).  exit_icq is called with the io_context's lock
 * (and on 6.1 possibly the queue lock) held and takes fd->lock inside
 * them; fd->lock is never held while taking either, nor while running the
 * hardware queues (which can take the queue lock).  hrtimer_cancel() is
 * only called without fd->lock (the timer callback takes it).  The
 * queues are device-wide, so like mq-deadline and K2 this sets
 * QUEUE_FLAG_SQ_SCHED.  Tunables are written by sysfs stores, which the
 * elevator core serialises with its sysfs_lock, with WRITE_ONCE(), and
 * read with READ_ONCE().
 *
 * Tasks and their lifetime
 * ------------------------
 * A task's state (struct ffq_tq) is allocated by init_icq and named by its
 * io_cq (struct ffq_icq); prepare_request finds it through the io_cq,
 * looked up without the queue lock (iosched_icq_lookup()), or created
 * through ioc_find_get_icq(); bio_merge looks it up the same way.  Both
 * wait, before reading the task, for init_icq to have set ready
 * (iosched_icq_wait_ready(): another task of the context can find an io_cq
 * init_icq has not set up yet).  Requests without one (no io_context, or
 * an allocation failed) share fd->anon.  A task is reference counted
 * (@ref): its io_cq holds one reference until exit_icq (the last task
 * using the context exited, the context is freed, or the elevator is
 * being switched), and every request one from prepare_request until
 * finish_request, so a task lives while any of its requests does, and
 * outlives its io_cq if they do (the requests hold no io_context
 * reference).  exit_icq ends any anticipation and clears the io_cq's
 * pointer: no request is prepared for the context after it, since it runs
 * when no task uses the context any more, when the context has no
 * reference left, or with the queue frozen (block/blk-ioc.c).  The task
 * stays in the heaps while requests of it are outstanding and leaves them
 * when the last one completes; an anticipated task has not exited, so its
 * io_cq's reference keeps it.
 *
 * In-flight accounting
 * --------------------
 * A dispatched request takes one of FFQ_MAX_DEPTH slots (fd->slots), which
 * records its start tag on its task's in-flight list, in dispatch order
 * and so in tag order: the first is the task's smallest in-flight tag
 * (Min-SFQ virtual time needs it; the request itself cannot be listed
 * once the driver owns rq->queuelist).  Only requests the core will call
 * finish_request for are queued by task (compat_rq_elv_finish()); they
 * keep FFQ_RQ_OWNED from insert until finish_request.
 *  - Requeue (e.g. controller reset): a driver-prepared request
 *    (RQF_DONTPREP, NVMe) is issued again from hctx->dispatch without
 *    coming back, so it keeps its slot until finish_request.  Any other
 *    frees the slot at requeue_request, keeps its tags and, inserted
 *    again, goes first in its task's queue.  A request inserted while
 *    still holding a slot (no such path is known) frees it at insert
 *    (debugfs counters "reinsert").
 *  - Flush: flush requests never reach an elevator, nor on 6.1 does a
 *    request of a flush sequence; 6.1 gives REQ_PREFLUSH/REQ_FUA requests
 *    no prepare_request, and one requeued after a reset can be inserted:
 *    such unprepared requests go to fd->bypass and are dispatched first,
 *    untagged and uncounted.  On 6.12 a flush sequence's data part is
 *    inserted (tagged, queued at its task's tail) and its finish_request
 *    comes when it completes.
 *  - Passthrough: 6.12 never gives them to an elevator; 6.1 prepares them,
 *    and one submitted under a plug is inserted: it is tagged like any
 *    request, with the cost of its size.
 *  - Merges: a request merged away was queued, never dispatched; it leaves
 *    its task's queue in requests_merged and its finish_request finds it
 *    not owned.  Bio merges only join requests of the same task
 *    (allow_merge); front merges use per-task sorted trees, back merges
 *    the elevator hash, both holding only requests that will wait
 *    (ffq_will_wait()).  The grown request is re-tagged (ffq_retag()).
 *    Multi-range discards stay out of the hash (the core merges those
 *    without requests_merged).
 *
 * Restart
 * -------
 * Requests held back (depth reached, throttle, blocking anticipation)
 * keep has_work true, and dispatch sets FFQ_HELD; the completion or
 * requeue that may release them clears it and re-runs the hardware queues,
 * and the anticipation hrtimer, armed for the earliest deadline of all
 * anticipated tasks, re-runs them when a blocking period or an
 * anticipation ends (all three only if FFQ_HELD is set: without it
 * nothing waits for them, since the core runs the queues after every
 * insert).
 *
 * Deferred updates
 * ----------------
 * A completion that starts its task's anticipation arms the timer for its
 * deadline but leaves the task's places in the heaps for later
 * (ffq_defer(), fd->s.deferred, under fd->lock): every section under the
 * lock first makes that update (ffq_settle_deferred()), except the insert
 * of the same task's next request, whose own update makes it.  A lone
 * synchronous task (one request at a time, or a batch drained before the
 * next) so never puts its anticipation into the heaps (flashfq/README.md,
 * CPU cost).  The
 * unit tests run their random workload both ways and get the same
 * dispatches, tags and virtual time.
 */
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/init.h>
#include <linux/slab.h>
#include <linux/refcount.h>
#include <linux/spinlock.h>
#include <linux/list.h>
#include <linux/rbtree.h>
#include <linux/hrtimer.h>
#include <linux/ktime.h>
#include <linux/sysfs.h>
#include <linux/seq_file.h>
#include <linux/sched.h>
#include <linux/bio.h>
#include <linux/blkdev.h>
#include <linux/blk-mq.h>
#include <linux/iocontext.h>
#include <linux/ioprio.h>

#include <trace/events/block.h>

#include "elevator.h"
#include "blk.h"
#include "blk-mq-sched.h"
#include "blk-mq-debugfs.h"
#include "iosched-compat.h"
#include "iosched-batch.h"
#include "iosched-merge.h"
#include "iosched-icq.h"
#include "iosched-sysfs.h"
#include "flashfq-core.h"

#define CREATE_TRACE_POINTS
#include <trace/events/flashfq.h>

/* A depth slot: one request in the device. */
struct ffq_slot {
	struct list_head node;	/* its task's inflight list while taken */
	struct ffq_tq *tq;	/* the request's task */
	u64 start;		/* the request's start tag */
	u64 dispatch_ns;	/* for flashfq_complete, 0 when not traced */
};

/*
 * A task's queues: all under fd->lock but @pid and @ref ("Tasks and their
 * lifetime" above).
 */
struct ffq_tq {
	struct ffq_task task;		/* flashfq-core.h state and facts */
	struct list_head fifo;		/* queued requests, in tag order */
	struct rb_root sort[2];		/* queued mergeable ones, by sector */
	struct list_head inflight;	/* its slots, in dispatch order */
	struct list_head active_node;	/* on fd->active while active */
	pid_t pid;			/* constant: the context's creator */
	refcount_t ref;			/* the io_cq's and its requests' */
	u64 inserted;			/* requests tagged */
	u64 dispatched;
	u64 completed;
	u64 service;			/* charge of the dispatched ones */
};

struct ffq_icq {
	struct io_cq icq;		/* first: the core's part */
	/*
	 * The task, NULL if its allocation failed or its exit came (its
	 * requests then go to fd->anon): set by init_icq before @ready,
	 * cleared by exit_icq, which no prepare_request or bio_merge for
	 * the io_cq can run beside ("Tasks and their lifetime").
	 */
	struct ffq_tq *tq;
	bool ready;			/* tq set: iosched_icq_wait_ready() */
};

/* Counters kept under fd->lock; debugfs "counters". */
struct ffq_stats {
	u64 dispatched;
	u64 completed;
	u64 requeued;
	u64 merged;
	u64 bypassed;		/* unprepared requests sent untagged */
	u64 reinsert;		/* inserted while holding a slot */
	u64 held_full;		/* dispatch calls held by depth */
	u64 held_throttle;	/* ... by the throttle */
	u64 held_antic;		/* ... by a blocking anticipation */
	u64 batch_ended;	/* ... for a request of another hw queue */
	u64 antic_started;
	u64 antic_expired;
	u64 antic_cancelled;	/* the task's next request came, or exit */
	u64 antic_unblocked;	/* blocking periods that ended */
};

/* Bits of ffq_data.flags, under fd->lock. */
enum {
	FFQ_HELD,		/* dispatch held queued requests back */
};

struct ffq_data {
	struct request_queue *q;	/* constant */
	/* constant pointer: the dispatch batch records (iosched-batch.h) */
	struct iosched_batch __percpu *batch;

	spinlock_t lock;		/* see "Locking" above */
	struct ffq_sched s;		/* tasks' order, virtual time */
	struct ffq_tq anon;		/* requests without an io_cq */
	struct list_head active;	/* active tasks (debugfs) */
	struct list_head bypass;	/* unprepared requests */
	unsigned int nr_free;		/* free slots: @free[0..nr_free) */
	unsigned int queued;		/* requests on tasks' queues; also
					 * read locklessly by bio_merge
					 */
	unsigned int nr_bypass;		/* requests on @bypass */
	unsigned long flags;		/* FFQ_HELD */
	struct ffq_tq *bio_tq;		/* bio_merge: the bio's task */
	struct hrtimer timer;		/* earliest anticipation deadline */
	u64 timer_at;			/* when it is armed for, 0: not */
	struct ffq_stats stats;
	struct ffq_slot slots[FFQ_MAX_DEPTH];
	u16 free[FFQ_MAX_DEPTH];	/* indices into @slots, a stack */

	/* Tunables: WRITE_ONCE() by sysfs stores, READ_ONCE() by users. */
	unsigned int depth;
	unsigned int throttle_us;
	unsigned int antic_us;
	unsigned int antic_block_us;
	unsigned int ioprio_weights;
	struct ffq_cost_model cost;
};

/*
 * Per-request state, only for prepared requests (compat_rq_elv_finish()):
 * rq->elv.priv[0] the task (holding a reference to it, never NULL),
 * priv[1] the flashfq-core.h word (charge, slot + 1, FFQ_RQ_* flags),
 * zeroed by prepare_request; rq->fifo_time the start tag while the
 * request is queued (the elevator's field, as in mq-deadline: on 6.1 it
 * shares a union with the csd of a completion's IPI, used only once the
 * request is in the driver), its slot's @start from dispatch on.
 * rq->elv.icq is not used: the request needs its task, not the io_cq.
 * Touched by whoever owns the request, under fd->lock.
 */
static inline u64 ffq_rq_start(struct request *rq)
{
	return rq->fifo_time;
}

static inline void ffq_rq_set_start(struct request *rq, u64 start)
{
	rq->fifo_time = start;
}

static inline u64 ffq_rq_get(struct request *rq)
{
	return (u64)(unsigned long)rq->elv.priv[1];
}

static inline void ffq_rq_put(struct request *rq, u32 charge,
			      unsigned int slot, unsigned int flags)
{
	rq->elv.priv[1] = (void *)(unsigned long)ffq_rq_word(charge, slot,
							     flags);
}

static_assert(BITS_PER_LONG == 64, "FlashFQ keeps 64-bit tags in rq->elv.priv");

static inline struct ffq_tq *ffq_rq_tq(struct request *rq)
{
	return rq->elv.priv[0];
}

static const char *ffq_disk_name(struct ffq_data *fd)
{
	return fd->q->disk ? fd->q->disk->disk_name : "?";
}

/* A new task, holding the reference of its io_cq (or of fd->anon). */
static void ffq_tq_init(struct ffq_tq *tq, pid_t pid)
{
	ffq_task_init(&tq->task);
	INIT_LIST_HEAD(&tq->fifo);
	tq->sort[READ] = RB_ROOT;
	tq->sort[WRITE] = RB_ROOT;
	INIT_LIST_HEAD(&tq->inflight);
	INIT_LIST_HEAD(&tq->active_node);
	tq->pid = pid;
	refcount_set(&tq->ref, 1);
	tq->inserted = 0;
	tq->dispatched = 0;
	tq->completed = 0;
	tq->service = 0;
}

/*
 * Drop a reference to @tq; the last frees it.  Whatever the context: the
 * last reference goes only once the task is in no heap, list, slot or
 * record (its io_cq's went after its exit, its requests' after their
 * completion), so nothing else can reach it.  fd->anon's own reference
 * is never dropped.
 */
static void ffq_tq_put(struct ffq_tq *tq)
{
	if (!refcount_dec_and_test(&tq->ref))
		return;
	WARN_ONCE(ffq_task_active(&tq->task) || tq->task.heaps ||
		  !list_empty(&tq->active_node) || !list_empty(&tq->fifo) ||
		  !list_empty(&tq->inflight),
		  "flashfq: task %d freed while active\n", tq->pid);
	kfree(tq);
}

/* The tunables in the core's units. */
static u32 ffq_cur_depth(struct ffq_data *fd)
{
	u32 depth = READ_ONCE(fd->depth);
	unsigned long nr = READ_ONCE(fd->q->nr_requests);

	if (nr < depth)
		depth = nr;
	return depth ? depth : 1;
}

static u64 ffq_us(unsigned int *tunable)
{
	return (u64)READ_ONCE(*tunable) * NSEC_PER_USEC;
}

/*
 * Arm the hrtimer for anticipation deadline @at unless armed for one at
 * most as late.  While any task is anticipated the timer is armed for the
 * earliest deadline or before (each new one is offered here, the timer
 * re-arms itself for the next), so a new deadline is all it needs.
 */
static inline void ffq_arm_at(struct ffq_data *fd, u64 at)
{
	lockdep_assert_held(&fd->lock);

	if (fd->timer_at && fd->timer_at <= at)
		return;
	fd->timer_at = at;
	hrtimer_start(&fd->timer, ns_to_ktime(at), HRTIMER_MODE_ABS);
}

/* Arm the hrtimer for the earliest anticipation deadline if earlier. */
static inline void ffq_arm_timer(struct ffq_data *fd)
{
	u64 next = ffq_next_deadline(&fd->s);

	if (next)
		ffq_arm_at(fd, next);
}

/*
 * The facts of @tq changed: give the core its queue heads, let it re-order
 * the task, keep the active list and the timer in step.  Inlined where it
 * runs for every request (insert, completion: the call and its reloads
 * would be paid per request), called elsewhere (ffq_refresh()).
 */
static __always_inline void __ffq_refresh(struct ffq_data *fd,
					  struct ffq_tq *tq)
{
	struct ffq_task *t = &tq->task;
	u64 before = fd->s.vtime;
	struct ffq_slot *slot;
	struct request *rq;

	lockdep_assert_held(&fd->lock);

	rq = list_first_entry_or_null(&tq->fifo, struct request, queuelist);
	if (rq)
		t->head_start = ffq_rq_start(rq);
	slot = list_first_entry_or_null(&tq->inflight, struct ffq_slot, node);
	if (slot)
		t->inflight_start = slot->start;

	if (ffq_update(&fd->s, t))
		trace_flashfq_vtime(fd->q, fd->s.vtime, fd->s.vtime - before);

	if (ffq_task_active(t)) {
		if (list_empty(&tq->active_node))
			list_add_tail(&tq->active_node, &fd->active);
	} else {
		list_del_init(&tq->active_node);
	}
	ffq_arm_timer(fd);
}

static noinline void ffq_refresh(struct ffq_data *fd, struct ffq_tq *tq)
{
	__ffq_refresh(fd, tq);
}

/*
 * Make the update a completion deferred (ffq_defer()) before anything that
 * reads the heaps or virtual time, unless it is @tq's own (its next
 * request's update makes it; @tq NULL: any).  Every section under fd->lock
 * starts with this but the insert of a deferred task's request.
 */
static inline void ffq_settle_deferred(struct ffq_data *fd,
				       struct ffq_tq *tq)
{
	u64 before = fd->s.vtime;

	lockdep_assert_held(&fd->lock);

	if (likely(!fd->s.deferred) || (tq && fd->s.deferred == &tq->task))
		return;
	if (ffq_settle(&fd->s))
		trace_flashfq_vtime(fd->q, fd->s.vtime, fd->s.vtime - before);
}

/*
 * Whether dispatch held requests back: the caller then re-runs the
 * hardware queues (ffq_kick()) once it has dropped fd->lock.
 */
static bool ffq_take_held(struct ffq_data *fd)
{
	lockdep_assert_held(&fd->lock);

	return __test_and_clear_bit(FFQ_HELD, &fd->flags);
}

/*
 * Re-run the hardware queues, without fd->lock: blk_mq_run_hw_queue() can
 * take the queue lock, which ioc_create_icq() holds while it takes an
 * io_context's lock, which is held around exit_icq, which takes fd->lock
 * (lockdep found that cycle in the debug tier, through requeue_request).
 */
static void ffq_kick(struct ffq_data *fd, bool held)
{
	lockdep_assert_not_held(&fd->lock);

	if (held)
		blk_mq_run_hw_queues(fd->q, true);
}

/* Anticipation started at @now, or (@now 0) was cancelled. */
static inline void ffq_trace_antic(struct ffq_data *fd, struct ffq_tq *tq,
				   u64 now)
{
	struct ffq_task *t = &tq->task;

	if (now)
		trace_flashfq_antic_start(fd->q, tq->pid, t->antic_start,
					  t->antic_until,
					  t->flags & FFQ_T_BLOCKING ?
					  t->block_until - now : 0);
	else
		trace_flashfq_antic_cancel(fd->q, tq->pid, t->antic_start,
					   t->antic_until, 0);
}

/*
 * The core only merges a multi-range discard without telling the elevator
 * (no requests_merged); block/blk.h has the same test, not for modules.
 */
static bool ffq_discard_mergable(struct request *rq)
{
	return req_op(rq) == REQ_OP_DISCARD &&
		queue_max_discard_segments(rq->q) > 1;
}

/* Device time of @rq: reads and writes by size, anything else as 4 KiB. */
static u64 ffq_rq_cost(struct ffq_data *fd, struct request *rq)
{
	struct ffq_cost_model m = {
		.read_4k = READ_ONCE(fd->cost.read_4k),
		.read_128k = READ_ONCE(fd->cost.read_128k),
		.write_4k = READ_ONCE(fd->cost.write_4k),
		.write_128k = READ_ONCE(fd->cost.write_128k),
	};

	switch (req_op(rq)) {
	case REQ_OP_READ:
		return ffq_cost(&m, false, blk_rq_bytes(rq));
	case REQ_OP_WRITE:
		return ffq_cost(&m, true, blk_rq_bytes(rq));
	default:
		return ffq_cost(&m, true, FFQ_COST_SMALL);
	}
}

static u32 ffq_rq_charge_now(struct ffq_data *fd, struct request *rq)
{
	u64 cost = ffq_rq_cost(fd, rq);

	/* every request weighs FFQ_WEIGHT_NORM unless ioprio_weights */
	if (!READ_ONCE(fd->ioprio_weights))
		return ffq_charge(cost, FFQ_WEIGHT_NORM);
	return ffq_charge(cost, ffq_weight(req_get_ioprio(rq), true));
}

/* Give back @rq's depth slot if it holds one; returns the slot. */
static inline struct ffq_slot *ffq_release_slot(struct ffq_data *fd,
						struct request *rq)
{
	u64 word = ffq_rq_get(rq);
	unsigned int idx = ffq_rq_slot(word);
	struct ffq_slot *slot;

	lockdep_assert_held(&fd->lock);

	if (!idx)
		return NULL;
	if (WARN_ONCE(idx > FFQ_MAX_DEPTH || !fd->s.inflight,
		      "flashfq: %s: bad slot %u (in flight %u)\n",
		      ffq_disk_name(fd), idx, fd->s.inflight)) {
		ffq_rq_put(rq, ffq_rq_charge(word), 0, ffq_rq_flags(word));
		return NULL;
	}
	slot = &fd->slots[idx - 1];
	list_del(&slot->node);
	fd->free[fd->nr_free++] = idx - 1;
	slot->tq->task.nr_inflight--;
	fd->s.inflight--;
	ffq_rq_put(rq, ffq_rq_charge(word), 0, ffq_rq_flags(word));
	return slot;
}

/*
 * Take @rq off its task's queue, tree and the merge hash.  Inlined in
 * dispatch, which runs it for every request (saving the call, its saved
 * registers and reloads), called elsewhere (ffq_remove_request()).
 */
static __always_inline void __ffq_remove_request(struct ffq_data *fd,
						 struct ffq_tq *tq,
						 struct request *rq)
{
	u64 word = ffq_rq_get(rq);
	unsigned int flags = ffq_rq_flags(word);

	lockdep_assert_held(&fd->lock);

	list_del_init(&rq->queuelist);
	if (flags & FFQ_RQ_ON_RB)
		elv_rb_del(&tq->sort[rq_data_dir(rq)], rq);
	iosched_forget_merge(fd->q, rq);
	ffq_rq_put(rq, ffq_rq_charge(word), ffq_rq_slot(word),
		   flags & ~(FFQ_RQ_QUEUED | FFQ_RQ_ON_RB));
	tq->task.nr_queued--;
	WRITE_ONCE(fd->queued, fd->queued - 1);
}

static noinline void ffq_remove_request(struct ffq_data *fd,
					struct ffq_tq *tq, struct request *rq)
{
	__ffq_remove_request(fd, tq, rq);
}

/*
 * Will a request queued now wait: are as many requests queued and in
 * flight as the depth allows, or did dispatch last hold requests back
 * (throttle, anticipation)?  Only such a request is indexed for merging,
 * as in K2: one that dispatch hands out at once would only cost the index
 * its insertion and removal (merges into requests waiting in a plug happen
 * before insertion anyway).  A request that waits after all (dispatch
 * throttles it) only misses merges.
 */
static bool ffq_will_wait(struct ffq_data *fd)
{
	lockdep_assert_held(&fd->lock);

	return fd->queued + fd->s.inflight >= ffq_cur_depth(fd) ||
	       test_bit(FFQ_HELD, &fd->flags);
}

static void ffq_insert_request(struct ffq_data *fd, struct request *rq,
			       bool at_head, struct list_head *free)
{
	struct request_queue *q = fd->q;
	struct ffq_tq *tq;
	unsigned int flags;
	u32 charge;
	u64 start;

	lockdep_assert_held(&fd->lock);

	/*
	 * priv and the io_cq are only ours if prepare_request ran, which
	 * is when finish_request will run too.  The others (6.1: a FUA
	 * write requeued after a reset) go out first, untouched.
	 */
	if (!compat_rq_elv_finish(rq)) {
		trace_block_rq_insert(rq);
		list_add_tail(&rq->queuelist, &fd->bypass);
		fd->nr_bypass++;
		WRITE_ONCE(fd->queued, fd->queued + 1);
		return;
	}

	tq = ffq_rq_tq(rq);
	ffq_settle_deferred(fd, tq);
	if (ffq_rq_slot(ffq_rq_get(rq))) {
		struct ffq_slot *slot = ffq_release_slot(fd, rq);

		/* rq->fifo_time may have served a completion IPI since */
		if (slot) {
			ffq_rq_set_start(rq, slot->start);
			fd->stats.reinsert++;
		}
	}
	flags = ffq_rq_flags(ffq_rq_get(rq));

	if (flags & FFQ_RQ_TAGGED) {
		/* Requeued: keeps its tags and goes first. */
		start = ffq_rq_start(rq);
		charge = ffq_rq_charge(ffq_rq_get(rq));
		list_add(&rq->queuelist, &tq->fifo);
	} else {
		/*
		 * If @rq merges into a queued request it lands on @free,
		 * which the caller frees after dropping the lock.
		 */
		if (fd->queued && blk_mq_sched_try_insert_merge(q, rq, free))
			return;
		charge = ffq_rq_charge_now(fd, rq);
		if (ffq_arrive(&tq->task)) {
			fd->stats.antic_cancelled++;
			ffq_trace_antic(fd, tq, 0);
		}
		start = ffq_tag(&fd->s, &tq->task, charge);
		ffq_rq_set_start(rq, start);
		flags |= FFQ_RQ_TAGGED | (rq_is_sync(rq) ? FFQ_RQ_SYNC : 0);
		/*
		 * In tag order, also when inserted at head (6.12 flush data):
		 * a task's queue stays sorted by start tag.
		 */
		list_add_tail(&rq->queuelist, &tq->fifo);
		tq->inserted++;
		if (rq_mergeable(rq) && ffq_will_wait(fd)) {
			elv_rb_add(&tq->sort[rq_data_dir(rq)], rq);
			flags |= FFQ_RQ_ON_RB;
			if (!ffq_discard_mergable(rq)) {
				elv_rqhash_add(q, rq);
				if (!q->last_merge)
					q->last_merge = rq;
			}
		}
	}
	if (!(flags & FFQ_RQ_OWNED)) {
		flags |= FFQ_RQ_OWNED;
		tq->task.nr_out++;
	}
	ffq_rq_put(rq, charge, 0, flags | FFQ_RQ_QUEUED);
	tq->task.nr_queued++;
	WRITE_ONCE(fd->queued, fd->queued + 1);
	__ffq_refresh(fd, tq);

	trace_block_rq_insert(rq);
	trace_flashfq_insert(rq, tq->pid, start, start + charge, fd->s.vtime,
			     at_head);
}

static void ffq_insert_requests(struct blk_mq_hw_ctx *hctx,
				struct list_head *list, compat_insert_t flags)
{
	struct ffq_data *fd = hctx->queue->elevator->elevator_data;
	bool at_head = compat_insert_at_head(flags);
	LIST_HEAD(free);

	spin_lock_irq(&fd->lock);
	while (!list_empty(list)) {
		struct request *rq;

		rq = list_first_entry(list, struct request, queuelist);
		list_del_init(&rq->queuelist);
		ffq_insert_request(fd, rq, at_head, &free);
	}
	spin_unlock_irq(&fd->lock);

	compat_free_requests(&free);
}

/* Hand out the first queued request of @tq, taking a depth slot. */
static struct request *ffq_dispatch_from(struct ffq_data *fd,
					 struct ffq_tq *tq, u64 gap)
{
	struct request *rq = list_first_entry(&tq->fifo, struct request,
					      queuelist);
	u64 start = ffq_rq_start(rq);
	struct ffq_task *t = &tq->task;
	u64 before = fd->s.vtime;
	struct ffq_slot *slot;
	struct request *next;
	u32 charge;
	u64 now = 0;

	lockdep_assert_held(&fd->lock);

	__ffq_remove_request(fd, tq, rq);
	/* As mq-deadline: no more merging into a request handed out. */
	rq->rq_flags |= RQF_STARTED;

	/* ffq_pick() said fewer than depth (at most FFQ_MAX_DEPTH) are taken */
	slot = &fd->slots[fd->free[--fd->nr_free]];
	list_add_tail(&slot->node, &tq->inflight);
	slot->tq = tq;
	slot->start = start;
	if (trace_flashfq_dispatch_enabled() || trace_flashfq_complete_enabled())
		now = ktime_get_ns();
	slot->dispatch_ns = trace_flashfq_complete_enabled() ? now : 0;
	/* the facts ffq_refresh() would read: the other heads are as they were */
	if (!t->nr_inflight++)
		t->inflight_start = start;
	fd->s.inflight++;
	next = list_first_entry_or_null(&tq->fifo, struct request, queuelist);
	if (next)
		t->head_start = ffq_rq_start(next);

	charge = ffq_rq_charge(ffq_rq_get(rq));
	ffq_rq_put(rq, charge, slot - fd->slots + 1,
		   ffq_rq_flags(ffq_rq_get(rq)));
	ffq_dispatched(t, start);
	tq->dispatched++;
	tq->service += charge;
	fd->stats.dispatched++;
	/*
	 * Not ffq_refresh(): the task stays active, its anticipation state
	 * and so the timer are unchanged (ffq_update_dispatched()).
	 */
	if (ffq_update_dispatched(&fd->s, t))
		trace_flashfq_vtime(fd->q, fd->s.vtime, fd->s.vtime - before);

	trace_flashfq_dispatch(rq, tq->pid, start, charge, fd->s.vtime,
			       rq->start_time_ns && now > rq->start_time_ns ?
			       now - rq->start_time_ns : 0,
			       fd->s.inflight, gap);
	return rq;
}

/*
 * @batch: the hardware queue of the requests handed out so far in this
 * dispatch batch (NULL: none, or any may follow); a request of another
 * ends the batch (elevator/iosched-batch.h).
 */
static struct request *__ffq_dispatch_request(struct ffq_data *fd,
					      const struct blk_mq_hw_ctx *batch)
{
	struct request *rq;
	struct ffq_task *t;
	enum ffq_pick res;
	u64 gap;

	lockdep_assert_held(&fd->lock);

	rq = list_first_entry_or_null(&fd->bypass, struct request, queuelist);
	if (rq) {
		list_del_init(&rq->queuelist);
		fd->nr_bypass--;
		WRITE_ONCE(fd->queued, fd->queued - 1);
		fd->stats.bypassed++;
		return rq;
	}

	ffq_settle_deferred(fd, NULL);
	res = ffq_pick(&fd->s, ffq_cur_depth(fd), ffq_us(&fd->throttle_us),
		       &t, &gap);
	switch (res) {
	case FFQ_PICK_TASK: {
		struct ffq_tq *tq = container_of(t, struct ffq_tq, task);

		if (iosched_batch_ends(batch, list_first_entry(&tq->fifo,
							       struct request,
							       queuelist))) {
			fd->stats.batch_ended++;
			return NULL;
		}
		return ffq_dispatch_from(fd, tq, gap);
	}
	case FFQ_PICK_EMPTY:
		return NULL;
	case FFQ_PICK_FULL:
		fd->stats.held_full++;
		break;
	case FFQ_PICK_ANTIC: {
		struct ffq_hnode *b = ffq_heap_min(&fd->s.block);
		struct ffq_hnode *r = ffq_heap_min(&fd->s.ready);
		struct ffq_tq *tq = container_of(b, struct ffq_tq, task.block);

		fd->stats.held_antic++;
		trace_flashfq_throttled(fd->q, tq->pid, true, r->key - b->key,
					ffq_us(&fd->throttle_us),
					fd->s.inflight, fd->queued);
		break;
	}
	case FFQ_PICK_THROTTLED: {
		struct ffq_hnode *r = ffq_heap_min(&fd->s.ready);
		struct ffq_tq *tq = container_of(r, struct ffq_tq, task.ready);

		fd->stats.held_throttle++;
		trace_flashfq_throttled(fd->q, tq->pid, false, gap,
					ffq_us(&fd->throttle_us),
					fd->s.inflight, fd->queued);
		break;
	}
	}
	__set_bit(FFQ_HELD, &fd->flags);
	return NULL;
}

/* One dispatch batch, one hardware queue: elevator/iosched-batch.h. */
static struct request *ffq_dispatch_request(struct blk_mq_hw_ctx *hctx)
{
	struct ffq_data *fd = hctx->queue->elevator->elevator_data;
	struct request *rq;

	spin_lock_irq(&fd->lock);
	rq = __ffq_dispatch_request(fd, iosched_batch(fd->batch, hctx));
	iosched_batch_note(fd->batch, hctx, rq);
	spin_unlock_irq(&fd->lock);

	return rq;
}

/*
 * True while requests are queued, also when they are held back.  False
 * ends the dispatch batch being built (elevator/iosched-batch.h).
 */
static bool ffq_has_work(struct blk_mq_hw_ctx *hctx)
{
	struct ffq_data *fd = hctx->queue->elevator->elevator_data;

	return iosched_batch_has_work(fd->batch, READ_ONCE(fd->queued));
}

/*
 * The task of the current context's io_cq @icq on fd->q (NULL: none), on
 * the issue path, or fd->anon if it has none.  No reference is taken: the
 * io_cq's keeps the task while the current task can issue through it.
 */
static struct ffq_tq *ffq_icq_tq(struct ffq_data *fd, struct io_cq *icq)
{
	struct ffq_icq *fi;
	struct ffq_tq *tq;

	if (!icq)
		return &fd->anon;
	fi = container_of(icq, struct ffq_icq, icq);
	iosched_icq_wait_ready(fd->q, &fi->ready);
	tq = READ_ONCE(fi->tq);
	return tq ? tq : &fd->anon;
}

/*
 * Called when a request is allocated, before any other callback: the
 * request takes a reference to its task, which finish_request drops (or
 * hands on to its completion).  The io_cq is looked up without the queue
 * lock; only a context's first request on the device creates it, through
 * ioc_find_get_icq(), whose io_context reference is not needed.
 */
static void ffq_prepare_request(struct request *rq)
{
	struct request_queue *q = rq->q;
	struct ffq_data *fd = q->elevator->elevator_data;
	struct io_cq *icq = iosched_icq_lookup(q);
	struct io_cq *made = NULL;
	struct ffq_tq *tq;

	if (unlikely(!icq)) {
		made = ioc_find_get_icq(q);
		icq = made;
	}
	tq = ffq_icq_tq(fd, icq);
	refcount_inc(&tq->ref);
	/* not the last: the current task holds one */
	if (made)
		put_io_context(made->ioc);
	rq->elv.priv[0] = tq;
	rq->elv.priv[1] = NULL;
}

/*
 * Called when a request the elevator prepared is freed or, for a flush
 * sequence's data part on 6.12, when that part completes; also for
 * requests that never passed through FlashFQ (not owned).
 */
static void ffq_finish_request(struct request *rq)
{
	struct ffq_data *fd = rq->q->elevator->elevator_data;
	u64 word = ffq_rq_get(rq);
	unsigned int flags = ffq_rq_flags(word);
	struct ffq_tq *tq = ffq_rq_tq(rq);
	struct ffq_slot *slot;
	unsigned long irqflags;
	bool held;
	u64 now;

	if (flags & FFQ_RQ_OWNED) {
		spin_lock_irqsave(&fd->lock, irqflags);
		ffq_settle_deferred(fd, tq);
		WARN_ONCE(flags & FFQ_RQ_QUEUED,
			  "flashfq: %s: request freed while queued\n",
			  ffq_disk_name(fd));
		slot = ffq_release_slot(fd, rq);
		if (slot) {
			tq->completed++;
			fd->stats.completed++;
			if (trace_flashfq_complete_enabled())
				trace_flashfq_complete(rq, tq->pid, slot->start,
						       slot->dispatch_ns ?
						       ktime_get_ns() -
						       slot->dispatch_ns : 0,
						       fd->s.inflight);
		}
		if (!WARN_ON_ONCE(!tq->task.nr_out))
			tq->task.nr_out--;
		/* the clock only for an anticipation (nothing outstanding) */
		now = tq->task.nr_out ? 0 : ktime_get_ns();
		if (ffq_complete(&tq->task, flags & FFQ_RQ_SYNC, now,
				 ffq_us(&fd->antic_us),
				 ffq_us(&fd->antic_block_us))) {
			fd->stats.antic_started++;
			ffq_trace_antic(fd, tq, now);
			/*
			 * The task stays active and nothing else changed:
			 * its update can wait for its next request, which
			 * then makes it alone (ffq_defer()), or for anything
			 * else.  Only the deadline must be armed now.
			 */
			ffq_defer(&fd->s, &tq->task);
			ffq_arm_at(fd, ffq_task_deadline(&tq->task));
		} else {
			__ffq_refresh(fd, tq);
		}
		held = ffq_take_held(fd);
		spin_unlock_irqrestore(&fd->lock, irqflags);
		ffq_kick(fd, held);
	}
	rq->elv.priv[0] = NULL;
	rq->elv.priv[1] = NULL;
	if (tq)
		ffq_tq_put(tq);
}

/* Called by blk_mq_requeue_request() for a request the driver gave back. */
static void ffq_requeue_request(struct request *rq)
{
	struct ffq_data *fd = rq->q->elevator->elevator_data;
	unsigned long irqflags;
	struct ffq_slot *slot;
	struct ffq_tq *tq;
	bool held = false;

	if (!(ffq_rq_flags(ffq_rq_get(rq)) & FFQ_RQ_OWNED))
		return;
	tq = ffq_rq_tq(rq);
	spin_lock_irqsave(&fd->lock, irqflags);
	ffq_settle_deferred(fd, NULL);
	if (rq->rq_flags & RQF_DONTPREP) {
		/*
		 * A request the driver prepared (RQF_DONTPREP, e.g. NVMe)
		 * goes from the requeue list straight to hctx->dispatch and
		 * the driver, not through FlashFQ: it keeps its depth slot
		 * until it finishes, or the device would hold it beside a
		 * request dispatched into its slot.
		 */
		if (ffq_rq_slot(ffq_rq_get(rq))) {
			fd->stats.requeued++;
			trace_flashfq_requeue(rq, tq->pid, ffq_rq_start(rq),
					      fd->s.inflight);
		}
	} else {
		slot = ffq_release_slot(fd, rq);
		if (slot) {
			/* for its insert: rq->fifo_time may have served an IPI */
			ffq_rq_set_start(rq, slot->start);
			fd->stats.requeued++;
			trace_flashfq_requeue(rq, tq->pid, slot->start,
					      fd->s.inflight);
			ffq_refresh(fd, tq);
			held = ffq_take_held(fd);
		}
	}
	spin_unlock_irqrestore(&fd->lock, irqflags);
	ffq_kick(fd, held);
}

/* Anticipation deadlines: the earliest one is due. */
static enum hrtimer_restart ffq_timer_fn(struct hrtimer *timer)
{
	struct ffq_data *fd = container_of(timer, struct ffq_data, timer);
	unsigned long irqflags;
	struct ffq_task *t;
	bool held;
	u64 now;

	spin_lock_irqsave(&fd->lock, irqflags);
	ffq_settle_deferred(fd, NULL);
	fd->timer_at = 0;
	now = ktime_get_ns();
	while ((t = ffq_timer_due(&fd->s, now))) {
		struct ffq_tq *tq = container_of(t, struct ffq_tq, task);

		if (ffq_timer_fire(&fd->s, t, now) == FFQ_TIMER_EXPIRE) {
			fd->stats.antic_expired++;
			trace_flashfq_antic_expire(fd->q, tq->pid,
						   t->antic_start,
						   t->antic_until, 0);
		} else {
			fd->stats.antic_unblocked++;
		}
		ffq_refresh(fd, tq);
	}
	ffq_arm_timer(fd);
	/*
	 * Only if dispatch held requests back: a deadline whose anticipation
	 * was fulfilled or blocked nothing (a fast device) releases nothing.
	 */
	held = ffq_take_held(fd);
	spin_unlock_irqrestore(&fd->lock, irqflags);
	ffq_kick(fd, held);
	return HRTIMER_NORESTART;
}

/* Merging: front merges through the task's trees, back merges the hash. */

static bool ffq_allow_merge(struct request_queue *q, struct request *rq,
			    struct bio *bio)
{
	struct ffq_data *fd = q->elevator->elevator_data;

	lockdep_assert_held(&fd->lock);

	return (ffq_rq_flags(ffq_rq_get(rq)) & FFQ_RQ_QUEUED) &&
		ffq_rq_tq(rq) == fd->bio_tq;
}

static int ffq_request_merge(struct request_queue *q, struct request **rq,
			     struct bio *bio)
{
	struct ffq_data *fd = q->elevator->elevator_data;
	struct ffq_tq *tq = fd->bio_tq;
	struct request *__rq;

	lockdep_assert_held(&fd->lock);

	__rq = elv_rb_find(&tq->sort[bio_data_dir(bio)], bio_end_sector(bio));
	if (__rq && elv_bio_merge_ok(__rq, bio)) {
		*rq = __rq;
		if (ffq_discard_mergable(__rq))
			return ELEVATOR_DISCARD_MERGE;
		return ELEVATOR_FRONT_MERGE;
	}
	return ELEVATOR_NO_MERGE;
}

/*
 * Charge @rq's task for @rq's new size; @latest: @rq is (or absorbed) the
 * task's latest request.
 */
static void ffq_retag_request(struct ffq_data *fd, struct ffq_tq *tq,
			      struct request *rq, u32 old_charge, bool latest)
{
	u64 word = ffq_rq_get(rq);
	u32 charge = ffq_retag(&fd->s, &tq->task, old_charge,
			       ffq_rq_charge_now(fd, rq), latest);

	ffq_rq_put(rq, charge, ffq_rq_slot(word), ffq_rq_flags(word));
}

/* Does @rq carry its task's latest start tag (tags rise within a task)? */
static bool ffq_rq_latest(struct ffq_tq *tq, struct request *rq)
{
	return ffq_rq_start(rq) == tq->task.last_tagged;
}

/* @rq grew by a bio; a front merge moved its start sector. */
static void ffq_request_merged(struct request_queue *q, struct request *rq,
			       enum elv_merge type)
{
	struct ffq_data *fd = q->elevator->elevator_data;
	struct ffq_tq *tq = ffq_rq_tq(rq);
	u64 word = ffq_rq_get(rq);

	lockdep_assert_held(&fd->lock);

	ffq_settle_deferred(fd, NULL);
	if (type == ELEVATOR_FRONT_MERGE &&
	    (ffq_rq_flags(word) & FFQ_RQ_ON_RB)) {
		elv_rb_del(&tq->sort[rq_data_dir(rq)], rq);
		elv_rb_add(&tq->sort[rq_data_dir(rq)], rq);
	}
	ffq_retag_request(fd, tq, rq, ffq_rq_charge(word),
			  ffq_rq_latest(tq, rq));
}

/*
 * @next was merged into @rq and will be freed.  @next is queued (of the
 * same task: the neighbours next_request and former_request offer are in
 * the task's own tree), or is the request being inserted (an insert merge,
 * not tagged yet, possibly of another task: it is simply absorbed).
 */
static void ffq_requests_merged(struct request_queue *q, struct request *rq,
				struct request *next)
{
	struct ffq_data *fd = q->elevator->elevator_data;
	u64 nword = ffq_rq_get(next);
	unsigned int nflags = ffq_rq_flags(nword);
	struct ffq_tq *tq = ffq_rq_tq(rq);
	u32 old = ffq_rq_charge(ffq_rq_get(rq));
	bool latest = ffq_rq_latest(tq, rq);

	lockdep_assert_held(&fd->lock);

	ffq_settle_deferred(fd, NULL);
	if (compat_rq_elv_finish(next) && (nflags & FFQ_RQ_QUEUED)) {
		struct ffq_tq *ntq = ffq_rq_tq(next);

		if (ntq == tq && ffq_rq_latest(tq, next))
			latest = true;

		/*
		 * Keep the earlier start tag and its place: the task's
		 * queue stays in tag order.
		 */
		if (ntq == tq && ffq_rq_start(next) < ffq_rq_start(rq)) {
			list_move(&rq->queuelist, &next->queuelist);
			ffq_rq_set_start(rq, ffq_rq_start(next));
		}
		old += ffq_rq_charge(nword);
		ffq_remove_request(fd, ntq, next);
		ffq_rq_put(next, 0, 0, nflags & ~(FFQ_RQ_OWNED |
						  FFQ_RQ_QUEUED |
						  FFQ_RQ_ON_RB));
		ntq->task.nr_out--;
		fd->stats.merged++;
		if (ntq != tq)
			ffq_refresh(fd, ntq);
	}
	ffq_retag_request(fd, tq, rq, old, latest);
	ffq_refresh(fd, tq);
}

static struct request *ffq_former_request(struct request_queue *q,
					  struct request *rq)
{
	if (!(ffq_rq_flags(ffq_rq_get(rq)) & FFQ_RQ_ON_RB))
		return NULL;
	return elv_rb_former_request(q, rq);
}

static struct request *ffq_next_request(struct request_queue *q,
					struct request *rq)
{
	if (!(ffq_rq_flags(ffq_rq_get(rq)) & FFQ_RQ_ON_RB))
		return NULL;
	return elv_rb_latter_request(q, rq);
}

static bool ffq_bio_merge(struct request_queue *q, struct bio *bio,
			  unsigned int nr_segs)
{
	struct ffq_data *fd = q->elevator->elevator_data;
	struct request *free = NULL;
	struct ffq_tq *tq;
	bool ret;

	/* Nothing queued (usual below the depth): nothing to merge into. */
	if (!READ_ONCE(fd->queued))
		return false;

	tq = ffq_icq_tq(fd, iosched_icq_lookup(q));
	spin_lock_irq(&fd->lock);
	fd->bio_tq = tq;
	ret = blk_mq_sched_try_merge(q, bio, nr_segs, &free);
	fd->bio_tq = NULL;
	spin_unlock_irq(&fd->lock);

	if (free)
		blk_mq_free_request(free);
	return ret;
}

/*
 * A new io_cq: called by the task creating it, with the queue and
 * io_context locks held and interrupts off, so the task is allocated
 * without waiting; without one the context's requests go to fd->anon.
 */
static void ffq_init_icq(struct io_cq *icq)
{
	struct ffq_icq *fi = container_of(icq, struct ffq_icq, icq);
	struct ffq_tq *tq;

	tq = kmalloc_node(sizeof(*tq), GFP_NOWAIT | __GFP_NOWARN, icq->q->node);
	if (tq)
		ffq_tq_init(tq, current->pid);
	fi->tq = tq;
	/* pairs with iosched_icq_wait_ready()'s acquire: tq before ready */
	smp_store_release(&fi->ready, true);
}

/*
 * The io_cq's last task exited, the io_context is freed, or the elevator
 * is going away: no request will come, so any anticipation ends.  Requests
 * still outstanding keep the task (their references) until freed.
 */
static void ffq_exit_icq(struct io_cq *icq)
{
	struct ffq_data *fd = icq->q->elevator->elevator_data;
	struct ffq_icq *fi = container_of(icq, struct ffq_icq, icq);
	struct ffq_tq *tq = fi->tq;
	unsigned long irqflags;

	if (!tq)
		return;
	WRITE_ONCE(fi->tq, NULL);
	spin_lock_irqsave(&fd->lock, irqflags);
	ffq_settle_deferred(fd, NULL);
	if (ffq_exit(&tq->task)) {
		fd->stats.antic_cancelled++;
		ffq_trace_antic(fd, tq, 0);
	}
	ffq_refresh(fd, tq);
	spin_unlock_irqrestore(&fd->lock, irqflags);
	/* the io_cq's reference: the task stays while its requests do */
	ffq_tq_put(tq);
}

static int ffq_init_sched(struct request_queue *q, compat_init_sched_arg arg)
{
	struct elevator_queue *eq;
	struct ffq_data *fd;
	unsigned int i;

	eq = compat_elevator_alloc(q, arg);
	if (!eq)
		return -ENOMEM;

	fd = kzalloc_node(sizeof(*fd), GFP_KERNEL, q->node);
	if (fd)
		fd->batch = iosched_batch_alloc();
	if (!fd || !fd->batch) {
		kfree(fd);
		compat_elevator_put(eq);
		return -ENOMEM;
	}

	fd->q = q;
	spin_lock_init(&fd->lock);
	ffq_sched_init(&fd->s);
	ffq_tq_init(&fd->anon, 0);
	/* Requests without a context share no waiting task: no anticipation. */
	ffq_exit(&fd->anon.task);
	INIT_LIST_HEAD(&fd->active);
	INIT_LIST_HEAD(&fd->bypass);
	for (i = 0; i < FFQ_MAX_DEPTH; i++)
		fd->free[i] = FFQ_MAX_DEPTH - 1 - i;
	fd->nr_free = FFQ_MAX_DEPTH;
	compat_hrtimer_setup(&fd->timer, ffq_timer_fn, CLOCK_MONOTONIC,
			     HRTIMER_MODE_ABS);

	fd->depth = FFQ_DEFAULT_DEPTH;
	fd->throttle_us = FFQ_DEFAULT_THROTTLE_US;
	fd->antic_us = FFQ_DEFAULT_ANTIC_US;
	fd->antic_block_us = FFQ_DEFAULT_ANTIC_BLOCK_US;
	fd->cost.read_4k = FFQ_DEFAULT_COST_READ_4K;
	fd->cost.read_128k = FFQ_DEFAULT_COST_READ_128K;
	fd->cost.write_4k = FFQ_DEFAULT_COST_WRITE_4K;
	fd->cost.write_128k = FFQ_DEFAULT_COST_WRITE_128K;

	eq->elevator_data = fd;
	blk_queue_flag_set(QUEUE_FLAG_SQ_SCHED, q);
	q->elevator = eq;
	return 0;
}

/*
 * The queue is frozen and every io_cq exited (ioc_clear_queue() runs
 * first): nothing may be queued, in flight or anticipated.
 */
static void ffq_exit_sched(struct elevator_queue *e)
{
	struct ffq_data *fd = e->elevator_data;

	hrtimer_cancel(&fd->timer);
	WARN_ONCE(fd->queued || fd->s.inflight || !list_empty(&fd->active) ||
		  fd->s.deferred,
		  "flashfq: %s: %u queued, %u in flight, tasks active at exit\n",
		  ffq_disk_name(fd), fd->queued, fd->s.inflight);
	iosched_batch_free(fd->batch);
	kfree(fd);
}

/* sysfs: /sys/block/<dev>/queue/iosched/, parsed by iosched_parse_uint(). */

/* @var: the tunable, an lvalue in terms of "fd" (as in mq-deadline). */
#define FFQ_SHOW_UINT(name, var)					\
static ssize_t ffq_##name##_show(struct elevator_queue *e, char *page)	\
{									\
	struct ffq_data *fd = e->elevator_data;				\
									\
	return sysfs_emit(page, "%u\n", READ_ONCE(var));			\
}

/* @after: re-run the queues (the change may release held requests). */
#define FFQ_STORE_UINT(name, var, min, max, after)			\
static ssize_t ffq_##name##_store(struct elevator_queue *e,		\
				  const char *page, size_t count)	\
{									\
	struct ffq_data *fd = e->elevator_data;				\
	unsigned int val;						\
									\
	if (iosched_parse_uint(page, count, (min), (max), &val))	\
		return -EINVAL;						\
	WRITE_ONCE(var, val);						\
	if (after)							\
		blk_mq_run_hw_queues(fd->q, true);			\
	return count;							\
}

FFQ_SHOW_UINT(throttle_us, fd->throttle_us);
FFQ_STORE_UINT(throttle_us, fd->throttle_us, 0, FFQ_MAX_TIME_US, true);
FFQ_SHOW_UINT(anticipation_us, fd->antic_us);
FFQ_STORE_UINT(anticipation_us, fd->antic_us, 0, FFQ_MAX_TIME_US, false);
FFQ_SHOW_UINT(anticipation_block_us, fd->antic_block_us);
FFQ_STORE_UINT(anticipation_block_us, fd->antic_block_us, 0,
	       FFQ_MAX_TIME_US, false);
FFQ_SHOW_UINT(ioprio_weights, fd->ioprio_weights);
FFQ_STORE_UINT(ioprio_weights, fd->ioprio_weights, 0, 1, false);
FFQ_SHOW_UINT(cost_read_4k_ns, fd->cost.read_4k);
FFQ_STORE_UINT(cost_read_4k_ns, fd->cost.read_4k, 1, FFQ_MAX_COST_NS, false);
FFQ_SHOW_UINT(cost_read_128k_ns, fd->cost.read_128k);
FFQ_STORE_UINT(cost_read_128k_ns, fd->cost.read_128k, 1, FFQ_MAX_COST_NS,
	       false);
FFQ_SHOW_UINT(cost_write_4k_ns, fd->cost.write_4k);
FFQ_STORE_UINT(cost_write_4k_ns, fd->cost.write_4k, 1, FFQ_MAX_COST_NS,
	       false);
FFQ_SHOW_UINT(cost_write_128k_ns, fd->cost.write_128k);
FFQ_STORE_UINT(cost_write_128k_ns, fd->cost.write_128k, 1, FFQ_MAX_COST_NS,
	       false);
#undef FFQ_SHOW_UINT
#undef FFQ_STORE_UINT

/* depth shows the depth in force (clamped to nr_requests), as K2 does. */
static ssize_t ffq_depth_show(struct elevator_queue *e, char *page)
{
	return sysfs_emit(page, "%u\n", ffq_cur_depth(e->elevator_data));
}

static ssize_t ffq_depth_store(struct elevator_queue *e, const char *page,
			       size_t count)
{
	struct ffq_data *fd = e->elevator_data;
	unsigned int max = min_t(unsigned long, READ_ONCE(fd->q->nr_requests),
				 FFQ_MAX_DEPTH);
	unsigned int val;

	if (iosched_parse_uint(page, count, 1, max, &val))
		return -EINVAL;
	WRITE_ONCE(fd->depth, val);
	blk_mq_run_hw_queues(fd->q, true);
	return count;
}

#define FFQ_ATTR(name)	__ATTR(name, 0644, ffq_##name##_show, ffq_##name##_store)

static struct elv_fs_entry ffq_attrs[] = {
	FFQ_ATTR(depth),
	FFQ_ATTR(throttle_us),
	FFQ_ATTR(anticipation_us),
	FFQ_ATTR(anticipation_block_us),
	FFQ_ATTR(ioprio_weights),
	FFQ_ATTR(cost_read_4k_ns),
	FFQ_ATTR(cost_read_128k_ns),
	FFQ_ATTR(cost_write_4k_ns),
	FFQ_ATTR(cost_write_128k_ns),
	__ATTR_NULL
};

#undef FFQ_ATTR

/* debugfs: /sys/kernel/debug/block/<dev>/sched/ */
#ifdef CONFIG_BLK_DEBUG_FS

static void ffq_dbg_task(struct seq_file *m, struct ffq_tq *tq)
{
	const struct ffq_task *t = &tq->task;

	seq_printf(m, "pid %d head_start %llu last_start %llu last_finish %llu queued %u inflight %u outstanding %u inserted %llu dispatched %llu completed %llu service %llu antic %s\n",
		   tq->pid, t->nr_queued ? t->head_start : 0, t->last_start,
		   t->last_finish, t->nr_queued, t->nr_inflight, t->nr_out,
		   tq->inserted, tq->dispatched, tq->completed, tq->service,
		   !(t->flags & FFQ_T_ANTIC) ? "no" :
		   (t->flags & FFQ_T_BLOCKING) ? "blocking" : "yes");
}

static int ffq_dbg_tasks_show(void *data, struct seq_file *m)
{
	struct request_queue *q = data;
	struct ffq_data *fd = q->elevator->elevator_data;
	struct ffq_tq *tq;

	spin_lock_irq(&fd->lock);
	ffq_settle_deferred(fd, NULL);
	list_for_each_entry(tq, &fd->active, active_node)
		ffq_dbg_task(m, tq);
	spin_unlock_irq(&fd->lock);
	return 0;
}

static int ffq_dbg_vtime_show(void *data, struct seq_file *m)
{
	struct request_queue *q = data;
	struct ffq_data *fd = q->elevator->elevator_data;
	u64 v;

	spin_lock_irq(&fd->lock);
	ffq_settle_deferred(fd, NULL);
	v = fd->s.vtime;
	spin_unlock_irq(&fd->lock);
	seq_printf(m, "%llu\n", v);
	return 0;
}

static int ffq_dbg_inflight_show(void *data, struct seq_file *m)
{
	struct request_queue *q = data;
	struct ffq_data *fd = q->elevator->elevator_data;
	u32 n;

	spin_lock_irq(&fd->lock);
	ffq_settle_deferred(fd, NULL);
	n = fd->s.inflight;
	spin_unlock_irq(&fd->lock);
	seq_printf(m, "%u\n", n);
	return 0;
}

static int ffq_dbg_queued_show(void *data, struct seq_file *m)
{
	struct request_queue *q = data;
	struct ffq_data *fd = q->elevator->elevator_data;

	seq_printf(m, "%u\n", READ_ONCE(fd->queued));
	return 0;
}

static int ffq_dbg_counters_show(void *data, struct seq_file *m)
{
	struct request_queue *q = data;
	struct ffq_data *fd = q->elevator->elevator_data;
	struct ffq_stats st;

	spin_lock_irq(&fd->lock);
	ffq_settle_deferred(fd, NULL);
	st = fd->stats;
	spin_unlock_irq(&fd->lock);
	seq_printf(m, "dispatched %llu\ncompleted %llu\nrequeued %llu\nmerged %llu\nbypassed %llu\nreinsert %llu\n",
		   st.dispatched, st.completed, st.requeued, st.merged,
		   st.bypassed, st.reinsert);
	seq_printf(m, "held_full %llu\nheld_throttle %llu\nheld_antic %llu\nbatch_ended %llu\n",
		   st.held_full, st.held_throttle, st.held_antic,
		   st.batch_ended);
	seq_printf(m, "antic_started %llu\nantic_expired %llu\nantic_cancelled %llu\nantic_unblocked %llu\n",
		   st.antic_started, st.antic_expired, st.antic_cancelled,
		   st.antic_unblocked);
	return 0;
}

/* Every queued request, grouped by task. */
static int ffq_dbg_queue_list_show(void *data, struct seq_file *m)
{
	struct request_queue *q = data;
	struct ffq_data *fd = q->elevator->elevator_data;
	struct ffq_tq *tq;
	struct request *rq;

	spin_lock_irq(&fd->lock);
	ffq_settle_deferred(fd, NULL);
	list_for_each_entry(tq, &fd->active, active_node) {
		list_for_each_entry(rq, &tq->fifo, queuelist) {
			seq_printf(m, "task %d start %llu ", tq->pid,
				   ffq_rq_start(rq));
			__blk_mq_debugfs_rq_show(m, rq);
			seq_putc(m, '\n');
		}
	}
	spin_unlock_irq(&fd->lock);
	return 0;
}

static int ffq_dbg_bypass_list_show(void *data, struct seq_file *m)
{
	struct request_queue *q = data;
	struct ffq_data *fd = q->elevator->elevator_data;
	struct request *rq;

	spin_lock_irq(&fd->lock);
	ffq_settle_deferred(fd, NULL);
	list_for_each_entry(rq, &fd->bypass, queuelist) {
		__blk_mq_debugfs_rq_show(m, rq);
		seq_putc(m, '\n');
	}
	spin_unlock_irq(&fd->lock);
	return 0;
}

static const struct blk_mq_debugfs_attr ffq_queue_debugfs_attrs[] = {
	{"tasks", 0400, ffq_dbg_tasks_show},
	{"vtime", 0400, ffq_dbg_vtime_show},
	{"inflight", 0400, ffq_dbg_inflight_show},
	{"queued", 0400, ffq_dbg_queued_show},
	{"counters", 0400, ffq_dbg_counters_show},
	{"queue_list", 0400, ffq_dbg_queue_list_show},
	{"bypass_list", 0400, ffq_dbg_bypass_list_show},
	{},
};

#endif /* CONFIG_BLK_DEBUG_FS */

static struct elevator_type ffq_sched_type = {
	.ops = {
		.init_sched		= ffq_init_sched,
		.exit_sched		= ffq_exit_sched,
		.insert_requests	= ffq_insert_requests,
		.dispatch_request	= ffq_dispatch_request,
		.has_work		= ffq_has_work,
		.prepare_request	= ffq_prepare_request,
		.finish_request		= ffq_finish_request,
		.requeue_request	= ffq_requeue_request,
		.allow_merge		= ffq_allow_merge,
		.bio_merge		= ffq_bio_merge,
		.request_merge		= ffq_request_merge,
		.request_merged		= ffq_request_merged,
		.requests_merged	= ffq_requests_merged,
		.former_request		= ffq_former_request,
		.next_request		= ffq_next_request,
		.init_icq		= ffq_init_icq,
		.exit_icq		= ffq_exit_icq,
	},
	.icq_size = sizeof(struct ffq_icq),
	.icq_align = __alignof__(struct ffq_icq),
#ifdef CONFIG_BLK_DEBUG_FS
	.queue_debugfs_attrs = ffq_queue_debugfs_attrs,
#endif
	.elevator_attrs = ffq_attrs,
	.elevator_name = "flashfq",
	.elevator_owner = THIS_MODULE,
};

static int __init ffq_init(void)
{
	return elv_register(&ffq_sched_type);
}

static void __exit ffq_exit_module(void)
{
	elv_unregister(&ffq_sched_type);
}

module_init(ffq_init);
module_exit(ffq_exit_module);

MODULE_AUTHOR("ssd-iosched project");
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("FlashFQ I/O scheduler: throttled Min-SFQ(D) fair queueing with anticipation");
MODULE_VERSION(IOSCHED_VERSION);
MODULE_INFO(elevator, "flashfq");
