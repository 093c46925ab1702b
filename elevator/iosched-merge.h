/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What every elevator of the project does to a request that leaves its
 * queue (dispatched, or merged into another): take it out of the block
 * layer's merge candidates, as elv_rqhash_del() and the core's own
 * elevators do.  Include after "elevator.h".
 */
#ifndef _IOSCHED_MERGE_H
#define _IOSCHED_MERGE_H

#include <linux/blkdev.h>

/*
 * iosched_forget_merge() - @rq is no merge candidate of @q any more: off
 * the back-merge hash and no longer q->last_merge.
 *
 * Called with the elevator's own lock held, from its dispatch path (where
 * it is inline: most dispatched requests are on no hash, and this tests
 * that before the call elv_rqhash_del() would make) and from its merge
 * path.  @q's elevator lock serialises it with the merge lookups that read
 * the hash and last_merge.
 */
static __always_inline void iosched_forget_merge(struct request_queue *q,
						 struct request *rq)
{
	if (ELV_ON_HASH(rq))
		elv_rqhash_del(q, rq);
	if (q->last_merge == rq)
		q->last_merge = NULL;
}

#endif /* _IOSCHED_MERGE_H */
