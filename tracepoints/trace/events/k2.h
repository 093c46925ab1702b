/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Trace system "k2": the K2 scheduler's request life cycle and decisions.
 *
 * A request is identified while it lives by (dev, hctx, tag): its hardware
 * queue and its scheduler tag.  Sectors are 512-byte units, times ns, rwbs
 * as in the block layer's events; the request events begin with these
 * fields (iosched-rq.h), then queue: 0..7 the real-time level, 8 the
 * non-real-time queue.  Each event is a static-key tracepoint: a disabled
 * one costs a patched branch.  LTTng probes for the same events are in
 * tracepoints/lttng/.  Adding a field here means adding it there too.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM k2

#if !defined(_TRACE_K2_H) || defined(TRACE_HEADER_MULTI_READ)
#define _TRACE_K2_H

#include <linux/ioprio.h>
#include <linux/sched.h>
#include <linux/tracepoint.h>
#include <trace/events/iosched-rq.h>

/* A request entered a staging queue. */
TRACE_EVENT(k2_insert,

	TP_PROTO(struct request *rq, unsigned int queue, bool at_head),

	TP_ARGS(rq, queue, at_head),

	TP_STRUCT__entry_iosched_rq(
		__field(unsigned int,	queue)
		__field(unsigned int,	ioprio_class)
		__field(unsigned int,	ioprio_level)
		__field(bool,		at_head)
		__field(pid_t,		pid)
		__array(char,		comm,	TASK_COMM_LEN)
	),

	TP_fast_assign_iosched_rq(rq->internal_tag,
		__entry->queue = queue;
		__entry->ioprio_class = IOPRIO_PRIO_CLASS(req_get_ioprio(rq));
		__entry->ioprio_level = IOPRIO_PRIO_LEVEL(req_get_ioprio(rq));
		__entry->at_head = at_head;
		__entry->pid = current->pid;
		memcpy(__entry->comm, current->comm, TASK_COMM_LEN);
	),

	TP_printk_iosched_rq("queue=%u class=%u level=%u head=%d pid=%d comm=%s",
		  __entry->queue, __entry->ioprio_class, __entry->ioprio_level,
		  __entry->at_head, __entry->pid, __entry->comm)
);

/*
 * A request left its staging queue for the device.  staged_ns: since the
 * request was allocated (0 if the queue keeps no I/O statistics);
 * inflight: the count after this dispatch; promoted: sent ahead of
 * real-time requests by starvation_ms.
 */
TRACE_EVENT(k2_dispatch,

	TP_PROTO(struct request *rq, unsigned int queue, u64 staged_ns,
		 unsigned int inflight, bool promoted),

	TP_ARGS(rq, queue, staged_ns, inflight, promoted),

	TP_STRUCT__entry_iosched_rq(
		__field(unsigned int,	queue)
		__field(u64,		staged_ns)
		__field(unsigned int,	inflight)
		__field(bool,		promoted)
	),

	TP_fast_assign_iosched_rq(rq->internal_tag,
		__entry->queue = queue;
		__entry->staged_ns = staged_ns;
		__entry->inflight = inflight;
		__entry->promoted = promoted;
	),

	TP_printk_iosched_rq("queue=%u staged_ns=%llu inflight=%u promoted=%d",
		  __entry->queue, (unsigned long long)__entry->staged_ns,
		  __entry->inflight, __entry->promoted)
);

/*
 * A dispatched request finished.  device_ns: since its dispatch (0 if the
 * event was enabled after the dispatch); inflight: the count after.
 */
TRACE_EVENT(k2_complete,

	TP_PROTO(struct request *rq, unsigned int queue, u64 device_ns,
		 unsigned int inflight),

	TP_ARGS(rq, queue, device_ns, inflight),

	TP_STRUCT__entry_iosched_rq(
		__field(unsigned int,	queue)
		__field(u64,		device_ns)
		__field(unsigned int,	inflight)
	),

	TP_fast_assign_iosched_rq(rq->internal_tag,
		__entry->queue = queue;
		__entry->device_ns = device_ns;
		__entry->inflight = inflight;
	),

	TP_printk_iosched_rq("queue=%u device_ns=%llu inflight=%u",
		  __entry->queue, (unsigned long long)__entry->device_ns,
		  __entry->inflight)
);

/* The driver gave a dispatched request back; its slot is free again. */
TRACE_EVENT(k2_requeue,

	TP_PROTO(struct request *rq, unsigned int queue, unsigned int inflight),

	TP_ARGS(rq, queue, inflight),

	TP_STRUCT__entry_iosched_rq(
		__field(unsigned int,	queue)
		__field(unsigned int,	inflight)
	),

	TP_fast_assign_iosched_rq(rq->internal_tag,
		__entry->queue = queue;
		__entry->inflight = inflight;
	),

	TP_printk_iosched_rq("queue=%u inflight=%u",
		  __entry->queue, __entry->inflight)
);

/* Dispatch held queued requests back: the bound is reached. */
TRACE_EVENT(k2_throttled,

	TP_PROTO(struct request_queue *q, unsigned int inflight,
		 unsigned int bound, unsigned int queued),

	TP_ARGS(q, inflight, bound, queued),

	TP_STRUCT__entry(
		__field(dev_t,		dev)
		__field(unsigned int,	inflight)
		__field(unsigned int,	bound)
		__field(unsigned int,	queued)
	),

	TP_fast_assign(
		__entry->dev = disk_devt(q->disk);
		__entry->inflight = inflight;
		__entry->bound = bound;
		__entry->queued = queued;
	),

	TP_printk("%d,%d inflight=%u bound=%u queued=%u",
		  MAJOR(__entry->dev), MINOR(__entry->dev), __entry->inflight,
		  __entry->bound, __entry->queued)
);

/* Anti-starvation: a non-RT request goes ahead of queued RT requests. */
TRACE_EVENT(k2_promote,

	TP_PROTO(struct request *rq, u64 waited_ns),

	TP_ARGS(rq, waited_ns),

	TP_STRUCT__entry_iosched_rq(
		__field(unsigned int,	queue)
		__field(u64,		waited_ns)
	),

	TP_fast_assign_iosched_rq(rq->internal_tag,
		__entry->queue = 8;
		__entry->waited_ns = waited_ns;
	),

	TP_printk_iosched_rq("queue=%u waited_ns=%llu",
		  __entry->queue, (unsigned long long)__entry->waited_ns)
);

/*
 * The adaptive bound (target_latency_us) changed, or the controller
 * decided to hold it: the bound in force before and after, the window's
 * estimate of the real-time 99.9th percentile (us; 0 when the change
 * rests on no window: idle, return), the samples it rests on, and why
 * (enum k2_adapt_reason: 0 hold, 1 down, 2 up, 3 up_fast, 4 idle,
 * 5 return, 6 up_double, 7 no_gain).
 */
TRACE_EVENT(k2_adjust,

	TP_PROTO(struct request_queue *q, unsigned int old, unsigned int new,
		 unsigned int est_us, unsigned int samples, unsigned int reason),

	TP_ARGS(q, old, new, est_us, samples, reason),

	TP_STRUCT__entry(
		__field(dev_t,		dev)
		__field(unsigned int,	old)
		__field(unsigned int,	new)
		__field(unsigned int,	est_us)
		__field(unsigned int,	samples)
		__field(unsigned int,	reason)
	),

	TP_fast_assign(
		__entry->dev = disk_devt(q->disk);
		__entry->old = old;
		__entry->new = new;
		__entry->est_us = est_us;
		__entry->samples = samples;
		__entry->reason = reason;
	),

	TP_printk("%d,%d old=%u new=%u est_us=%u samples=%u reason=%s",
		  MAJOR(__entry->dev), MINOR(__entry->dev), __entry->old,
		  __entry->new, __entry->est_us, __entry->samples,
		  __print_symbolic(__entry->reason, { 0, "hold" },
				   { 1, "down" }, { 2, "up" }, { 3, "up_fast" },
				   { 4, "idle" }, { 5, "return" },
				   { 6, "up_double" }, { 7, "no_gain" }))
);

#endif /* _TRACE_K2_H */

/* This part must be outside protection */
#include <trace/define_trace.h>
