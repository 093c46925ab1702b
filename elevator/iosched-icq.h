/* SPDX-License-Identifier: GPL-2.0 */
/*
 * io_cq lookups for the elevators that keep their state per I/O context
 * (FlashFQ's tasks, CARS's flows), after blk-ioc.c's.  Include after the
 * block layer's private "blk.h" (ioc_find_get_icq()).
 */
#ifndef _IOSCHED_ICQ_H
#define _IOSCHED_ICQ_H

#include <asm/barrier.h>
#include <linux/iocontext.h>
#include <linux/rcupdate.h>
#include <linux/radix-tree.h>

/*
 * The io_cq of the current task's io_context on @q, or NULL: what
 * ioc_lookup_icq() finds, without the queue lock.  Up to 6.12 (at least)
 * ioc_lookup_icq() must be called with q->queue_lock held, which
 * ioc_find_get_icq() takes (spin_lock_irq) for every request of an
 * elevator with io_cqs; 7.3's needs no lock, by this argument, which
 * holds on the older kernels as well: the icq radix tree and the hint are
 * RCU-protected (icqs are freed through call_rcu/kfree_rcu), and an icq is
 * only destroyed when its io_context's last reference goes (the current
 * task holds one) or when the elevator is torn down (ioc_clear_queue(),
 * with the queue frozen, while the caller, on the issue path, holds a
 * q_usage_counter reference).  So an icq found for @q stays valid as long
 * as the request or bio it is for.  Only for the issue path (current is
 * the submitter, the queue entered).
 */
static inline struct io_cq *iosched_icq_lookup(struct request_queue *q)
{
	struct io_context *ioc = current->io_context;
	struct io_cq *icq;

	if (!ioc)
		return NULL;
	rcu_read_lock();
	icq = rcu_dereference(ioc->icq_hint);
	if (!icq || icq->q != q) {
		icq = radix_tree_lookup(&ioc->icq_tree, q->id);
		if (icq && icq->q == q)
			rcu_assign_pointer(ioc->icq_hint, icq); /* may race */
		else
			icq = NULL;
	}
	rcu_read_unlock();
	return icq;
}

/*
 * ioc_create_icq() makes a new io_cq findable (radix_tree_insert()) before
 * it calls the elevator's init_icq(), both under q->queue_lock, which the
 * lookup above does not take (nor does 7.3's own ioc_lookup_icq()): a
 * second task of the same io_context, such as an io_uring worker beside
 * its submitter (CLONE_IO), can find the io_cq with the elevator's part
 * still zeroed (7.3, flashfq, the switching storm: list_add corruption,
 * prev NULL, in insert_requests from an iou-wrk thread).  So an elevator's
 * init_icq() ends by setting a ready flag with smp_store_release(), and
 * the issue path, having found an io_cq, calls this with that flag before
 * it touches the elevator's part: while the flag is not set, init_icq()
 * is under way in the creator, which holds q->queue_lock until it is done.
 */
static inline void iosched_icq_wait_ready(struct request_queue *q, const bool *ready)
{
	unsigned long flags;

	/* pairs with init_icq()'s release: its part is set up before ready */
	if (likely(smp_load_acquire(ready)))
		return;
	spin_lock_irqsave(&q->queue_lock, flags);
	WARN_ON_ONCE(!READ_ONCE(*ready));
	spin_unlock_irqrestore(&q->queue_lock, flags);
}

/*
 * ioc_find_get_icq() for prepare_request: the current task's io_cq on @q,
 * created if it has none (then through ioc_find_get_icq(), which takes the
 * locks creation needs), with a reference on its io_context that the
 * elevator drops with put_io_context() when the request is finished.  The
 * reference is taken as blk-ioc.c's static get_io_context() does.
 */
static inline struct io_cq *iosched_icq_find_get(struct request_queue *q)
{
	struct io_cq *icq = iosched_icq_lookup(q);

	if (!icq)
		return ioc_find_get_icq(q);
	WARN_ON_ONCE(atomic_long_read(&icq->ioc->refcount) <= 0);
	atomic_long_inc(&icq->ioc->refcount);
	return icq;
}

#endif /* _IOSCHED_ICQ_H */
