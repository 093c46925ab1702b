/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Trace system "flashfq": the FlashFQ scheduler's request life cycle and
 * decisions.
 *
 * A request is identified while it lives by (dev, hctx, tag), as in the
 * "k2" system; the request events begin with the request's fields
 * (iosched-rq.h), then task: the pid that created the request's I/O
 * context (0: requests with none), and start: the request's start tag.
 * Tags and virtual time are in charge units: ns of device time at normal
 * weight (flashfq/flashfq-core.h).  Times are ns.  LTTng probes for the
 * same events are in tracepoints/lttng/; adding a field here means adding
 * it there too.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM flashfq

#if !defined(_TRACE_FLASHFQ_H) || defined(TRACE_HEADER_MULTI_READ)
#define _TRACE_FLASHFQ_H

#include <linux/tracepoint.h>
#include <trace/events/iosched-rq.h>

/* A request was queued with its tags (a requeued one keeps its own). */
TRACE_EVENT(flashfq_insert,

	TP_PROTO(struct request *rq, pid_t task, u64 start, u64 finish,
		 u64 vtime, bool at_head),

	TP_ARGS(rq, task, start, finish, vtime, at_head),

	TP_STRUCT__entry_iosched_rq(
		__field(pid_t,		task)
		__field(u64,		start)
		__field(u64,		finish)
		__field(u64,		vtime)
		__field(bool,		at_head)
	),

	TP_fast_assign_iosched_rq(rq->internal_tag,
		__entry->task = task;
		__entry->start = start;
		__entry->finish = finish;
		__entry->vtime = vtime;
		__entry->at_head = at_head;
	),

	TP_printk_iosched_rq("task=%d start=%llu finish=%llu vtime=%llu head=%d",
		  __entry->task, (unsigned long long)__entry->start,
		  (unsigned long long)__entry->finish,
		  (unsigned long long)__entry->vtime, __entry->at_head)
);

/*
 * A request left the scheduler for the device.  charge: its finish tag
 * minus its start tag; staged_ns: since the request was allocated (0 if
 * the queue keeps no I/O statistics); inflight: slots held after this
 * dispatch; gap: how far its start tag was ahead of the most lagging
 * active task's progress.
 */
TRACE_EVENT(flashfq_dispatch,

	TP_PROTO(struct request *rq, pid_t task, u64 start, u32 charge,
		 u64 vtime, u64 staged_ns, unsigned int inflight, u64 gap),

	TP_ARGS(rq, task, start, charge, vtime, staged_ns, inflight, gap),

	TP_STRUCT__entry_iosched_rq(
		__field(pid_t,		task)
		__field(u64,		start)
		__field(u32,		charge)
		__field(u64,		vtime)
		__field(u64,		staged_ns)
		__field(unsigned int,	inflight)
		__field(u64,		gap)
	),

	TP_fast_assign_iosched_rq(rq->internal_tag,
		__entry->task = task;
		__entry->start = start;
		__entry->charge = charge;
		__entry->vtime = vtime;
		__entry->staged_ns = staged_ns;
		__entry->inflight = inflight;
		__entry->gap = gap;
	),

	TP_printk_iosched_rq(
		  "task=%d start=%llu charge=%u vtime=%llu staged_ns=%llu inflight=%u gap=%llu",
		  __entry->task, (unsigned long long)__entry->start,
		  __entry->charge, (unsigned long long)__entry->vtime,
		  (unsigned long long)__entry->staged_ns, __entry->inflight,
		  (unsigned long long)__entry->gap)
);

/*
 * A dispatched request finished.  device_ns: since its dispatch;
 * inflight: slots held after.
 */
TRACE_EVENT(flashfq_complete,

	TP_PROTO(struct request *rq, pid_t task, u64 start, u64 device_ns,
		 unsigned int inflight),

	TP_ARGS(rq, task, start, device_ns, inflight),

	TP_STRUCT__entry_iosched_rq(
		__field(pid_t,		task)
		__field(u64,		start)
		__field(u64,		device_ns)
		__field(unsigned int,	inflight)
	),

	TP_fast_assign_iosched_rq(rq->internal_tag,
		__entry->task = task;
		__entry->start = start;
		__entry->device_ns = device_ns;
		__entry->inflight = inflight;
	),

	TP_printk_iosched_rq("task=%d start=%llu device_ns=%llu inflight=%u",
		  __entry->task, (unsigned long long)__entry->start,
		  (unsigned long long)__entry->device_ns, __entry->inflight)
);

/* The driver gave a dispatched request back; its slot is free again. */
TRACE_EVENT(flashfq_requeue,

	TP_PROTO(struct request *rq, pid_t task, u64 start,
		 unsigned int inflight),

	TP_ARGS(rq, task, start, inflight),

	TP_STRUCT__entry_iosched_rq(
		__field(pid_t,		task)
		__field(u64,		start)
		__field(unsigned int,	inflight)
	),

	TP_fast_assign_iosched_rq(rq->internal_tag,
		__entry->task = task;
		__entry->start = start;
		__entry->inflight = inflight;
	),

	TP_printk_iosched_rq("task=%d start=%llu inflight=%u",
		  __entry->task, (unsigned long long)__entry->start,
		  __entry->inflight)
);

/*
 * Dispatch held the next request back: the throttle (its start tag is gap
 * ahead of the most lagging active task, more than throttle) or a blocking
 * anticipation (antic: 1; task is then the anticipated task and gap how
 * far the next request's start tag is beyond its hypothetical one).
 */
TRACE_EVENT(flashfq_throttled,

	TP_PROTO(struct request_queue *q, pid_t task, bool antic, u64 gap,
		 u64 throttle, unsigned int inflight, unsigned int queued),

	TP_ARGS(q, task, antic, gap, throttle, inflight, queued),

	TP_STRUCT__entry(
		__field(dev_t,		dev)
		__field(pid_t,		task)
		__field(bool,		antic)
		__field(u64,		gap)
		__field(u64,		throttle)
		__field(unsigned int,	inflight)
		__field(unsigned int,	queued)
	),

	TP_fast_assign(
		__entry->dev = disk_devt(q->disk);
		__entry->task = task;
		__entry->antic = antic;
		__entry->gap = gap;
		__entry->throttle = throttle;
		__entry->inflight = inflight;
		__entry->queued = queued;
	),

	TP_printk("%d,%d task=%d antic=%d gap=%llu throttle=%llu inflight=%u queued=%u",
		  MAJOR(__entry->dev), MINOR(__entry->dev), __entry->task,
		  __entry->antic, (unsigned long long)__entry->gap,
		  (unsigned long long)__entry->throttle, __entry->inflight,
		  __entry->queued)
);

/*
 * Anticipation of a task's next request: started at a synchronous
 * completion (until_ns: when it ends, block_ns: how long it may hold back
 * dispatch), expired without a request, or cancelled (by the task's next
 * request, or its exit).  start: the hypothetical request's start tag.
 */
DECLARE_EVENT_CLASS(flashfq_antic,

	TP_PROTO(struct request_queue *q, pid_t task, u64 start, u64 until_ns,
		 u64 block_ns),

	TP_ARGS(q, task, start, until_ns, block_ns),

	TP_STRUCT__entry(
		__field(dev_t,		dev)
		__field(pid_t,		task)
		__field(u64,		start)
		__field(u64,		until_ns)
		__field(u64,		block_ns)
	),

	TP_fast_assign(
		__entry->dev = disk_devt(q->disk);
		__entry->task = task;
		__entry->start = start;
		__entry->until_ns = until_ns;
		__entry->block_ns = block_ns;
	),

	TP_printk("%d,%d task=%d start=%llu until_ns=%llu block_ns=%llu",
		  MAJOR(__entry->dev), MINOR(__entry->dev), __entry->task,
		  (unsigned long long)__entry->start,
		  (unsigned long long)__entry->until_ns,
		  (unsigned long long)__entry->block_ns)
);

DEFINE_EVENT(flashfq_antic, flashfq_antic_start,
	TP_PROTO(struct request_queue *q, pid_t task, u64 start, u64 until_ns,
		 u64 block_ns),
	TP_ARGS(q, task, start, until_ns, block_ns));

DEFINE_EVENT(flashfq_antic, flashfq_antic_expire,
	TP_PROTO(struct request_queue *q, pid_t task, u64 start, u64 until_ns,
		 u64 block_ns),
	TP_ARGS(q, task, start, until_ns, block_ns));

DEFINE_EVENT(flashfq_antic, flashfq_antic_cancel,
	TP_PROTO(struct request_queue *q, pid_t task, u64 start, u64 until_ns,
		 u64 block_ns),
	TP_ARGS(q, task, start, until_ns, block_ns));

/* Virtual time moved forward to vtime (by delta). */
TRACE_EVENT(flashfq_vtime,

	TP_PROTO(struct request_queue *q, u64 vtime, u64 delta),

	TP_ARGS(q, vtime, delta),

	TP_STRUCT__entry(
		__field(dev_t,		dev)
		__field(u64,		vtime)
		__field(u64,		delta)
	),

	TP_fast_assign(
		__entry->dev = disk_devt(q->disk);
		__entry->vtime = vtime;
		__entry->delta = delta;
	),

	TP_printk("%d,%d vtime=%llu delta=%llu",
		  MAJOR(__entry->dev), MINOR(__entry->dev),
		  (unsigned long long)__entry->vtime,
		  (unsigned long long)__entry->delta)
);

/*
 * A cost point in force (0 read 4 KiB, 1 read 128 KiB, 2 write 4 KiB,
 * 3 write 128 KiB) went from old to cost ns; source: 0 default, 1 scaled
 * from the direction's other point, 2 learnt, 3 set in sysfs; samples:
 * the completions the point has learnt from.
 */
TRACE_EVENT(flashfq_cost,

	TP_PROTO(struct request_queue *q, unsigned int point, u32 old, u32 cost,
		 unsigned int source, u32 samples),

	TP_ARGS(q, point, old, cost, source, samples),

	TP_STRUCT__entry(
		__field(dev_t,		dev)
		__field(unsigned int,	point)
		__field(u32,		old)
		__field(u32,		cost)
		__field(unsigned int,	source)
		__field(u32,		samples)
	),

	TP_fast_assign(
		__entry->dev = disk_devt(q->disk);
		__entry->point = point;
		__entry->old = old;
		__entry->cost = cost;
		__entry->source = source;
		__entry->samples = samples;
	),

	TP_printk("%d,%d point=%u old=%u cost=%u source=%u samples=%u",
		  MAJOR(__entry->dev), MINOR(__entry->dev), __entry->point,
		  __entry->old, __entry->cost, __entry->source,
		  __entry->samples)
);

#endif /* _TRACE_FLASHFQ_H */

/* This part must be outside protection */
#include <trace/define_trace.h>
