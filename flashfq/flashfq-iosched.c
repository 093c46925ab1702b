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
 * fd->lock, a plain spinlock, protects everything in struct ffq_data from
 * @s to @free, every task's state but its reference count and notice
 * (struct ffq_tq), a dispatched request's slot until its completion is
 * posted (struct ffq_slot), and is the dispatch lock of the per-CPU
 * dispatch batch records (fd->batch: elevator/iosched-batch.h).  It is
 * never taken in interrupt context, and so never with interrupts off:
 *  - dispatch_request, bio_merge and insert_requests at head (requeues,
 *    6.12 flush data) take it; any other insertion posts to fd->inbox,
 *    lock-free, and dispatch takes the inbox first thing
 *    (elevator/iosched-inbox.h), so a request takes the lock once on its
 *    way in and is tagged when taken (a bio cannot merge into a request
 *    still in the inbox).  block_rq_insert fires at posting, in the
 *    submitter's context; flashfq_insert, which carries the tags, when
 *    the request is taken, in the dispatching context (its task field
 *    names the request's task).  blk-mq calls them in process context:
 *    it runs a hardware queue inline only outside interrupts
 *    (WARN_ON_ONCE(in_interrupt()) in 6.1's
 *    __blk_mq_run_hw_queue() and 6.12's blk_mq_run_hw_queue(); upstream
 *    mq-deadline takes its lock there the same way).  The merge callbacks
 *    run under it (the core calls them from blk_mq_sched_try_merge() and
 *    blk_mq_sched_try_insert_merge(), which this file calls with it
 *    held); the debugfs files and exit_sched take it too.
 *  - completed_request, finish_request and requeue_request run in the
 *    driver's completion context, hard interrupts included, and take no
 *    lock ("Deferred completions" below).
 *  - The anticipation hrtimer runs in hard interrupt context: it only
 *    flags a due deadline and re-runs the hardware queues ("Restart").
 *  - exit_icq (like init_icq) runs in process context with interrupts
 *    off, under the io_context's lock: in ioc_exit_icqs() (the context's
 *    last task exits) that lock alone; in ioc_release_fn() (a workqueue,
 *    the context's last reference gone) also the queue lock; in
 *    ioc_clear_queue() (the elevator going away) also the queue lock on
 *    6.12, not on 6.1 (block/blk-ioc.c of both).  The io_context's lock
 *    is taken in hard interrupt context too, by put_io_context() dropping
 *    a context's last reference from another elevator's finish_request
 *    (bfq's): had exit_icq waited there for fd->lock, held with
 *    interrupts on by a CPU such an interrupt enters, neither would go
 *    on.  So exit_icq takes no lock: it posts the exit as its task's
 *    notice.  Nor may it run the hardware queues (blk_mq_run_hw_queue()
 *    may take the queue lock, held there on 6.12).
 * Under fd->lock only the hrtimer's base lock is taken (hrtimer_start());
 * the hardware queues are run without it.  The queues are device-wide, so
 * like mq-deadline and K2 this sets QUEUE_FLAG_SQ_SCHED.  Tunables are
 * written by sysfs stores, which the elevator core serialises with its
 * sysfs_lock, with WRITE_ONCE(), and read with READ_ONCE(); a cost
 * point's store takes fd->lock, as the learning that also writes the
 * costs in force (fd->cost) does.  The lockless
 * fields (fd->queued for has_work, fd->done, fd->flags and fd->requeued,
 * a task's @ref and notice, a slot's completion record) say who writes
 * them where they are declared.
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
 * finish_request, or until its completion is applied if finish_request
 * posted it, so a task lives while any of its requests does, and outlives
 * its io_cq if they do (the requests hold no io_context reference); a
 * posted notice holds one until it is applied.  exit_icq posts the exit,
 * which ends any anticipation when applied, and clears the io_cq's
 * pointer: no request is prepared for the context after it, since it runs
 * when no task uses the context any more, when the context has no
 * reference left, or with the queue frozen (block/blk-ioc.c).  The task
 * stays in the heaps while requests of it are outstanding and leaves them
 * when the last one's completion is applied; an anticipated task's exit
 * is not applied yet, so the io_cq's reference or the notice keeps it.
 * The last reference frees the task, in whatever context it goes.
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
 *    keeps its slot too, marked FFQ_RQ_REQUEUED, until it is inserted
 *    again (requeue_request takes no lock): the slot goes back there, and
 *    the request keeps its tags and goes first in its task's queue.  From
 *    the requeue until blk-mq's requeue work inserts it (at once, or
 *    after the driver's delay) the device so holds one request fewer than
 *    counted.  A request inserted while holding a slot without a requeue
 *    (no such path is known) gives it back too (debugfs counters
 *    "reinsert").
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
 * keep has_work true, and dispatch sets FFQ_HELD (ffq_hold()).  A posted
 * completion, or the hrtimer finding a deadline due, clears it and re-runs
 * the hardware queues (ffq_kick_held()); the dispatch that follows applies
 * the completion or ends the deadline first.  No lock orders the two, so
 * as for K2's throttle flag: dispatch sets the flag and, after a full
 * barrier, looks again for postings (deciding again if there are any); a
 * poster posts and, after a full barrier, tests the flag; one of the two
 * sees the other.  A dispatch that holds requests back for an
 * anticipation (blocking, or pacing) arms the hrtimer, under fd->lock,
 * for the earliest anticipation deadline (ffq_arm_timer()); nothing else
 * arms it.  Without FFQ_HELD nothing waits for a completion or a
 * deadline: the core runs the queues after every insert, and the next
 * section under the lock applies the completions and ends the deadlines
 * due by its time first (ffq_drain()), so the timer, which would cost an
 * interrupt each anticipation period, is not needed.  exit_icq may not run
 * the queues: a blocking anticipation its exit ends holds dispatch until
 * the next posting or insert, or the end of the blocking period, when the
 * hrtimer's kick starts a dispatch.
 *
 * Deferred completions
 * --------------------
 * finish_request does not apply a completion: it posts it, in the
 * request's slot (the task, whether the request was synchronous, and the
 * completion's time: blk-mq's timestamp from completed_request, else the
 * clock), on fd->done, a lockless list (llist_add()), with the request's
 * reference to the task.  A request freed without a slot (an error path)
 * and exit_icq post their task's notice instead, once however many
 * changes it carries (ffq_post_notice()).  Every section under fd->lock
 * starts with ffq_drain(): it takes the whole list and applies the
 * postings in the order they were made (the slot back, the task's facts,
 * an anticipation started at the completion's own time, the exit), then
 * ends the anticipation deadlines due by the section's time, or flagged
 * by the hrtimer (ffq_expire()).  The section's time is the block layer's
 * clock (compat_blk_time_ns(): in a task holding a plug, the plug's
 * reading), which may lag the clock by the plug's life: a deadline passed
 * within it ends at the next section after, or when the timer of a held
 * dispatch fires.  So:
 *  - Every decision (a tag, a dispatch, the throttle, a hold, a merge) is
 *    made under fd->lock after the drain, on the state applying every
 *    completion at once would have given: the same free slots, the same
 *    anticipations with the same deadlines, any deadline passed already
 *    ended, and the same virtual time, which is the largest minimum the
 *    active tasks' smallest outstanding tags reached: a completion, an
 *    exit or a deadline only removes a task or raises its smallest tag,
 *    so applied in one go they reach the same minimum.  Dispatch order,
 *    tags and virtual time are those of applying each completion at
 *    once; the unit tests run their random workload both ways and compare
 *    them.
 *  - What waits is when the effects are seen: a held dispatch is re-run
 *    at once as before (the kick), and applies the completion first; a
 *    deadline ends at the first section at or after it (or when a held
 *    dispatch's timer fires); debugfs, and the flashfq_vtime and
 *    flashfq_antic_* events, show an update at the section that applies
 *    it (their timestamps move, not their values).
 *    flashfq_complete fires in finish_request with the in-flight count of
 *    the last section (this request's slot still counted).
 *  - An exit ends its task's anticipation at the next section (Restart:
 *    at the latest when a blocking period ends).
 *  - A requeued request keeps its slot until it is inserted again
 *    (In-flight accounting).
 *
 * Lone arrivals
 * -------------
 * A dispatch that takes one new request from fd->inbox while nothing is
 * queued decides it as it tags it (ffq_dispatch_lone(), ffq_pick_lone()
 * in flashfq-core.h): the task's places in the heaps are made once, as
 * the request's dispatch leaves them, and the decision is the one the
 * request queued would get; held back, it is queued after all.  It skips
 * its task's queue, the heap of tasks with requests queued and the merge
 * indexes, which a request handed out at once only passes through.  The
 * unit tests run their random workload both ways and get the same
 * dispatches, tags and virtual time.
 *
 * Deferred updates
 * ----------------
 * A completion that starts its task's anticipation (applied by
 * ffq_drain()) leaves the task's places in the heaps for later
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
#include <linux/atomic.h>
#include <linux/bitops.h>
#include <linux/bitmap.h>
#include <linux/llist.h>
#include <linux/percpu.h>
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
#include "iosched-inbox.h"
#include "iosched-merge.h"
#include "iosched-icq.h"
#include "iosched-sysfs.h"
#include "flashfq-core.h"

#define CREATE_TRACE_POINTS
#include <trace/events/flashfq.h>

/*
 * A record on fd->done ("Deferred completions" above): a request's
 * completion (in its slot) or a task's notice (in the task).  @kind is
 * constant.
 */
enum ffq_rec_kind {
	FFQ_REC_DONE,		/* struct ffq_slot: its request finished */
	FFQ_REC_NOTICE,		/* struct ffq_tq: exit, or unslotted done */
};

struct ffq_rec {
	struct llist_node node;
	enum ffq_rec_kind kind;
};

/*
 * A depth slot: one request in the device, then its completion record.
 * @node, @tq, @start, @dispatch_ns, @bytes, @dir, @dir_bytes and
 * @requeued are written by dispatch under fd->lock; the request's
 * completion (completed_request, requeue_request, finish_request), which
 * owns the slot from then until it posts @rec (llist_add(), a full
 * barrier), reads them and writes @done_ns, @requeued and @sync; the
 * holder of fd->lock that takes the record off fd->done (llist_del_all(),
 * likewise) applies it and frees the slot.  Those three may be three
 * CPUs: each slot has cache lines of its own, which no other slot's
 * owner writes.
 */
struct ffq_slot {
	struct list_head node;	/* its task's inflight list while taken */
	struct ffq_tq *tq;	/* the request's task */
	u64 start;		/* the request's start tag */
	u64 dispatch_ns;	/* when it was dispatched */
	u64 done_ns;		/* when it completed, 0: not known yet */
	u32 bytes;		/* its size at dispatch */
	u8 dir;			/* READ, WRITE, or FFQ_DIR_OTHER */
	u64 dir_bytes;		/* bytes of @dir in the device, its included */
	bool requeued;		/* given back by the driver: not learnt from */
	bool sync;		/* FFQ_RQ_SYNC: its completion may anticipate */
	struct ffq_rec rec;	/* FFQ_REC_DONE */
} ____cacheline_aligned_in_smp;

/* ffq_slot.dir of what is neither a read nor a write: not learnt from */
#define FFQ_DIR_OTHER	2

/* Bits of ffq_tq.notice, atomic bitops. */
enum {
	FFQ_TQ_POSTED,		/* @rec is on fd->done */
	FFQ_TQ_EXIT,		/* exit_icq came: its reference is posted */
};

/*
 * A task's queues: all under fd->lock but @pid, @ref and the notice
 * ("Tasks and their lifetime", "Deferred completions" above).
 */
struct ffq_tq {
	/*
	 * What every request of the task writes (its tag, dispatch and
	 * completion, from whichever CPU holds fd->lock then), together:
	 * the fewer cache lines, the fewer that move between CPUs.
	 */
	struct ffq_task task;		/* flashfq-core.h state and facts */
	struct list_head fifo;		/* queued requests, in tag order */
	struct list_head inflight;	/* its slots, in dispatch order */
	refcount_t ref;			/* the io_cq's and its requests' */
	u64 inserted;			/* requests tagged */
	u64 dispatched;
	u64 completed;
	u64 service;			/* charge of the dispatched ones */

	struct rb_root sort[2];		/* queued mergeable ones, by sector */
	struct list_head active_node;	/* on fd->active while active */
	pid_t pid;			/* constant: the context's creator */
	/*
	 * The notice, set locklessly by exit_icq and by finish_request of
	 * a request without a slot, posted once (FFQ_TQ_POSTED) and taken
	 * back by the next holder of fd->lock (ffq_apply_notice()).
	 */
	unsigned long notice;		/* FFQ_TQ_* */
	atomic_t done_unslotted;	/* requests finished without a slot */
	struct ffq_rec rec;		/* FFQ_REC_NOTICE */
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

/*
 * Counters, per CPU: incremented by holders of fd->lock (this_cpu_inc()),
 * summed by debugfs "counters".  Shared, they would put one more cache
 * line a request in every CPU's way.
 */
struct ffq_stats {
	u64 dispatched;
	u64 completed;
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

/* Bits of ffq_data.flags, atomic bitops ("Restart" above). */
enum {
	FFQ_HELD,		/* dispatch held queued requests back */
	FFQ_DUE,		/* the hrtimer found a deadline due */
};

/*
 * Laid out by who writes what how often: a field written for every
 * request shares its cache line with the lock or with others written
 * then, and a line read locklessly by other CPUs holds nothing written
 * more often than it is read.
 */
struct ffq_data {
	/* Constant, read-mostly: written at init and by sysfs stores. */
	struct request_queue *q;	/* constant */
	/* constant pointer: the dispatch batch records (iosched-batch.h) */
	struct iosched_batch __percpu *batch;
	struct ffq_stats __percpu *stats;	/* constant pointer */
	/* Tunables: WRITE_ONCE() by sysfs stores, READ_ONCE() by users. */
	unsigned int depth;
	unsigned int throttle_us;
	unsigned int antic_us;
	unsigned int antic_block_us;
	unsigned int ioprio_weights;
	/*
	 * The costs in force: written under @lock (sysfs stores take it),
	 * with WRITE_ONCE(), as learnt or set (@cost_set, @cost_src); read
	 * with READ_ONCE().
	 */
	struct ffq_cost_model cost;
	/*
	 * Requests on tasks' queues and @bypass: written under @lock with
	 * WRITE_ONCE(), read locklessly by has_work and bio_merge.  Here
	 * because it changes only when requests wait, which a request
	 * handed out as it comes does not (ffq_dispatch_lone()).
	 */
	unsigned int queued;

	/* requests inserted, lock-free, not yet taken ("Locking") */
	struct iosched_inbox inbox ____cacheline_aligned_in_smp;

	/* Under @lock; the first three lines are written for every request. */
	spinlock_t lock ____cacheline_aligned_in_smp;	/* "Locking" above */
	unsigned int nr_bypass;		/* requests on @bypass */
	struct ffq_sched s;		/* tasks' order, virtual time */
	u64 inflight_bytes[2];		/* bytes of reads, writes in slots */
	/* free @slots, a bit each: the lowest is taken first */
	unsigned long free[BITS_TO_LONGS(FFQ_MAX_DEPTH)];
	u64 timer_at;			/* when @timer is armed for, 0: not */
	struct list_head bypass;	/* unprepared requests */
	struct list_head active;	/* active tasks (debugfs) */
	struct ffq_tq *bio_tq;		/* bio_merge: the bio's task */
	struct hrtimer timer;		/* held dispatch: earliest deadline */
	struct ffq_learn learn;		/* learnt costs (flashfq-core.h) */
	struct ffq_cost_model cost_set;	/* written in sysfs, 0: learn */
	u8 cost_src[FFQ_NR_POINTS];	/* enum ffq_cost_src of @cost */
	struct ffq_tq anon;		/* requests without a task */

	/*
	 * Lockless, written by completions, requeues, exits and the timer:
	 * the records to apply, in reverse order of posting (llist_add(),
	 * taken off by holders of @lock), the restart flags and the requeue
	 * count.
	 */
	struct llist_head done ____cacheline_aligned_in_smp;
	unsigned long flags;		/* FFQ_HELD, FFQ_DUE */
	atomic_long_t requeued;		/* slot holders given back */

	/* a slot's fields: see struct ffq_slot (lines of their own) */
	struct ffq_slot slots[FFQ_MAX_DEPTH];
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
 * Touched by whoever owns the request: under fd->lock from insert until
 * dispatch hands it out, then locklessly by completed_request,
 * finish_request and requeue_request (a requeued one is FlashFQ's again
 * at insert).
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
	tq->notice = 0;
	atomic_set(&tq->done_unslotted, 0);
	tq->rec.kind = FFQ_REC_NOTICE;
	tq->inserted = 0;
	tq->dispatched = 0;
	tq->completed = 0;
	tq->service = 0;
}

/* ffq_tq_put()'s last reference went. */
static noinline void ffq_tq_free(struct ffq_tq *tq)
{
	WARN_ONCE(ffq_task_active(&tq->task) || tq->task.heaps ||
		  !list_empty(&tq->active_node) || !list_empty(&tq->fifo) ||
		  !list_empty(&tq->inflight),
		  "flashfq: task %d freed while active\n", tq->pid);
	kfree(tq);
}

/*
 * Drop a reference to @tq; the last frees it.  Whatever the context: the
 * last reference goes only once the task is in no heap, list, slot or
 * record (its requests' after their completions were applied, a posted
 * notice's after it was, and its exit, which ends its anticipation, was
 * posted before the io_cq's went), so nothing else can reach it.
 * fd->anon's own reference is never dropped.  Inline: once a request.
 */
static inline void ffq_tq_put(struct ffq_tq *tq)
{
	if (refcount_dec_and_test(&tq->ref))
		ffq_tq_free(tq);
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
 * Dispatch holds requests back for an anticipation (blocking, or pacing):
 * arm the hrtimer for the earliest anticipation deadline unless it is
 * armed for one at most as late ("Restart" above).  @fd->timer_at is
 * reset once a section has passed it (ffq_expire()), so a timer armed for
 * it has fired or is about to.
 */
static void ffq_arm_timer(struct ffq_data *fd)
{
	u64 next = ffq_next_deadline(&fd->s);

	lockdep_assert_held(&fd->lock);

	if (!next || (fd->timer_at && fd->timer_at <= next))
		return;
	fd->timer_at = next;
	hrtimer_start(&fd->timer, ns_to_ktime(next), HRTIMER_MODE_ABS);
}

/*
 * The facts of @tq changed: give the core its queue heads, let it re-order
 * the task, keep the active list in step.  Inlined where it runs for
 * every request (insert, completion: the call and its reloads would be
 * paid per request), called elsewhere (ffq_refresh()).
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
 * Something that may release held requests was posted (a completion) or
 * found (a due deadline): re-run the hardware queues if dispatch held
 * requests back.  Lockless, from any context but under fd->lock:
 * blk_mq_run_hw_queue() can take the queue lock.  The caller's posting is
 * ordered before the test (llist_add()'s full barrier, or
 * smp_mb__after_atomic()), and ffq_hold() sets the flag before it looks for
 * postings: one of the two sees the other.
 */
static void ffq_kick_held(struct ffq_data *fd)
{
	if (test_bit(FFQ_HELD, &fd->flags) &&
	    test_and_clear_bit(FFQ_HELD, &fd->flags))
		blk_mq_run_hw_queues(fd->q, true);
}

/*
 * Dispatch is holding queued requests back: say so (FFQ_HELD), then look
 * again for a completion, notice or due deadline posted meanwhile, whose
 * poster may have tested the flag before it was set.  Returns whether
 * there is one: dispatch then applies it and decides again.
 */
static bool ffq_hold(struct ffq_data *fd)
{
	lockdep_assert_held(&fd->lock);

	set_bit(FFQ_HELD, &fd->flags);
	/* pairs with ffq_kick_held()'s callers: the flag before the look */
	smp_mb__after_atomic();
	return !llist_empty(&fd->done) || test_bit(FFQ_DUE, &fd->flags);
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

/* @rq's direction: READ, WRITE, or FFQ_DIR_OTHER (discard, ...). */
static u8 ffq_rq_dir(struct request *rq)
{
	switch (req_op(rq)) {
	case REQ_OP_READ:
		return READ;
	case REQ_OP_WRITE:
		return WRITE;
	default:
		return FFQ_DIR_OTHER;
	}
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
	u8 dir = ffq_rq_dir(rq);

	if (dir == FFQ_DIR_OTHER)	/* as a 4 KiB write */
		return ffq_cost(&m, true, FFQ_COST_SMALL);
	return ffq_cost(&m, dir == WRITE, blk_rq_bytes(rq));
}

static u32 ffq_rq_charge_now(struct ffq_data *fd, struct request *rq)
{
	u64 cost = ffq_rq_cost(fd, rq);

	/* every request weighs FFQ_WEIGHT_NORM unless ioprio_weights */
	if (!READ_ONCE(fd->ioprio_weights))
		return ffq_charge(cost, FFQ_WEIGHT_NORM);
	return ffq_charge(cost, ffq_weight(req_get_ioprio(rq), true));
}

/*
 * The depth slot request word @word names, NULL if none.  By the request's
 * owner, with or without fd->lock.
 */
static inline struct ffq_slot *ffq_slot_of(struct ffq_data *fd, u64 word)
{
	unsigned int idx = ffq_rq_slot(word);

	if (!idx)
		return NULL;
	if (WARN_ONCE(idx > FFQ_MAX_DEPTH, "flashfq: %s: bad slot %u\n",
		      ffq_disk_name(fd), idx))
		return NULL;
	return &fd->slots[idx - 1];
}

/* Give @slot, taken by a request of its task, back. */
static inline void ffq_free_slot(struct ffq_data *fd, struct ffq_slot *slot)
{
	lockdep_assert_held(&fd->lock);

	if (WARN_ONCE(!fd->s.inflight || list_empty(&slot->node),
		      "flashfq: %s: slot %td given back twice (in flight %u)\n",
		      ffq_disk_name(fd), slot - fd->slots, fd->s.inflight))
		return;
	list_del_init(&slot->node);
	if (slot->dir != FFQ_DIR_OTHER)
		fd->inflight_bytes[slot->dir] -= slot->bytes;
	__set_bit(slot - fd->slots, fd->free);
	slot->tq->task.nr_inflight--;
	WRITE_ONCE(fd->s.inflight, fd->s.inflight - 1);
}

/*
 * A deadline is due at @now (ffq_drain()): end the blocking periods and
 * anticipations due then.  The timer is armed again only by a dispatch
 * that holds requests back (ffq_arm_timer()).
 */
static noinline void ffq_expire(struct ffq_data *fd, u64 now)
{
	struct ffq_task *t;

	lockdep_assert_held(&fd->lock);

	ffq_settle_deferred(fd, NULL);
	if (fd->timer_at && fd->timer_at <= now)
		fd->timer_at = 0;
	while ((t = ffq_timer_due(&fd->s, now))) {
		struct ffq_tq *tq = container_of(t, struct ffq_tq, task);

		if (ffq_timer_fire(&fd->s, t, now) == FFQ_TIMER_EXPIRE) {
			this_cpu_inc(fd->stats->antic_expired);
			trace_flashfq_antic_expire(fd->q, tq->pid,
						   t->antic_start,
						   t->antic_until, 0);
		} else {
			this_cpu_inc(fd->stats->antic_unblocked);
		}
		ffq_refresh(fd, tq);
	}
}

/*
 * Bring the costs in force of a direction's two points (@write: the write
 * points) up to date with what is learnt and set, tracing each change
 * (flashfq_cost).  Under fd->lock.
 */
static void ffq_update_costs(struct ffq_data *fd, bool write)
{
	unsigned int pt, first = write ? FFQ_PT_WRITE_4K : FFQ_PT_READ_4K;
	unsigned int end = first + 2;
	enum ffq_cost_src src;
	u32 *cur, val;

	lockdep_assert_held(&fd->lock);

	for (pt = first; pt < end; pt++) {
		val = ffq_learn_cost(&fd->learn, &fd->cost_set, pt, &src);
		cur = ffq_point(&fd->cost, pt);
		if (src == fd->cost_src[pt] && !ffq_cost_changes(src, *cur, val))
			continue;
		trace_flashfq_cost(fd->q, pt, *cur, val, src,
				   fd->learn.pt[pt].samples);
		WRITE_ONCE(*cur, val);
		fd->cost_src[pt] = src;
	}
}

/*
 * Teach the learnt costs @slot's request, completed (flashfq-core.h,
 * "Learnt costs"), and, when what it taught may move a cost
 * (ffq_learn_sample()), bring its direction's costs in force up to date,
 * and the other direction's when a point was just learnt (they may scale
 * from it); not a request the driver gave back, whose time holds a
 * reset's.  Under fd->lock, before the slot goes back.
 */
static void ffq_learn_done(struct ffq_data *fd, struct ffq_slot *slot)
{
	bool write = slot->dir == WRITE;
	unsigned int pt;

	if (slot->dir == FFQ_DIR_OTHER || slot->requeued ||
	    slot->done_ns <= slot->dispatch_ns)
		return;
	if (!ffq_learn_sample(&fd->learn, write, slot->bytes,
			      slot->dispatch_ns, slot->done_ns,
			      slot->dir_bytes))
		return;
	ffq_update_costs(fd, write);
	pt = ffq_learn_point(write, slot->bytes);
	if (fd->learn.pt[pt].samples == FFQ_LEARN_MIN)
		ffq_update_costs(fd, !write);
}

/*
 * Apply the completion recorded in @slot, as finish_request did when it
 * took fd->lock: the slot goes back, and the task's anticipation starts at
 * the completion's time.  Drops the request's reference to the task.
 */
static void ffq_apply_done(struct ffq_data *fd, struct ffq_slot *slot)
{
	struct ffq_tq *tq = slot->tq;
	struct ffq_task *t = &tq->task;

	ffq_settle_deferred(fd, tq);
	ffq_learn_done(fd, slot);
	ffq_free_slot(fd, slot);
	tq->completed++;
	this_cpu_inc(fd->stats->completed);
	if (!WARN_ON_ONCE(!t->nr_out))
		t->nr_out--;
	if (ffq_complete(&fd->s, t, slot->sync, slot->done_ns,
			 ffq_us(&fd->antic_us), ffq_us(&fd->antic_block_us))) {
		this_cpu_inc(fd->stats->antic_started);
		ffq_trace_antic(fd, tq, slot->done_ns);
		/*
		 * The task stays active and nothing else changed: its update
		 * can wait for its next request, which then makes it alone
		 * (ffq_defer()), or for anything else.  Its deadline is
		 * ffq_next_deadline()'s already.
		 */
		ffq_defer(&fd->s, t);
	} else {
		__ffq_refresh(fd, tq);
	}
	/* not the last if it anticipates: its io_cq holds one */
	ffq_tq_put(tq);
}

/*
 * Post @tq's notice, which its caller just changed, for the next holder
 * of fd->lock, unless it is posted already.  The caller holds a reference
 * to @tq; the posted notice takes one of its own, which
 * ffq_apply_notice() drops.
 */
static void ffq_post_notice(struct ffq_data *fd, struct ffq_tq *tq)
{
	/* fully ordered: the change is visible before the test */
	if (test_and_set_bit(FFQ_TQ_POSTED, &tq->notice))
		return;
	refcount_inc(&tq->ref);
	llist_add(&tq->rec.node, &fd->done);
}

/*
 * Apply @tq's notice: requests freed without a slot (no anticipation: an
 * error path) and its exit, which ends any anticipation.  Whatever is
 * changed after the flag is cleared is posted again.
 */
static void ffq_apply_notice(struct ffq_data *fd, struct ffq_tq *tq)
{
	struct ffq_task *t = &tq->task;
	unsigned int n;
	bool exit;

	clear_bit(FFQ_TQ_POSTED, &tq->notice);
	/* pairs with ffq_post_notice(): the flag cleared before the reads */
	smp_mb__after_atomic();
	n = atomic_xchg(&tq->done_unslotted, 0);
	exit = test_and_clear_bit(FFQ_TQ_EXIT, &tq->notice);

	ffq_settle_deferred(fd, NULL);
	if (!WARN_ON_ONCE(t->nr_out < n))
		t->nr_out -= n;
	if (exit && ffq_exit(t)) {
		this_cpu_inc(fd->stats->antic_cancelled);
		ffq_trace_antic(fd, tq, 0);
	}
	ffq_refresh(fd, tq);
	ffq_tq_put(tq);
}

/*
 * End the anticipation deadlines due by the section's time (the block
 * layer's clock: a plug's reading in a task holding one), or, @due, what
 * the hrtimer found due, by the clock's: the last step of ffq_drain().
 * Inline: most sections find no deadline, or one not yet due.
 */
static __always_inline void ffq_end_due(struct ffq_data *fd, bool due)
{
	u64 deadline = ffq_next_deadline(&fd->s);
	u64 now;

	if (likely(!due && !deadline))
		return;
	now = due ? ktime_get_ns() : compat_blk_time_ns();
	if (due || deadline <= now)
		ffq_expire(fd, now);
}

/* ffq_drain() when something was posted or a deadline flagged. */
static noinline void __ffq_drain(struct ffq_data *fd)
{
	struct llist_node *node, *next;

	node = llist_del_all(&fd->done);
	/* in posting order; mostly one completion, as good reversed */
	if (node && node->next)
		node = llist_reverse_order(node);
	llist_for_each_safe(node, next, node) {
		struct ffq_rec *rec = container_of(node, struct ffq_rec, node);

		if (rec->kind == FFQ_REC_NOTICE)
			ffq_apply_notice(fd, container_of(rec, struct ffq_tq,
							  rec));
		else
			ffq_apply_done(fd, container_of(rec, struct ffq_slot,
							rec));
	}
	ffq_end_due(fd, test_bit(FFQ_DUE, &fd->flags) &&
		    test_and_clear_bit(FFQ_DUE, &fd->flags));
}

/*
 * Apply what was posted for the next holder of fd->lock, in the order it
 * was posted ("Deferred completions" above); then end the anticipation
 * deadlines due by the section's time or that the hrtimer found due
 * (ffq_end_due()).  Every section under fd->lock starts with this, so
 * nothing reads the scheduler's state before it is up to date.  The tests
 * are inline: most sections (an insert, the dispatch that ends a batch)
 * find nothing posted, and no deadline or one not yet due.
 */
static __always_inline void ffq_drain(struct ffq_data *fd)
{
	lockdep_assert_held(&fd->lock);

	if (unlikely(!llist_empty(&fd->done)) ||
	    unlikely(test_bit(FFQ_DUE, &fd->flags)))
		__ffq_drain(fd);
	else
		ffq_end_due(fd, false);
}

/*
 * The time ffq_pick() is given at @throttle (charge units): the clock only
 * when it may ask it, the throttle on and an anticipated task pacing the
 * others; else 0.
 */
static __always_inline u64 ffq_pick_now(struct ffq_data *fd, u64 throttle)
{
	return throttle && fd->s.pace.nr ? ktime_get_ns() : 0;
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

/*
 * Tag @rq, a new request of @tq charged @charge, as it arrives: the
 * task's anticipation ends (fulfilled), and it gets its start tag.
 * Returns the start tag.
 */
static __always_inline u64 ffq_tag_new(struct ffq_data *fd,
				       struct ffq_tq *tq, struct request *rq,
				       u32 charge)
{
	u64 start;

	lockdep_assert_held(&fd->lock);

	if (ffq_arrive(&tq->task)) {
		this_cpu_inc(fd->stats->antic_cancelled);
		ffq_trace_antic(fd, tq, 0);
	}
	start = ffq_tag(&fd->s, &tq->task, charge);
	ffq_rq_set_start(rq, start);
	tq->inserted++;
	return start;
}

/*
 * Put @rq, a new request of @tq just tagged (ffq_tag_new()), at its
 * task's tail, and in the merge indexes if it will wait.  Returns @flags
 * with FFQ_RQ_ON_RB if it went into the task's tree.
 */
static unsigned int ffq_queue_new(struct ffq_data *fd, struct ffq_tq *tq,
				  struct request *rq, unsigned int flags)
{
	struct request_queue *q = fd->q;

	lockdep_assert_held(&fd->lock);

	/*
	 * In tag order, also when inserted at head (6.12 flush data): a
	 * task's queue stays sorted by start tag.
	 */
	list_add_tail(&rq->queuelist, &tq->fifo);
	if (rq_mergeable(rq) && ffq_will_wait(fd)) {
		elv_rb_add(&tq->sort[rq_data_dir(rq)], rq);
		flags |= FFQ_RQ_ON_RB;
		if (!ffq_discard_mergable(rq)) {
			elv_rqhash_add(q, rq);
			if (!q->last_merge)
				q->last_merge = rq;
		}
	}
	return flags;
}

/*
 * @rq, of @tq, tagged @start and charged @charge, is on its task's queue
 * (ffq_insert_request(), or a lone arrival held, ffq_dispatch_lone()):
 * count it and bring the task's places up to date.
 */
static __always_inline void ffq_queued(struct ffq_data *fd,
				       struct ffq_tq *tq, struct request *rq,
				       u64 start, u32 charge,
				       unsigned int flags, bool at_head)
{
	lockdep_assert_held(&fd->lock);

	if (!(flags & FFQ_RQ_OWNED)) {
		flags |= FFQ_RQ_OWNED;
		tq->task.nr_out++;
	}
	ffq_rq_put(rq, charge, 0, flags | FFQ_RQ_QUEUED);
	tq->task.nr_queued++;
	WRITE_ONCE(fd->queued, fd->queued + 1);
	__ffq_refresh(fd, tq);

	if (at_head)
		trace_block_rq_insert(rq);
	trace_flashfq_insert(rq, tq->pid, start, start + charge, fd->s.vtime,
			     at_head);
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
		if (at_head)	/* posted: traced by ffq_insert_requests() */
			trace_block_rq_insert(rq);
		list_add_tail(&rq->queuelist, &fd->bypass);
		fd->nr_bypass++;
		WRITE_ONCE(fd->queued, fd->queued + 1);
		return;
	}

	tq = ffq_rq_tq(rq);
	ffq_settle_deferred(fd, tq);
	flags = ffq_rq_flags(ffq_rq_get(rq));
	if (ffq_rq_slot(ffq_rq_get(rq))) {
		struct ffq_slot *slot = ffq_slot_of(fd, ffq_rq_get(rq));

		/*
		 * Requeued (FFQ_RQ_REQUEUED: its slot was kept for this) or,
		 * by no known path, inserted again some other way: the slot
		 * goes back now, its start tag (rq->fifo_time may have
		 * served a completion IPI since) with the request.
		 */
		if (slot) {
			ffq_rq_set_start(rq, slot->start);
			ffq_free_slot(fd, slot);
			if (!(flags & FFQ_RQ_REQUEUED))
				this_cpu_inc(fd->stats->reinsert);
		}
		flags &= ~FFQ_RQ_REQUEUED;
		ffq_rq_put(rq, ffq_rq_charge(ffq_rq_get(rq)), 0, flags);
	}

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
		start = ffq_tag_new(fd, tq, rq, charge);
		flags |= FFQ_RQ_TAGGED | (rq_is_sync(rq) ? FFQ_RQ_SYNC : 0);
		flags = ffq_queue_new(fd, tq, rq, flags);
	}
	ffq_queued(fd, tq, rq, start, charge, flags, at_head);
}

/*
 * At head (requeues, 6.12 flush data) under fd->lock; anything else goes
 * to fd->inbox, lock-free, for the next dispatch ("Locking").
 */
static void ffq_insert_requests(struct blk_mq_hw_ctx *hctx,
				struct list_head *list, compat_insert_t flags)
{
	struct ffq_data *fd = hctx->queue->elevator->elevator_data;
	struct request *rq;
	LIST_HEAD(free);

	if (!compat_insert_at_head(flags)) {
		/* nothing touches a request once posted */
		list_for_each_entry(rq, list, queuelist)
			trace_block_rq_insert(rq);
		iosched_inbox_post(&fd->inbox, list);
		return;
	}
	spin_lock(&fd->lock);
	ffq_drain(fd);
	while (!list_empty(list)) {
		rq = list_first_entry(list, struct request, queuelist);
		list_del_init(&rq->queuelist);
		ffq_insert_request(fd, rq, true, &free);
	}
	spin_unlock(&fd->lock);

	compat_free_requests(&free);
}

/*
 * The lowest free depth slot, under fd->lock.  find_first_bit() over
 * FFQ_MAX_DEPTH bits is an out-of-line call in every dispatch; the four
 * words are scanned here instead.  The caller knows one is free
 * (ffq_pick(): fewer than depth taken, depth at most FFQ_MAX_DEPTH).
 */
static __always_inline unsigned int ffq_first_free(const struct ffq_data *fd)
{
	unsigned int w;

	for (w = 0; w < ARRAY_SIZE(fd->free) - 1; w++)
		if (fd->free[w])
			break;
	return w * BITS_PER_LONG + __ffs(fd->free[w]);
}

/*
 * @rq, of @tq, tagged @start, goes to the driver: it takes a depth slot,
 * listed last on its task's in-flight list, and is counted in
 * s->inflight (ffq_pick() said fewer than depth, at most FFQ_MAX_DEPTH,
 * are taken).  The task's facts are the caller's.  *@now is set to the
 * dispatch time.
 */
static __always_inline struct ffq_slot *ffq_take_slot(struct ffq_data *fd,
						      struct ffq_tq *tq,
						      struct request *rq,
						      u64 start, u64 *now)
{
	unsigned int idx = ffq_first_free(fd);
	struct ffq_slot *slot = &fd->slots[idx];

	lockdep_assert_held(&fd->lock);

	__clear_bit(idx, fd->free);
	/* As mq-deadline: no more merging into a request handed out. */
	rq->rq_flags |= RQF_STARTED;
	list_add_tail(&slot->node, &tq->inflight);
	slot->tq = tq;
	slot->start = start;
	/* a plug's time, as blk-mq's completion time may be (compat) */
	*now = compat_blk_time_ns();
	slot->dispatch_ns = *now;
	slot->done_ns = 0;
	slot->requeued = false;
	slot->bytes = blk_rq_bytes(rq);
	slot->dir = ffq_rq_dir(rq);
	if (slot->dir != FFQ_DIR_OTHER)
		slot->dir_bytes = fd->inflight_bytes[slot->dir] += slot->bytes;
	/* WRITE_ONCE(): the trace events of completions read it locklessly */
	WRITE_ONCE(fd->s.inflight, fd->s.inflight + 1);
	return slot;
}

/* @rq went out in @slot at @now: its word, the counts, the event. */
static __always_inline void ffq_sent(struct ffq_data *fd, struct ffq_tq *tq,
				     struct request *rq, struct ffq_slot *slot,
				     u32 charge, unsigned int flags, u64 now,
				     u64 gap)
{
	ffq_rq_put(rq, charge, slot - fd->slots + 1, flags);
	tq->dispatched++;
	tq->service += charge;
	this_cpu_inc(fd->stats->dispatched);
	trace_flashfq_dispatch(rq, tq->pid, slot->start, charge, fd->s.vtime,
			       rq->start_time_ns && now > rq->start_time_ns ?
			       now - rq->start_time_ns : 0,
			       fd->s.inflight, gap);
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
	u64 now;

	lockdep_assert_held(&fd->lock);

	__ffq_remove_request(fd, tq, rq);
	slot = ffq_take_slot(fd, tq, rq, start, &now);
	/* the facts ffq_refresh() would read: the other heads are as they were */
	if (!t->nr_inflight++)
		t->inflight_start = start;
	next = list_first_entry_or_null(&tq->fifo, struct request, queuelist);
	if (next)
		t->head_start = ffq_rq_start(next);

	charge = ffq_rq_charge(ffq_rq_get(rq));
	ffq_dispatched(&fd->s, t, start, charge);
	/*
	 * Not ffq_refresh(): the task stays active, its anticipation state
	 * and so the timer are unchanged (ffq_update_dispatched()).
	 */
	if (ffq_update_dispatched(&fd->s, t))
		trace_flashfq_vtime(fd->q, fd->s.vtime, fd->s.vtime - before);
	ffq_sent(fd, tq, rq, slot, charge, ffq_rq_flags(ffq_rq_get(rq)), now,
		 gap);
	return rq;
}

/*
 * A dispatch took one request, @rq, from the inbox, and nothing is
 * queued: if it is a new request of a task (prepared, not tagged, no
 * slot) within the depth and of this dispatch batch's hardware queue
 * (@batch, as __ffq_dispatch_request()), decide it as it is tagged
 * (ffq_pick_lone()), sparing it its task's queue, the heap of tasks with
 * requests queued and the merge indexes, which a request handed out at
 * once only passes through.  The tags, virtual time, decision, counters
 * and events are an insert's and a dispatch's (the unit tests compare
 * the two ways); virtual time's move is one flashfq_vtime event.  Returns
 * @rq if it goes; else NULL, @rq queued as ffq_insert_request() queues
 * it (@free as there), for the caller's decision loop.
 */
static struct request *ffq_dispatch_lone(struct ffq_data *fd,
					 struct request *rq,
					 const struct blk_mq_hw_ctx *batch,
					 struct list_head *free)
{
	u32 depth = ffq_cur_depth(fd), charge;
	u64 before, start, last, throttle, gap, now;
	struct ffq_slot *slot;
	struct ffq_task *t;
	struct ffq_tq *tq;
	unsigned int flags;
	enum ffq_pick res;

	lockdep_assert_held(&fd->lock);

	if (!compat_rq_elv_finish(rq) || ffq_rq_get(rq) ||
	    fd->s.inflight >= depth || iosched_batch_ends(batch, rq)) {
		ffq_insert_request(fd, rq, false, free);
		return NULL;
	}
	tq = ffq_rq_tq(rq);
	t = &tq->task;
	ffq_settle_deferred(fd, tq);
	before = fd->s.vtime;
	charge = ffq_rq_charge_now(fd, rq);
	start = ffq_tag_new(fd, tq, rq, charge);
	flags = FFQ_RQ_TAGGED | FFQ_RQ_OWNED |
		(rq_is_sync(rq) ? FFQ_RQ_SYNC : 0);
	t->nr_out++;
	/* the facts as if it were in flight (ffq_pick_lone()) */
	if (!t->nr_inflight++)
		t->inflight_start = start;
	last = t->last_start;
	throttle = ffq_us(&fd->throttle_us);
	res = ffq_pick_lone(&fd->s, t, start, charge, depth, throttle,
			    ffq_pick_now(fd, throttle), &gap);
	if (fd->s.vtime != before)
		trace_flashfq_vtime(fd->q, fd->s.vtime, fd->s.vtime - before);
	if (res != FFQ_PICK_TASK) {
		/* held back: queued after all, its places made again */
		t->nr_inflight--;
		t->last_start = last;
		flags = ffq_queue_new(fd, tq, rq, flags);
		ffq_queued(fd, tq, rq, start, charge, flags, false);
		return NULL;
	}
	trace_flashfq_insert(rq, tq->pid, start, start + charge, fd->s.vtime,
			     false);
	slot = ffq_take_slot(fd, tq, rq, start, &now);
	ffq_sent(fd, tq, rq, slot, charge, flags, now, gap);
	return rq;
}

/*
 * @batch: the hardware queue of the requests handed out so far in this
 * dispatch batch (NULL: none, or any may follow); a request of another
 * ends the batch (elevator/iosched-batch.h).  *@held is set if queued
 * requests are held back (depth, throttle, blocking anticipation).
 */
static struct request *__ffq_dispatch_request(struct ffq_data *fd,
					      const struct blk_mq_hw_ctx *batch,
					      bool *held)
{
	struct request *rq;
	struct ffq_task *t;
	enum ffq_pick res;
	u64 throttle, gap;

	lockdep_assert_held(&fd->lock);

	rq = list_first_entry_or_null(&fd->bypass, struct request, queuelist);
	if (rq) {
		list_del_init(&rq->queuelist);
		fd->nr_bypass--;
		WRITE_ONCE(fd->queued, fd->queued - 1);
		this_cpu_inc(fd->stats->bypassed);
		return rq;
	}

	ffq_settle_deferred(fd, NULL);
	throttle = ffq_us(&fd->throttle_us);
	res = ffq_pick(&fd->s, ffq_cur_depth(fd), throttle,
		       ffq_pick_now(fd, throttle), &t, &gap);
	switch (res) {
	case FFQ_PICK_TASK: {
		struct ffq_tq *tq = container_of(t, struct ffq_tq, task);

		if (iosched_batch_ends(batch, list_first_entry(&tq->fifo,
							       struct request,
							       queuelist))) {
			this_cpu_inc(fd->stats->batch_ended);
			return NULL;
		}
		return ffq_dispatch_from(fd, tq, gap);
	}
	case FFQ_PICK_EMPTY:
		return NULL;
	case FFQ_PICK_FULL:
		this_cpu_inc(fd->stats->held_full);
		break;
	case FFQ_PICK_ANTIC: {
		struct ffq_hnode *b = ffq_heap_min(&fd->s.block);
		struct ffq_hnode *r = ffq_heap_min(&fd->s.ready);
		struct ffq_tq *tq = container_of(b, struct ffq_tq, task.block);

		this_cpu_inc(fd->stats->held_antic);
		ffq_arm_timer(fd);
		trace_flashfq_throttled(fd->q, tq->pid, true, r->key - b->key,
					throttle, fd->s.inflight, fd->queued);
		break;
	}
	case FFQ_PICK_THROTTLED: {
		struct ffq_hnode *r = ffq_heap_min(&fd->s.ready);
		struct ffq_tq *tq = container_of(r, struct ffq_tq, task.ready);

		this_cpu_inc(fd->stats->held_throttle);
		ffq_arm_timer(fd);
		trace_flashfq_throttled(fd->q, tq->pid, false, gap,
					throttle, fd->s.inflight, fd->queued);
		break;
	}
	}
	*held = true;
	return NULL;
}

/*
 * One dispatch batch, one hardware queue: elevator/iosched-batch.h.  A
 * hold is announced (ffq_hold()), and decided again if a completion,
 * notice or due deadline was posted meanwhile: that poster may not have
 * seen the announcement, and nothing else would re-run the queues.
 */
static struct request *ffq_dispatch_request(struct blk_mq_hw_ctx *hctx)
{
	struct ffq_data *fd = hctx->queue->elevator->elevator_data;
	const struct blk_mq_hw_ctx *batch;
	struct request *rq, *next;
	LIST_HEAD(free);
	bool held;

	spin_lock(&fd->lock);
	/* under the lock, which keeps the task on this CPU's record */
	batch = iosched_batch(fd->batch, hctx);
	/*
	 * What was posted, in posting order, after the completions posted
	 * before it was taken; one drain serves the inserts and the
	 * decision (what is posted between them counts as posted after).
	 */
	rq = iosched_inbox_take(&fd->inbox);
	ffq_drain(fd);
	if (rq && !rq->rq_next && !fd->queued) {
		/* one request and nothing queued: decided as it is taken */
		rq = ffq_dispatch_lone(fd, rq, batch, &free);
	} else {
		for (; rq; rq = next) {
			next = rq->rq_next;
			ffq_insert_request(fd, rq, false, &free);
		}
	}
	while (!rq) {
		held = false;
		rq = __ffq_dispatch_request(fd, batch, &held);
		if (!held || !ffq_hold(fd))
			break;
		ffq_drain(fd);
	}
	iosched_batch_note(fd->batch, hctx, rq);
	spin_unlock(&fd->lock);

	compat_free_requests(&free);
	return rq;
}

/*
 * True while requests are queued, also when they are held back.  False
 * ends the dispatch batch being built (elevator/iosched-batch.h).
 */
static bool ffq_has_work(struct blk_mq_hw_ctx *hctx)
{
	struct ffq_data *fd = hctx->queue->elevator->elevator_data;

	return iosched_batch_has_work(fd->batch, READ_ONCE(fd->queued) ||
				      !iosched_inbox_empty(&fd->inbox));
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
 * flashfq_complete, from finish_request: in flight is the count as of the
 * last section under fd->lock, this request included (its slot goes back
 * at the next).
 */
static noinline void ffq_trace_complete(struct ffq_data *fd,
					struct request *rq,
					struct ffq_slot *slot)
{
	trace_flashfq_complete(rq, slot->tq->pid, slot->start,
			       slot->done_ns - slot->dispatch_ns,
			       READ_ONCE(fd->s.inflight));
}

/*
 * blk-mq's completion callback, just before finish_request, with the time
 * it took for its statistics: kept in the request's slot as the time of an
 * anticipation its completion may start, which saves finish_request a
 * reading of the clock.  Lockless, like finish_request; 6.1 calls it for
 * unprepared requests too.
 */
static void ffq_completed_request(struct request *rq, u64 now)
{
	struct ffq_data *fd = rq->q->elevator->elevator_data;
	struct ffq_slot *slot;

	if (!compat_rq_elv_finish(rq))
		return;
	slot = ffq_slot_of(fd, ffq_rq_get(rq));
	if (slot)
		slot->done_ns = now;
}

/*
 * Called when a request the elevator prepared is freed or, for a flush
 * sequence's data part on 6.12, when that part completes; also for
 * requests that never passed through FlashFQ (not owned).  In any context,
 * hard interrupts included, and without fd->lock: an owned request's
 * completion is posted in its slot, with its time and its reference to the
 * task, for the next holder of fd->lock ("Deferred completions" above),
 * and the hardware queues re-run if dispatch held requests back.
 */
static void ffq_finish_request(struct request *rq)
{
	struct ffq_data *fd = rq->q->elevator->elevator_data;
	u64 word = ffq_rq_get(rq);
	unsigned int flags = ffq_rq_flags(word);
	struct ffq_tq *tq = ffq_rq_tq(rq);
	struct ffq_slot *slot;

	rq->elv.priv[0] = NULL;
	rq->elv.priv[1] = NULL;
	if (!tq)
		return;
	if (!(flags & FFQ_RQ_OWNED)) {
		ffq_tq_put(tq);
		return;
	}
	WARN_ONCE(flags & FFQ_RQ_QUEUED,
		  "flashfq: %s: request freed while queued\n",
		  ffq_disk_name(fd));
	slot = ffq_slot_of(fd, word);
	if (likely(slot)) {
		slot->sync = flags & FFQ_RQ_SYNC;
		/*
		 * Its time, for an anticipation and the learnt costs: blk-mq's,
		 * which may be a plug's, cached before the dispatch when the
		 * driver completed the request inline (a write its buffer
		 * took), or the dispatch's own when both came from the same
		 * plug (nothing learnt: ffq_learn_done()).
		 */
		if (slot->done_ns < slot->dispatch_ns || !slot->done_ns)
			slot->done_ns = ktime_get_ns();
		if (trace_flashfq_complete_enabled())
			ffq_trace_complete(fd, rq, slot);
		/* with the request's reference to the task */
		llist_add(&slot->rec.node, &fd->done);
	} else {
		atomic_inc(&tq->done_unslotted);
		ffq_post_notice(fd, tq);
		ffq_tq_put(tq);
	}
	ffq_kick_held(fd);
}

/*
 * Called by blk_mq_requeue_request() for a request the driver gave back,
 * in any context and without fd->lock.  A request the driver prepared
 * (RQF_DONTPREP, e.g. NVMe) goes from the requeue list straight to
 * hctx->dispatch and the driver, not through FlashFQ: it keeps its depth
 * slot until it finishes, or the device would hold it beside a request
 * dispatched into its slot.  Any other keeps its slot, marked
 * FFQ_RQ_REQUEUED, until it is inserted again (its tags with it), where
 * the slot goes back under fd->lock: nothing else here changes the
 * scheduler's state, so nothing is posted and no queue re-run (the
 * requeue work runs the queues after inserting).
 */
static void ffq_requeue_request(struct request *rq)
{
	struct ffq_data *fd = rq->q->elevator->elevator_data;
	u64 word = ffq_rq_get(rq);
	unsigned int flags = ffq_rq_flags(word);
	struct ffq_slot *slot;

	if (!(flags & FFQ_RQ_OWNED))
		return;
	slot = ffq_slot_of(fd, word);
	if (!slot)
		return;
	atomic_long_inc(&fd->requeued);
	slot->requeued = true;
	trace_flashfq_requeue(rq, slot->tq->pid, slot->start,
			      READ_ONCE(fd->s.inflight));
	if (!(rq->rq_flags & RQF_DONTPREP))
		ffq_rq_put(rq, ffq_rq_charge(word), ffq_rq_slot(word),
			   flags | FFQ_RQ_REQUEUED);
}

/*
 * Anticipation deadlines: the earliest one when a dispatch held requests
 * back (ffq_arm_timer()) is due.  In hard interrupt context, so it takes
 * no lock: it flags the deadline (FFQ_DUE) for the next holder of
 * fd->lock, which ends it by the clock (ffq_drain()), and re-runs the
 * hardware queues if dispatch still holds requests back, which makes that
 * holder a dispatch (which arms the timer again if it holds again).
 */
static enum hrtimer_restart ffq_timer_fn(struct hrtimer *timer)
{
	struct ffq_data *fd = container_of(timer, struct ffq_data, timer);

	set_bit(FFQ_DUE, &fd->flags);
	/* pairs with ffq_hold(): FFQ_DUE before the FFQ_HELD test */
	smp_mb__after_atomic();
	ffq_kick_held(fd);
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
		this_cpu_inc(fd->stats->merged);
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
	spin_lock(&fd->lock);
	ffq_drain(fd);
	fd->bio_tq = tq;
	ret = blk_mq_sched_try_merge(q, bio, nr_segs, &free);
	fd->bio_tq = NULL;
	spin_unlock(&fd->lock);

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
 * is going away: no request will come, so any anticipation ends.  Called
 * with the io_context's lock held (and maybe the queue lock), interrupts
 * off ("Locking" above), so it may neither wait for fd->lock nor run the
 * hardware queues: the exit is posted as the task's notice, applied by the
 * next holder of fd->lock (at the latest a dispatch the hrtimer's kick
 * starts when a blocking anticipation ends).  Requests still outstanding
 * and the notice keep the task (their references) until they are done
 * with it.
 */
static void ffq_exit_icq(struct io_cq *icq)
{
	struct ffq_data *fd = icq->q->elevator->elevator_data;
	struct ffq_icq *fi = container_of(icq, struct ffq_icq, icq);
	struct ffq_tq *tq = fi->tq;

	if (!tq)
		return;
	WRITE_ONCE(fi->tq, NULL);
	set_bit(FFQ_TQ_EXIT, &tq->notice);
	ffq_post_notice(fd, tq);
	/* the io_cq's reference */
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

	/* 34 KiB with the slots' own lines: vmalloc'ed if need be */
	fd = kvzalloc_node(sizeof(*fd), GFP_KERNEL, q->node);
	if (fd) {
		fd->batch = iosched_batch_alloc();
		fd->stats = alloc_percpu(struct ffq_stats);
	}
	if (!fd || !fd->batch || !fd->stats) {
		if (fd) {
			iosched_batch_free(fd->batch);
			free_percpu(fd->stats);
		}
		kvfree(fd);
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
	for (i = 0; i < FFQ_MAX_DEPTH; i++) {
		INIT_LIST_HEAD(&fd->slots[i].node);
		fd->slots[i].rec.kind = FFQ_REC_DONE;
	}
	bitmap_fill(fd->free, FFQ_MAX_DEPTH);
	init_llist_head(&fd->done);
	atomic_long_set(&fd->requeued, 0);
	compat_hrtimer_setup(&fd->timer, ffq_timer_fn, CLOCK_MONOTONIC,
			     HRTIMER_MODE_ABS);

	fd->depth = FFQ_DEFAULT_DEPTH;
	fd->throttle_us = FFQ_DEFAULT_THROTTLE_US;
	fd->antic_us = FFQ_DEFAULT_ANTIC_US;
	fd->antic_block_us = FFQ_DEFAULT_ANTIC_BLOCK_US;
	fd->cost = ffq_default_costs;

	eq->elevator_data = fd;
	blk_queue_flag_set(QUEUE_FLAG_SQ_SCHED, q);
	q->elevator = eq;
	return 0;
}

/*
 * The queue is frozen and every io_cq exited (ioc_clear_queue() runs
 * first): once what was posted is applied (which frees every task),
 * nothing may be queued, in flight or anticipated.  The timer is cancelled
 * after that, which may arm it.
 */
static void ffq_exit_sched(struct elevator_queue *e)
{
	struct ffq_data *fd = e->elevator_data;

	spin_lock(&fd->lock);
	ffq_drain(fd);
	spin_unlock(&fd->lock);
	hrtimer_cancel(&fd->timer);
	WARN_ONCE(fd->queued || fd->s.inflight || !list_empty(&fd->active) ||
		  fd->s.deferred || !llist_empty(&fd->done) ||
		  !iosched_inbox_empty(&fd->inbox),
		  "flashfq: %s: %u queued, %u in flight, tasks active at exit\n",
		  ffq_disk_name(fd), fd->queued, fd->s.inflight);
	iosched_batch_free(fd->batch);
	free_percpu(fd->stats);
	kvfree(fd);
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
#undef FFQ_STORE_UINT

/*
 * A cost point shows the cost in force (cost_source says where it comes
 * from); a store sets it (calibrated: charged as written), 0 gives it back
 * to learning.  Under fd->lock, which orders it with the learning.
 */
static ssize_t ffq_cost_store(struct ffq_data *fd, unsigned int pt,
			      const char *page, size_t count)
{
	unsigned int val;

	if (iosched_parse_uint(page, count, 0, FFQ_MAX_COST_NS, &val))
		return -EINVAL;
	spin_lock(&fd->lock);
	*ffq_point(&fd->cost_set, pt) = val;
	ffq_update_costs(fd, ffq_point_write(pt));
	spin_unlock(&fd->lock);
	return count;
}

#define FFQ_STORE_COST(name, pt)					\
static ssize_t ffq_##name##_store(struct elevator_queue *e,		\
				  const char *page, size_t count)	\
{									\
	return ffq_cost_store(e->elevator_data, (pt), page, count);	\
}

FFQ_SHOW_UINT(cost_read_4k_ns, fd->cost.read_4k);
FFQ_STORE_COST(cost_read_4k_ns, FFQ_PT_READ_4K);
FFQ_SHOW_UINT(cost_read_128k_ns, fd->cost.read_128k);
FFQ_STORE_COST(cost_read_128k_ns, FFQ_PT_READ_128K);
FFQ_SHOW_UINT(cost_write_4k_ns, fd->cost.write_4k);
FFQ_STORE_COST(cost_write_4k_ns, FFQ_PT_WRITE_4K);
FFQ_SHOW_UINT(cost_write_128k_ns, fd->cost.write_128k);
FFQ_STORE_COST(cost_write_128k_ns, FFQ_PT_WRITE_128K);
#undef FFQ_SHOW_UINT
#undef FFQ_STORE_COST

static const char *const ffq_src_names[] = {
	[FFQ_SRC_DEFAULT] = "default",
	[FFQ_SRC_SCALED] = "scaled",
	[FFQ_SRC_LEARNT] = "learnt",
	[FFQ_SRC_SET] = "set",
};

/* cost_source: each point's source, in the cost_* files' order. */
static ssize_t ffq_cost_source_show(struct elevator_queue *e, char *page)
{
	struct ffq_data *fd = e->elevator_data;
	u8 src[FFQ_NR_POINTS];

	spin_lock(&fd->lock);
	memcpy(src, fd->cost_src, sizeof(src));
	spin_unlock(&fd->lock);
	return sysfs_emit(page, "%s %s %s %s\n", ffq_src_names[src[0]],
			  ffq_src_names[src[1]], ffq_src_names[src[2]],
			  ffq_src_names[src[3]]);
}

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
	__ATTR(cost_source, 0444, ffq_cost_source_show, NULL),
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

	spin_lock(&fd->lock);
	ffq_drain(fd);
	ffq_settle_deferred(fd, NULL);
	list_for_each_entry(tq, &fd->active, active_node)
		ffq_dbg_task(m, tq);
	spin_unlock(&fd->lock);
	return 0;
}

static int ffq_dbg_vtime_show(void *data, struct seq_file *m)
{
	struct request_queue *q = data;
	struct ffq_data *fd = q->elevator->elevator_data;
	u64 v;

	spin_lock(&fd->lock);
	ffq_drain(fd);
	ffq_settle_deferred(fd, NULL);
	v = fd->s.vtime;
	spin_unlock(&fd->lock);
	seq_printf(m, "%llu\n", v);
	return 0;
}

/*
 * costs: a line per cost point: the cost in force and its source, the
 * value set in sysfs (0: none), and what is learnt (floor; for a write
 * point the drain, by Little's law over the writes that waited, and the
 * number of their groups in its means, up to 2^FFQ_LEARN_EWMA_SHIFT;
 * samples), ns.
 */
static int ffq_dbg_costs_show(void *data, struct seq_file *m)
{
	static const char *const names[FFQ_NR_POINTS] = {
		"read_4k", "read_128k", "write_4k", "write_128k"
	};
	struct request_queue *q = data;
	struct ffq_data *fd = q->elevator->elevator_data;
	struct ffq_learnt l[FFQ_NR_POINTS];
	struct ffq_cost_model cost, set;
	u8 src[FFQ_NR_POINTS];
	unsigned int pt;

	spin_lock(&fd->lock);
	ffq_drain(fd);
	memcpy(l, fd->learn.pt, sizeof(l));
	cost = fd->cost;
	set = fd->cost_set;
	memcpy(src, fd->cost_src, sizeof(src));
	spin_unlock(&fd->lock);
	for (pt = 0; pt < FFQ_NR_POINTS; pt++)
		seq_printf(m, "%s cost %u source %s set %u floor %llu avg %llu waited %u samples %u\n",
			   names[pt], ffq_point_val(&cost, pt),
			   ffq_src_names[src[pt]], ffq_point_val(&set, pt),
			   l[pt].floor, ffq_learnt_avg(&l[pt]), l[pt].waited,
			   l[pt].samples);
	return 0;
}

static int ffq_dbg_inflight_show(void *data, struct seq_file *m)
{
	struct request_queue *q = data;
	struct ffq_data *fd = q->elevator->elevator_data;
	u32 n;

	spin_lock(&fd->lock);
	ffq_drain(fd);
	ffq_settle_deferred(fd, NULL);
	n = fd->s.inflight;
	spin_unlock(&fd->lock);
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
	struct ffq_stats st = { 0 };
	long requeued;
	int cpu;

	spin_lock(&fd->lock);
	ffq_drain(fd);
	ffq_settle_deferred(fd, NULL);
	for_each_possible_cpu(cpu) {
		const struct ffq_stats *c = per_cpu_ptr(fd->stats, cpu);

		st.dispatched += c->dispatched;
		st.completed += c->completed;
		st.merged += c->merged;
		st.bypassed += c->bypassed;
		st.reinsert += c->reinsert;
		st.held_full += c->held_full;
		st.held_throttle += c->held_throttle;
		st.held_antic += c->held_antic;
		st.batch_ended += c->batch_ended;
		st.antic_started += c->antic_started;
		st.antic_expired += c->antic_expired;
		st.antic_cancelled += c->antic_cancelled;
		st.antic_unblocked += c->antic_unblocked;
	}
	spin_unlock(&fd->lock);
	requeued = atomic_long_read(&fd->requeued);
	seq_printf(m, "dispatched %llu\ncompleted %llu\nrequeued %ld\nmerged %llu\nbypassed %llu\nreinsert %llu\n",
		   st.dispatched, st.completed, requeued, st.merged,
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

	spin_lock(&fd->lock);
	ffq_drain(fd);
	ffq_settle_deferred(fd, NULL);
	list_for_each_entry(tq, &fd->active, active_node) {
		list_for_each_entry(rq, &tq->fifo, queuelist) {
			seq_printf(m, "task %d start %llu ", tq->pid,
				   ffq_rq_start(rq));
			__blk_mq_debugfs_rq_show(m, rq);
			seq_putc(m, '\n');
		}
	}
	spin_unlock(&fd->lock);
	return 0;
}

static int ffq_dbg_bypass_list_show(void *data, struct seq_file *m)
{
	struct request_queue *q = data;
	struct ffq_data *fd = q->elevator->elevator_data;
	struct request *rq;

	spin_lock(&fd->lock);
	ffq_drain(fd);
	ffq_settle_deferred(fd, NULL);
	list_for_each_entry(rq, &fd->bypass, queuelist) {
		__blk_mq_debugfs_rq_show(m, rq);
		seq_putc(m, '\n');
	}
	spin_unlock(&fd->lock);
	return 0;
}

static const struct blk_mq_debugfs_attr ffq_queue_debugfs_attrs[] = {
	{"tasks", 0400, ffq_dbg_tasks_show},
	{"vtime", 0400, ffq_dbg_vtime_show},
	{"inflight", 0400, ffq_dbg_inflight_show},
	{"queued", 0400, ffq_dbg_queued_show},
	{"counters", 0400, ffq_dbg_counters_show},
	{"costs", 0400, ffq_dbg_costs_show},
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
		.completed_request	= ffq_completed_request,
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
