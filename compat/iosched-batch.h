/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Dispatch batches of one hardware queue, for the elevators whose order of
 * dispatch should be the device's order of arrival (FlashFQ's start tags,
 * CARS's die predictions, K2's real-time first).
 *
 * blk-mq gathers what one run of a hardware queue hands out into a list
 * and, when the list holds requests of several hardware queues (a request
 * belongs to the queue of the CPU that allocated it), sorts it by queue
 * before issuing it (__blk_mq_do_dispatch_sched(), 6.1 to 7.3 alike): a
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
 * hctx->sched_data holds the queue of the batch a run of @hctx is building,
 * under the elevator's dispatch lock (set by iosched_batch_note() after
 * each dispatch_request): NULL when a batch ended here (NULL returned),
 * when nothing is left queued (has_work() ends the batch), and ignored
 * while blk-mq takes one request a batch (hctx->dispatch_busy).  A batch
 * that blk-mq ends otherwise (no driver tag) leaves it set: the next run's
 * first request, if of another queue, is refused once, and blk-mq runs
 * the queues again.  Requests dispatched by runs of two queues at once
 * can still reach the driver in either order.  The elevator sets
 * .init_hctx to iosched_batch_init_hctx() and keeps no other sched_data.
 */
#ifndef _IOSCHED_BATCH_H
#define _IOSCHED_BATCH_H

#include <linux/blk-mq.h>

/* The queue of the batch a run of @hctx is building, or NULL: any. */
static inline struct blk_mq_hw_ctx *iosched_batch(struct blk_mq_hw_ctx *hctx)
{
	return hctx->dispatch_busy ? NULL : hctx->sched_data;
}

/* Would handing out @next end the batch of queue @batch? */
static inline bool iosched_batch_ends(const struct blk_mq_hw_ctx *batch,
				      const struct request *next)
{
	return batch && next->mq_hctx != batch;
}

/*
 * After dispatch_request on @hctx handed out @rq (NULL: none), @more:
 * whether requests are still queued.
 */
static inline void iosched_batch_note(struct blk_mq_hw_ctx *hctx,
				      struct request *rq, bool more)
{
	hctx->sched_data = rq && more ? rq->mq_hctx : NULL;
}

static inline int iosched_batch_init_hctx(struct blk_mq_hw_ctx *hctx,
					  unsigned int hctx_idx)
{
	hctx->sched_data = NULL;
	return 0;
}

#endif /* _IOSCHED_BATCH_H */
