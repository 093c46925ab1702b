/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A lock-free inbox for the requests an elevator is given, so that a
 * request takes the elevator's lock once on its way in (at dispatch)
 * rather than twice (insert and dispatch).
 *
 * insert_requests posts its list (iosched_inbox_post(): the requests
 * linked through rq->rq_next, which shares its memory with rq->queuelist,
 * unused while a request is in no list, and one compare-and-exchange on
 * the inbox's head per call, not per request) instead of taking the lock.
 * The elevator's dispatch_request takes everything posted, under its lock,
 * before it decides (iosched_inbox_take(): one exchange, nothing when the
 * inbox is empty; a chain through rq->rq_next, oldest first, with no list
 * built in between) and inserts it as insert_requests did, in the order
 * it was posted.  has_work must count the inbox (iosched_inbox_empty()):
 * blk-mq runs the queues after every insertion, so a posted request is
 * taken by that run's dispatch at the latest.
 *
 * Order: the requests of one call keep their order, and calls are taken
 * in the order their compare-and-exchange succeeded; two CPUs posting at
 * once are ordered as the exchange decided, as the elevator's lock would
 * have.  A request still in the inbox is not yet in the elevator: a bio
 * cannot merge into it (blk-mq's plug has merged what one task submits),
 * and the elevator's debugfs does not list it.
 *
 * Locking: none to post (any context; insert_requests runs in task
 * context); the taker holds the elevator's dispatch lock, so one CPU
 * takes at a time.  The exchange and the successful compare-and-exchange
 * are full barriers: what the poster wrote to a request before posting
 * it is seen by the taker.
 */
#ifndef _IOSCHED_INBOX_H
#define _IOSCHED_INBOX_H

#ifdef __KERNEL__
#include <linux/atomic.h>
#include <linux/blk-mq.h>
#include <linux/list.h>
#else
#include "kshim.h"	/* tests/unit/iosched_inbox_test.c: struct request */
#endif

struct iosched_inbox {
	struct request *first;	/* the last posted, then older; NULL: empty */
};

/*
 * Post @list's requests, in order, leaving @list empty.  Any context; no
 * lock.  Returns whether any was posted.
 */
static inline bool iosched_inbox_post(struct iosched_inbox *ib,
				      struct list_head *list)
{
	struct request *rq, *tmp, *newest = NULL, *oldest = NULL, *first;

	/* newest first, as the inbox holds them; rq_next is queuelist.next */
	list_for_each_entry_safe(rq, tmp, list, queuelist) {
		rq->rq_next = newest;
		newest = rq;
		if (!oldest)
			oldest = rq;
	}
	INIT_LIST_HEAD(list);
	if (!newest)
		return false;
	first = READ_ONCE(ib->first);
	do {
		oldest->rq_next = first;
	} while (!try_cmpxchg(&ib->first, &first, newest));
	return true;
}

/* Lockless: whether nothing is posted (has_work's test). */
static inline bool iosched_inbox_empty(const struct iosched_inbox *ib)
{
	return !READ_ONCE(ib->first);
}

/*
 * Take everything posted: the oldest request, the others after it through
 * rq->rq_next, NULL-terminated (NULL: nothing posted).  The caller reads
 * a request's rq_next before it puts the request on a list, which
 * overwrites it.  The caller holds the elevator's dispatch lock (one
 * taker at a time).
 */
static inline struct request *iosched_inbox_take(struct iosched_inbox *ib)
{
	struct request *rq, *next, *oldest = NULL;

	if (!READ_ONCE(ib->first))
		return NULL;
	rq = xchg(&ib->first, NULL);
	while (rq) {
		next = rq->rq_next;
		rq->rq_next = oldest;
		oldest = rq;
		rq = next;
	}
	return oldest;
}

#endif /* _IOSCHED_INBOX_H */
