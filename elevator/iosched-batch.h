/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Dispatch batches of one hardware queue, for the elevators whose order of
 * dispatch should be the device's order of arrival (FlashFQ's start tags,
 * CARS's die predictions, K2's real-time first).
 *
 * blk-mq gathers what one call of __blk_mq_do_dispatch_sched() hands out
 * into a list (a batch) and, when the list holds requests of several
 * hardware queues (a request belongs to the queue of the CPU that
 * allocated it), sorts it by queue before issuing it (6.1 to 7.3 alike): a
 * request can reach the driver ahead of one handed out before it.  On a
 * device whose flash dies serve their operations in arrival order that
 * matters: under FlashFQ the write its throttle released as a lagging
 * reader's next read went out reached the die first, and one read in
 * eight waited out a whole program; under CARS a write landed on another
 * die than predicted.  So a batch takes requests of one queue only: the
 * elevator's dispatch_request, about to hand out a request of another
 * queue than the batch's (iosched_batch_ends()), returns NULL instead;
 * blk-mq issues the batch and, having dispatched, asks again at once for
 * a new one, which may start with any queue.
 *
 * The batch being built is remembered per CPU (a struct iosched_batch in
 * the elevator's per-CPU area): its queue and the task building it.  A
 * batch is built by one task, one dispatch_request after another, each
 * after has_work() said requests are queued; so a call by another task
 * than the one recorded starts a new batch, and the batch ends when
 * dispatch_request returns NULL (iosched_batch_note()) or when has_work(),
 * called by the task building it, finds nothing queued
 * (iosched_batch_has_work()).  The end cannot be taken from the queue
 * running empty at a dispatch: another CPU may queue a request before the
 * building task's next has_work(), which then continues the same batch
 * (a batch that mixed queues so was seen on the debug kernel).  Ignored
 * while blk-mq takes one request a batch (hctx->dispatch_busy).
 *
 * A batch that blk-mq ends otherwise (no driver tag or budget, requests on
 * the hardware queue's own dispatch list) is still recorded: if the same
 * task's next batch on this CPU would start with a request of another
 * queue, that request is refused once (blk-mq then runs the queues again
 * after a few milliseconds, or sooner on the next completion or
 * submission).  A task preempted or moved to another CPU while building a
 * batch, or two runs of the queues at once, can still send requests to
 * the driver in either order.
 *
 * Locking: a CPU's record is written by dispatch_request under the
 * elevator's dispatch lock, which keeps the task on its CPU, and by
 * has_work() in task context with one this-CPU operation; interrupts
 * never touch it.  The task pointer is an identity only, never
 * dereferenced.
 */
#ifndef _IOSCHED_BATCH_H
#define _IOSCHED_BATCH_H

#include <linux/blk-mq.h>
#include <linux/percpu.h>
#include <linux/preempt.h>
#include <linux/sched.h>

struct iosched_batch {
	const struct blk_mq_hw_ctx *queue;	/* the batch's, if @task */
	const struct task_struct *task;		/* building it; NULL: none */
};

static inline struct iosched_batch __percpu *iosched_batch_alloc(void)
{
	return alloc_percpu(struct iosched_batch);
}

static inline void iosched_batch_free(struct iosched_batch __percpu *pb)
{
	free_percpu(pb);
}

/*
 * In dispatch_request on @hctx, under the elevator's dispatch lock: the
 * queue of the batch the current task is building, or NULL (any).
 */
static inline const struct blk_mq_hw_ctx *
iosched_batch(struct iosched_batch __percpu *pb, struct blk_mq_hw_ctx *hctx)
{
	if (hctx->dispatch_busy || this_cpu_read(pb->task) != current)
		return NULL;
	return this_cpu_read(pb->queue);
}

/* Would handing out @next end the batch of queue @batch? */
static inline bool iosched_batch_ends(const struct blk_mq_hw_ctx *batch,
				      const struct request *next)
{
	return batch && next->mq_hctx != batch;
}

/*
 * After dispatch_request on @hctx handed out @rq (NULL: none, and the
 * batch ends), under the elevator's dispatch lock.
 */
static inline void iosched_batch_note(struct iosched_batch __percpu *pb,
				      struct blk_mq_hw_ctx *hctx,
				      const struct request *rq)
{
	if (rq && !hctx->dispatch_busy) {
		this_cpu_write(pb->queue, rq->mq_hctx);
		this_cpu_write(pb->task, current);
	} else {
		this_cpu_write(pb->task, NULL);
	}
}

/*
 * has_work() found nothing queued: a batch the current task is building on
 * this CPU has ended (blk-mq stops asking).  Lockless: one this-CPU
 * compare-and-exchange, which preemption cannot split.
 */
static inline void iosched_batch_idle(struct iosched_batch __percpu *pb)
{
	if (in_task())
		this_cpu_cmpxchg(pb->task, current, NULL);
}

/*
 * The whole of has_work() for an elevator that uses batches: @queued (its
 * own lockless "requests are queued"), ending the batch when false, so
 * that an elevator cannot answer has_work() without it.
 */
static inline bool iosched_batch_has_work(struct iosched_batch __percpu *pb,
					  bool queued)
{
	if (queued)
		return true;
	iosched_batch_idle(pb);
	return false;
}

#endif /* _IOSCHED_BATCH_H */
