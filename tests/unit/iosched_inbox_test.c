// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of the lock-free inbox of inserted requests
 * (elevator/iosched-inbox.h) that K2, FlashFQ and CARS post to from
 * insert_requests and take from under their lock in dispatch_request:
 * nothing posted is lost or taken twice, one call's requests and one
 * poster's calls keep their order, also with several threads posting while
 * one takes, as CPUs do.
 */
#include <pthread.h>

#include "unit.h"
#include "kshim.h"

/* The part of the kernel's struct request the inbox uses. */
struct request {
	union {
		struct list_head queuelist;
		struct request *rq_next;
	};
	unsigned int poster;	/* the test's: who posted it, and when */
	unsigned int seq;
	unsigned int taken;
};

#include "iosched-inbox.h"

/* Post @n requests of @rqs as one call. */
static bool post(struct iosched_inbox *ib, struct request *rqs, unsigned int n)
{
	LIST_HEAD(list);
	unsigned int i;

	for (i = 0; i < n; i++)
		list_add_tail(&rqs[i].queuelist, &list);
	return iosched_inbox_post(ib, &list);
}

/* Take everything into @out[], in the order taken; returns how many. */
static unsigned int take(struct iosched_inbox *ib, struct request **out)
{
	struct request *rq, *next;
	unsigned int n = 0;
	LIST_HEAD(list);

	for (rq = iosched_inbox_take(ib); rq; rq = next) {
		next = rq->rq_next;
		/* the caller may put it on a list at once, as the elevators do */
		list_add_tail(&rq->queuelist, &list);
		out[n++] = rq;
	}
	return n;
}

TEST(calls_and_their_requests_come_out_in_posting_order)
{
	struct iosched_inbox ib = { NULL };
	struct request rqs[10], *out[10];
	LIST_HEAD(empty);
	LIST_HEAD(list);
	unsigned int i;

	CHECK(iosched_inbox_empty(&ib));
	CHECK(!iosched_inbox_post(&ib, &empty));
	CHECK(list_empty(&empty));
	CHECK(iosched_inbox_empty(&ib));
	CHECK(!iosched_inbox_take(&ib));
	for (i = 0; i < 10; i++)
		rqs[i].seq = i;
	/* posting leaves the caller's list empty */
	list_add_tail(&rqs[0].queuelist, &list);
	CHECK(iosched_inbox_post(&ib, &list));
	CHECK(list_empty(&list));
	CHECK(!iosched_inbox_empty(&ib));
	CHECK(post(&ib, rqs + 1, 4));
	CHECK(post(&ib, rqs + 5, 5));
	CHECK_EQ(take(&ib, out), 10);
	for (i = 0; i < 10; i++)
		CHECK_EQ(out[i]->seq, i);
	CHECK(iosched_inbox_empty(&ib));
	CHECK_EQ(take(&ib, out), 0);
	/* and the inbox is as good as new */
	CHECK(post(&ib, rqs + 3, 2));
	CHECK_EQ(take(&ib, out), 2);
	CHECK_EQ(out[0]->seq, 3);
	CHECK_EQ(out[1]->seq, 4);
}

/* The threaded test: POSTERS threads post PER requests each, in calls. */
enum { POSTERS = 4, PER = 200000 };

struct poster {
	struct iosched_inbox *ib;
	struct request *rqs;	/* [PER] */
	unsigned int id;
	unsigned int *finished;	/* posters done, counted atomically */
	pthread_barrier_t *start;	/* all posters and the taker at once */
};

static void *poster_fn(void *arg)
{
	struct poster *p = arg;
	unsigned int i = 0, n, seed = p->id * 7919 + 1;

	pthread_barrier_wait(p->start);
	while (i < PER) {
		seed = seed * 1103515245 + 12345;
		n = 1 + (seed >> 16) % 8;	/* 1-8 requests a call */
		if (n > PER - i)
			n = PER - i;
		post(p->ib, p->rqs + i, n);
		i += n;
	}
	__atomic_add_fetch(p->finished, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

/* One round: the posters start together and the taker runs beside them. */
static void concurrent_round(void)
{
	static struct request rqs[POSTERS][PER];
	struct iosched_inbox ib = { NULL };
	unsigned int next[POSTERS] = { 0 }, finished = 0, i, n, k;
	struct poster ps[POSTERS];
	pthread_t th[POSTERS];
	pthread_barrier_t start;
	struct request **out;
	bool last = false;

	out = malloc(sizeof(*out) * POSTERS * PER);
	pthread_barrier_init(&start, NULL, POSTERS + 1);
	for (k = 0; k < POSTERS; k++) {
		for (i = 0; i < PER; i++) {
			rqs[k][i].poster = k;
			rqs[k][i].seq = i;
			rqs[k][i].taken = 0;
		}
		ps[k] = (struct poster){ .ib = &ib, .rqs = rqs[k], .id = k,
					 .finished = &finished, .start = &start };
		CHECK_EQ(pthread_create(&th[k], NULL, poster_fn, &ps[k]), 0);
	}
	/*
	 * One taker, as under the elevator's lock, while they post; a last
	 * take once all have finished.  A request taken twice would be seen
	 * out of order; one lost, by its poster's count or as never taken.
	 */
	pthread_barrier_wait(&start);
	do {
		last = __atomic_load_n(&finished, __ATOMIC_SEQ_CST) == POSTERS;
		n = take(&ib, out);
		for (i = 0; i < n; i++) {
			struct request *rq = out[i];

			rq->taken++;
			CHECK_EQ(rq->seq, next[rq->poster]);
			next[rq->poster] = rq->seq + 1;
		}
	} while (!last);
	for (k = 0; k < POSTERS; k++) {
		pthread_join(th[k], NULL);
		CHECK_EQ(next[k], PER);
		for (i = 0; i < PER; i++)
			CHECK_EQ(rqs[k][i].taken, 1);
	}
	CHECK_EQ(take(&ib, out), 0);
	pthread_barrier_destroy(&start);
	free(out);
}

/*
 * Rounds: one round overlaps the threads for a few milliseconds only, and
 * on a loaded 2-CPU machine an inbox without its compare-and-exchange lost
 * requests in 2 rounds of 5.
 */
TEST(concurrent_posters_lose_nothing_and_keep_their_order)
{
	int round;

	for (round = 0; round < 20; round++)
		concurrent_round();
}

UNIT_MAIN(UNIT(calls_and_their_requests_come_out_in_posting_order),
	  UNIT(concurrent_posters_lose_nothing_and_keep_their_order))
