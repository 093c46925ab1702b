/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Kernel API differences for the project's out-of-tree blk-mq elevators.
 *
 * This is the only file with LINUX_VERSION_CODE checks.  A scheduler is
 * written once against the helpers below.
 *
 * Tested: Debian 6.1 and 6.12.  The later changes listed in DESIGN.md
 * (6.16.4: core-allocated elevator_queue, 6.17.3: depth_updated(q),
 * 6.18.3: alloc/free_sched_data) are refused at compile time until they
 * can be built and tested.
 */
#ifndef _IOSCHED_COMPAT_H
#define _IOSCHED_COMPAT_H

#include <linux/version.h>
#include <linux/blk-mq.h>
#include "elevator.h"

#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 1, 0)
#error "kernels older than 6.1 are not supported"
#endif
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 16, 4)
#error "kernels from 6.16.4 on change init_sched/depth_updated: not supported yet"
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

/* The request's position: blk_rq_pos() on every supported kernel. */

#endif /* _IOSCHED_COMPAT_H */
