/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Kernel API differences for the project's out-of-tree blk-mq elevators.
 *
 * This is the only file with LINUX_VERSION_CODE checks.  A scheduler is
 * written once against the helpers below.
 *
 * Tested: Debian 6.1, 6.12 and 7.3.  Kernels after 7.3 are refused at
 * compile time until they are built and tested: the block layer's private
 * API changes without notice.  Of the elevator API changes up to 7.3, the
 * ones the project's modules meet are below; the others do not touch
 * them: the optional alloc_sched_data() and
 * free_sched_data() (6.18.3/6.19; init_sched() still may allocate, the
 * queue frozen with I/O-free allocation, as mq-deadline does), and a
 * const elevator_attrs (a plain array still converts).
 */
#ifndef _IOSCHED_COMPAT_H
#define _IOSCHED_COMPAT_H

#include <linux/version.h>
#include <linux/blk-mq.h>
#include <linux/hrtimer.h>
#include "elevator.h"

/*
 * The project's version (modinfo's "version"): dkms.conf's PACKAGE_VERSION,
 * the one place it is written, passed down by the Makefile.
 */
#ifndef IOSCHED_VERSION
#error "IOSCHED_VERSION is not set: build with the project's Makefile (make modules)"
#endif

#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 1, 0)
#error "kernels older than 6.1 are not supported"
#endif
#if LINUX_VERSION_CODE >= KERNEL_VERSION(7, 4, 0)
/* each new kernel's elevator API must be checked and tested first */
#error "kernels after 7.3.x are not supported yet"
#endif

/*
 * init_sched(): up to 6.16.3 the elevator allocates its elevator_queue
 * (elevator_alloc(q, type), no longer exported from 6.16.4/6.17 on) and
 * puts it again if it fails; from then on the core allocates it, passes it
 * in, and puts it itself on failure.  Declare the callback as
 *	static int x_init_sched(struct request_queue *q,
 *				compat_init_sched_arg arg)
 * get the queue with eq = compat_elevator_alloc(q, arg) (NULL: -ENOMEM)
 * and give it back with compat_elevator_put(eq) on a later failure.
 */
#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 16, 4)
#define compat_init_sched_arg	struct elevator_type *
static inline struct elevator_queue *
compat_elevator_alloc(struct request_queue *q, struct elevator_type *e)
{
	return elevator_alloc(q, e);
}

static inline void compat_elevator_put(struct elevator_queue *eq)
{
	kobject_put(&eq->kobj);
}
#else
#define compat_init_sched_arg	struct elevator_queue *
static inline struct elevator_queue *
compat_elevator_alloc(struct request_queue *q, struct elevator_queue *eq)
{
	return eq;
}

static inline void compat_elevator_put(struct elevator_queue *eq)
{
}
#endif

/*
 * insert_requests(): 6.1 passes "bool at_head", 6.4 and later pass
 * blk_insert_t flags.  Declare the callback as
 *	static void x_insert_requests(struct blk_mq_hw_ctx *hctx,
 *				      struct list_head *list,
 *				      compat_insert_t flags)
 * and test compat_insert_at_head(flags).
 */
#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 4, 0)
#define compat_insert_t		bool
#define compat_insert_at_head(flags)	(flags)
#else
#define compat_insert_t		blk_insert_t
#define compat_insert_at_head(flags)	((flags) & BLK_MQ_INSERT_AT_HEAD)
#endif

/*
 * elevator_features (removed in 6.10) is left unset: none of the project's
 * schedulers needs zoned-write or MQ-aware features.
 */

/*
 * limit_depth() shallow depth: on 6.1 sbitmap_queue_min_shallow_depth() and
 * data->shallow_depth count per sbitmap word (1 << sb.shift bits); from 6.12
 * on (commit "lib/sbitmap: ... shallow_depth" series) they count over the
 * whole bitmap.  Convert a whole-queue depth into the unit this kernel uses.
 */
#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 12, 0)
static inline unsigned int compat_shallow_depth(struct blk_mq_hw_ctx *hctx,
						unsigned int depth)
{
	struct sbitmap_queue *bt = &hctx->sched_tags->bitmap_tags;
	unsigned int word = 1U << bt->sb.shift;
	unsigned int qd = hctx->queue->nr_requests;

	return max(1U, DIV_ROUND_UP(depth * word, max(qd, 1U)));
}
#else
static inline unsigned int compat_shallow_depth(struct blk_mq_hw_ctx *hctx,
						unsigned int depth)
{
	return max(1U, depth);
}
#endif

/*
 * The block layer's clock for a scheduler's own time stamps: from 6.9 on,
 * blk_time_get_ns() (block/blk.h), which in a task holding a plug reads
 * the clock once per plug and returns that reading until the task
 * schedules or the plug ends, as blk-mq's own stamps of a request do
 * (rq->start_time_ns, io_start_time_ns, the time a completion is passed);
 * before 6.9, and outside a plug, ktime_get_ns().  A macro: the caller
 * includes blk.h, which a driver (ssdsim) does not.  A stamp so taken may
 * lag the clock by the plug's life, microseconds; use it where that is
 * below what the stamp measures.
 */
#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 9, 0)
#define compat_blk_time_ns()	ktime_get_ns()
#else
#define compat_blk_time_ns()	blk_time_get_ns()
#endif

/*
 * depth_updated(), called when nr_requests changes (the scheduler tags are
 * then reallocated): for each hardware queue until 6.17.3/6.18, for the
 * request queue since.  An elevator writes it once against
 * compat_depth_arg and calls compat_depth_hctxs(arg, fn), which calls @fn
 * for each hardware queue @arg stands for.
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 17, 3)
#define compat_depth_arg	struct request_queue *
static inline void compat_depth_hctxs(struct request_queue *q,
				      void (*fn)(struct blk_mq_hw_ctx *))
{
	struct blk_mq_hw_ctx *hctx;
	unsigned long i;

	queue_for_each_hw_ctx(q, hctx, i)
		fn(hctx);
}
#else
#define compat_depth_arg	struct blk_mq_hw_ctx *
static inline void compat_depth_hctxs(struct blk_mq_hw_ctx *hctx,
				      void (*fn)(struct blk_mq_hw_ctx *))
{
	fn(hctx);
}
#endif

/*
 * compat_rq_elv_finish(rq): will the core call the elevator's
 * finish_request (and requeue_request) for @rq?  Exactly when it called
 * prepare_request, so rq->elv.priv holds what the elevator put there.
 * 6.1 marks those requests RQF_ELVPRIV: every request allocated while an
 * elevator is set except REQ_PREFLUSH/REQ_FUA ones (op_is_flush());
 * passthrough requests are included (6.1 normally inserts them into
 * hctx->dispatch, but one submitted under a plug reaches insert_requests).
 * Later kernels (6.12 tested) mark them RQF_USE_SCHED, which also decides
 * insertion: flush and passthrough requests never reach the elevator.
 * Tested on the flag, not the version, since the flag is what
 * blk_mq_finish_request() tests.
 */
#ifdef RQF_USE_SCHED
static inline bool compat_rq_elv_finish(struct request *rq)
{
	return rq->rq_flags & RQF_USE_SCHED;
}
#else
static inline bool compat_rq_elv_finish(struct request *rq)
{
	return rq->rq_flags & RQF_ELVPRIV;
}
#endif

/*
 * hrtimer_setup(timer, function, clock, mode) (6.13) replaces hrtimer_init()
 * and the separate assignment of the callback; hrtimer_init() is gone by 7.3.
 */
#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 13, 0)
static inline void
compat_hrtimer_setup(struct hrtimer *timer,
		     enum hrtimer_restart (*function)(struct hrtimer *),
		     clockid_t clock_id, enum hrtimer_mode mode)
{
	hrtimer_init(timer, clock_id, mode);
	timer->function = function;
}
#else
#define compat_hrtimer_setup	hrtimer_setup
#endif

/*
 * Block drivers (ssdsim): BLK_MQ_F_SHOULD_MERGE is gone in 6.14, where
 * merging became the default for every blk-mq queue; COMPAT_BLK_MQ_F_MERGE
 * is the flag to set for it on each kernel.  The numa_node argument of
 * blk_mq_ops.init_request() is an int on 7.3 and an unsigned int on 6.12
 * (changed in between; the exact release is not verified here, and only
 * the tested kernels are claimed).
 */
#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 14, 0)
#define COMPAT_BLK_MQ_F_MERGE	BLK_MQ_F_SHOULD_MERGE
#define compat_numa_node_t	unsigned int
#else
#define COMPAT_BLK_MQ_F_MERGE	0
#define compat_numa_node_t	int
#endif

/*
 * Free the requests an insert merged into others (the @free list of
 * blk_mq_sched_try_insert_merge()), outside the scheduler's lock:
 * blk_mq_free_requests() is not exported on any supported kernel.
 */
static inline void compat_free_requests(struct list_head *list)
{
	struct request *rq;

	while (!list_empty(list)) {
		rq = list_first_entry(list, struct request, queuelist);
		list_del_init(&rq->queuelist);
		blk_mq_free_request(rq);
	}
}

/*
 * Block drivers (ssdsim): allocate a blk-mq disk with these limits.  6.1
 * sets them on the queue after blk_mq_alloc_disk(set, queuedata); 6.9
 * passes struct queue_limits to blk_mq_alloc_disk(set, &lim, queuedata);
 * 6.11 moved the write cache, FUA and rotational settings into
 * lim.features (non-rotational unless BLK_FEAT_ROTATIONAL is set).  The
 * disk is non-rotational and adds no entropy; discard and write-zeroes
 * share one limit.
 */
struct compat_disk_limits {
	unsigned int logical_block_size;
	unsigned int physical_block_size;
	unsigned int io_min;
	unsigned int max_hw_sectors;
	unsigned int max_discard_sectors;	/* and write zeroes */
	unsigned int discard_granularity;	/* bytes */
	bool write_cache;			/* volatile cache: flushes */
	bool fua;
};

#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 9, 0)
static inline struct gendisk *
compat_blk_mq_alloc_disk(struct blk_mq_tag_set *set,
			 const struct compat_disk_limits *cl, void *queuedata)
{
	struct gendisk *disk = blk_mq_alloc_disk(set, queuedata);
	struct request_queue *q;

	if (IS_ERR(disk))
		return disk;
	q = disk->queue;
	blk_queue_logical_block_size(q, cl->logical_block_size);
	blk_queue_physical_block_size(q, cl->physical_block_size);
	blk_queue_io_min(q, cl->io_min);
	blk_queue_max_hw_sectors(q, cl->max_hw_sectors);
	blk_queue_max_discard_sectors(q, cl->max_discard_sectors);
	blk_queue_max_write_zeroes_sectors(q, cl->max_discard_sectors);
	q->limits.discard_granularity = cl->discard_granularity;
	blk_queue_write_cache(q, cl->write_cache, cl->fua);
	blk_queue_flag_set(QUEUE_FLAG_NONROT, q);
	blk_queue_flag_clear(QUEUE_FLAG_ADD_RANDOM, q);
	return disk;
}
#else
static inline struct gendisk *
compat_blk_mq_alloc_disk(struct blk_mq_tag_set *set,
			 const struct compat_disk_limits *cl, void *queuedata)
{
	struct queue_limits lim = {
		.logical_block_size	= cl->logical_block_size,
		.physical_block_size	= cl->physical_block_size,
		.io_min			= cl->io_min,
		.max_hw_sectors		= cl->max_hw_sectors,
		.max_hw_discard_sectors	= cl->max_discard_sectors,
		.max_write_zeroes_sectors = cl->max_discard_sectors,
		.discard_granularity	= cl->discard_granularity,
	};
#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 11, 0)
	struct gendisk *disk = blk_mq_alloc_disk(set, &lim, queuedata);

	if (IS_ERR(disk))
		return disk;
	blk_queue_write_cache(disk->queue, cl->write_cache, cl->fua);
	blk_queue_flag_set(QUEUE_FLAG_NONROT, disk->queue);
	blk_queue_flag_clear(QUEUE_FLAG_ADD_RANDOM, disk->queue);
	return disk;
#else
	if (cl->write_cache)
		lim.features |= BLK_FEAT_WRITE_CACHE;
	if (cl->fua)
		lim.features |= BLK_FEAT_FUA;
	return blk_mq_alloc_disk(set, &lim, queuedata);
#endif
}
#endif

#endif /* _IOSCHED_COMPAT_H */
