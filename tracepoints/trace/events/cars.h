/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Trace system "cars": the CARS scheduler's request life cycle (insert,
 * dispatch, complete, requeue, as the "k2" and "flashfq" systems, which
 * scripts/trace-report joins on) and its die predictions.
 *
 * A request is identified while it lives by (dev, hctx, tag); the request
 * events begin with the request's fields (iosched-rq.h), then flow: the
 * pid that created the request's I/O context (0: requests with none).
 * die, ndies: the first predicted die and how many consecutive dies the
 * request occupies (cars-host/cars-core.h); op: 0 read, 1 write, 2 erase
 * (a discard).  Requests that bypass the scheduler (flushes, passthrough)
 * have no events here.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM cars

#if !defined(_TRACE_CARS_H) || defined(TRACE_HEADER_MULTI_READ)
#define _TRACE_CARS_H

#include <linux/tracepoint.h>
#include <trace/events/iosched-rq.h>

/* A request was queued on its flow (at_head: a requeued one, first again). */
TRACE_EVENT(cars_insert,

	TP_PROTO(struct request *rq, pid_t flow, bool at_head),

	TP_ARGS(rq, flow, at_head),

	TP_STRUCT__entry_iosched_rq(
		__field(pid_t,		flow)
		__field(bool,		at_head)
	),

	TP_fast_assign_iosched_rq(rq->internal_tag,
		__entry->flow = flow;
		__entry->at_head = at_head;
	),

	TP_printk_iosched_rq("flow=%d head=%d",
		  __entry->flow, __entry->at_head)
);

/* A request left for the device, placed on its predicted dies. */
TRACE_EVENT(cars_dispatch,

	TP_PROTO(struct request *rq, pid_t flow, u32 die, u32 ndies, u32 op,
		 bool forced, bool cmt_miss, u32 inflight),

	TP_ARGS(rq, flow, die, ndies, op, forced, cmt_miss, inflight),

	TP_STRUCT__entry_iosched_rq(
		__field(pid_t,		flow)
		__field(u32,		die)
		__field(u32,		ndies)
		__field(u32,		op)
		__field(bool,		forced)
		__field(bool,		cmt_miss)
		__field(u32,		inflight)
	),

	TP_fast_assign_iosched_rq(rq->internal_tag,
		__entry->flow = flow;
		__entry->die = die;
		__entry->ndies = ndies;
		__entry->op = op;
		__entry->forced = forced;
		__entry->cmt_miss = cmt_miss;
		__entry->inflight = inflight;
	),

	TP_printk_iosched_rq("flow=%d die=%u ndies=%u op=%u forced=%d cmt_miss=%d inflight=%u",
		  __entry->flow, __entry->die, __entry->ndies, __entry->op,
		  __entry->forced, __entry->cmt_miss, __entry->inflight)
);

/*
 * A dispatched request finished: its slot and dies are free.  inflight:
 * slots held after, as the completing CPU counts them without a lock
 * (completions on two CPUs at once may each count the other's).
 */
TRACE_EVENT(cars_complete,

	TP_PROTO(struct request *rq, pid_t flow, u32 die, u32 ndies,
		 u32 inflight),

	TP_ARGS(rq, flow, die, ndies, inflight),

	TP_STRUCT__entry_iosched_rq(
		__field(pid_t,		flow)
		__field(u32,		die)
		__field(u32,		ndies)
		__field(u32,		inflight)
	),

	TP_fast_assign_iosched_rq(rq->internal_tag,
		__entry->flow = flow;
		__entry->die = die;
		__entry->ndies = ndies;
		__entry->inflight = inflight;
	),

	TP_printk_iosched_rq("flow=%d die=%u ndies=%u inflight=%u",
		  __entry->flow, __entry->die, __entry->ndies,
		  __entry->inflight)
);

/*
 * The driver gave a dispatched request back.  kept: it keeps its slot and
 * dies (a request the driver prepared, RQF_DONTPREP, goes back to the
 * driver, not through CARS); else they are free and it is queued again
 * (cars_insert, at_head).  inflight: slots held after.
 */
TRACE_EVENT(cars_requeue,

	TP_PROTO(struct request *rq, pid_t flow, bool kept, u32 inflight),

	TP_ARGS(rq, flow, kept, inflight),

	TP_STRUCT__entry_iosched_rq(
		__field(pid_t,		flow)
		__field(bool,		kept)
		__field(u32,		inflight)
	),

	TP_fast_assign_iosched_rq(rq->internal_tag,
		__entry->flow = flow;
		__entry->kept = kept;
		__entry->inflight = inflight;
	),

	TP_printk_iosched_rq("flow=%d kept=%d inflight=%u",
		  __entry->flow, __entry->kept, __entry->inflight)
);

/*
 * A pick passed over flows' oldest requests: the first one passed over,
 * its reason (0 die busy, 1 mapping-cache miss, 2 throttle) and predicted
 * die, and how many heads were passed over in all; dispatched: whether the
 * pick then dispatched another request.
 */
TRACE_EVENT(cars_skip,

	TP_PROTO(struct request_queue *q, pid_t flow, u32 reason, u32 die,
		 u32 skipped, bool dispatched),

	TP_ARGS(q, flow, reason, die, skipped, dispatched),

	TP_STRUCT__entry(
		__field(dev_t,		dev)
		__field(pid_t,		flow)
		__field(u32,		reason)
		__field(u32,		die)
		__field(u32,		skipped)
		__field(bool,		dispatched)
	),

	TP_fast_assign(
		__entry->dev = disk_devt(q->disk);
		__entry->flow = flow;
		__entry->reason = reason;
		__entry->die = die;
		__entry->skipped = skipped;
		__entry->dispatched = dispatched;
	),

	TP_printk("%d,%d flow=%d reason=%u die=%u skipped=%u dispatched=%d",
		  MAJOR(__entry->dev), MINOR(__entry->dev), __entry->flow,
		  __entry->reason, __entry->die, __entry->skipped,
		  __entry->dispatched)
);

#endif /* _TRACE_CARS_H */

/* This part must be outside protection */
#include <trace/define_trace.h>
