// SPDX-License-Identifier: GPL-2.0
/*
 * fifo-ref: the do-nothing reference elevator.
 *
 * One FIFO for the whole queue, no merging beyond what the block layer does
 * without an elevator's help, no bound.  It exists to measure what every
 * blk-mq elevator pays just for being one (the overhead benchmark compares
 * every scheduler with it) and to exercise the generic scheduler tests.  It
 * is built with the project's modules but never installed.
 */
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/list.h>
#include <linux/blkdev.h>
#include <linux/blk-mq.h>

#include "elevator.h"
#include "blk-mq-sched.h"
#include "iosched-compat.h"

struct fifo_data {
	spinlock_t lock;		/* protects @fifo */
	struct list_head fifo;		/* protected by @lock */
};

static int fifo_init_sched(struct request_queue *q, compat_init_sched_arg arg)
{
	struct elevator_queue *eq;
	struct fifo_data *fd;

	eq = compat_elevator_alloc(q, arg);
	if (!eq)
		return -ENOMEM;

	fd = kzalloc_node(sizeof(*fd), GFP_KERNEL, q->node);
	if (!fd) {
		compat_elevator_put(eq);
		return -ENOMEM;
	}
	spin_lock_init(&fd->lock);
	INIT_LIST_HEAD(&fd->fifo);
	eq->elevator_data = fd;
	q->elevator = eq;
	return 0;
}

static void fifo_exit_sched(struct elevator_queue *e)
{
	struct fifo_data *fd = e->elevator_data;

	WARN_ON_ONCE(!list_empty(&fd->fifo));
	kfree(fd);
}

static void fifo_insert_requests(struct blk_mq_hw_ctx *hctx,
				 struct list_head *list,
				 compat_insert_t flags)
{
	struct fifo_data *fd = hctx->queue->elevator->elevator_data;

	spin_lock(&fd->lock);
	if (compat_insert_at_head(flags))
		list_splice_init(list, &fd->fifo);
	else
		list_splice_tail_init(list, &fd->fifo);
	spin_unlock(&fd->lock);
}

static struct request *fifo_dispatch_request(struct blk_mq_hw_ctx *hctx)
{
	struct fifo_data *fd = hctx->queue->elevator->elevator_data;
	struct request *rq;

	spin_lock(&fd->lock);
	rq = list_first_entry_or_null(&fd->fifo, struct request, queuelist);
	if (rq)
		list_del_init(&rq->queuelist);
	spin_unlock(&fd->lock);
	return rq;
}

static bool fifo_has_work(struct blk_mq_hw_ctx *hctx)
{
	struct fifo_data *fd = hctx->queue->elevator->elevator_data;

	return !list_empty_careful(&fd->fifo);
}

/* Nothing to account; 6.12 refuses an elevator without this hook. */
static void fifo_finish_request(struct request *rq)
{
}

static struct elevator_type fifo_ref = {
	.ops = {
		.init_sched		= fifo_init_sched,
		.exit_sched		= fifo_exit_sched,
		.insert_requests	= fifo_insert_requests,
		.dispatch_request	= fifo_dispatch_request,
		.has_work		= fifo_has_work,
		.finish_request		= fifo_finish_request,
	},
	.elevator_name = "fifo-ref",
	.elevator_owner = THIS_MODULE,
};

static int __init fifo_init(void)
{
	return elv_register(&fifo_ref);
}

static void __exit fifo_exit(void)
{
	elv_unregister(&fifo_ref);
}

module_init(fifo_init);
module_exit(fifo_exit);

MODULE_AUTHOR("ssd-iosched project");
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Do-nothing reference FIFO I/O scheduler (tests and benchmarks only)");
MODULE_VERSION(IOSCHED_VERSION);
MODULE_INFO(elevator, "fifo-ref");
