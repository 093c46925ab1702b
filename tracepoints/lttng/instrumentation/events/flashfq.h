/* SPDX-License-Identifier: GPL-2.0 */
/*
 * LTTng probe definitions of the "flashfq" trace system: the same events
 * and field names as the kernel tracepoints in
 * tracepoints/trace/events/flashfq.h (which see for their meaning), so
 * that scripts/trace-report reads an LTTng trace and an ftrace trace
 * alike.  The request events begin with the request's fields, as in the
 * kernel's header (iosched-rq.h), and the kernel's DECLARE_EVENT_CLASS
 * and DEFINE_EVENT are a class and instances here too.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM flashfq

#if !defined(LTTNG_TRACE_FLASHFQ_H) || defined(TRACE_HEADER_MULTI_READ)
#define LTTNG_TRACE_FLASHFQ_H

#include <lttng/tracepoint-event.h>
#include <instrumentation/events/iosched-rq.h>

/* A request was queued with its tags. */
LTTNG_TRACEPOINT_EVENT_CODE(flashfq_insert,

	TP_PROTO(struct request *rq, pid_t task, u64 start, u64 finish,
		 u64 vtime, bool at_head),

	TP_ARGS(rq, task, start, finish, vtime, at_head),

	TP_locvar_iosched_rq,

	TP_code_pre_iosched_rq,

	TP_FIELDS_iosched_rq(rq->internal_tag,
		ctf_integer(pid_t, task, task)
		ctf_integer(u64, start, start)
		ctf_integer(u64, finish, finish)
		ctf_integer(u64, vtime, vtime)
		ctf_integer(bool, at_head, at_head)
	),

	TP_code_post()
)

/* A request left the scheduler for the device. */
LTTNG_TRACEPOINT_EVENT_CODE(flashfq_dispatch,

	TP_PROTO(struct request *rq, pid_t task, u64 start, u32 charge,
		 u64 vtime, u64 staged_ns, unsigned int inflight, u64 gap),

	TP_ARGS(rq, task, start, charge, vtime, staged_ns, inflight, gap),

	TP_locvar_iosched_rq,

	TP_code_pre_iosched_rq,

	TP_FIELDS_iosched_rq(rq->internal_tag,
		ctf_integer(pid_t, task, task)
		ctf_integer(u64, start, start)
		ctf_integer(u32, charge, charge)
		ctf_integer(u64, vtime, vtime)
		ctf_integer(u64, staged_ns, staged_ns)
		ctf_integer(unsigned int, inflight, inflight)
		ctf_integer(u64, gap, gap)
	),

	TP_code_post()
)

/* A dispatched request finished. */
LTTNG_TRACEPOINT_EVENT_CODE(flashfq_complete,

	TP_PROTO(struct request *rq, pid_t task, u64 start, u64 device_ns,
		 unsigned int inflight),

	TP_ARGS(rq, task, start, device_ns, inflight),

	TP_locvar_iosched_rq,

	TP_code_pre_iosched_rq,

	TP_FIELDS_iosched_rq(rq->internal_tag,
		ctf_integer(pid_t, task, task)
		ctf_integer(u64, start, start)
		ctf_integer(u64, device_ns, device_ns)
		ctf_integer(unsigned int, inflight, inflight)
	),

	TP_code_post()
)

/* The driver gave a dispatched request back. */
LTTNG_TRACEPOINT_EVENT_CODE(flashfq_requeue,

	TP_PROTO(struct request *rq, pid_t task, u64 start,
		 unsigned int inflight),

	TP_ARGS(rq, task, start, inflight),

	TP_locvar_iosched_rq,

	TP_code_pre_iosched_rq,

	TP_FIELDS_iosched_rq(rq->internal_tag,
		ctf_integer(pid_t, task, task)
		ctf_integer(u64, start, start)
		ctf_integer(unsigned int, inflight, inflight)
	),

	TP_code_post()
)

/* Dispatch held the next request back: throttle or blocking anticipation. */
LTTNG_TRACEPOINT_EVENT(flashfq_throttled,

	TP_PROTO(struct request_queue *q, pid_t task, bool antic, u64 gap,
		 u64 throttle, unsigned int inflight, unsigned int queued),

	TP_ARGS(q, task, antic, gap, throttle, inflight, queued),

	TP_FIELDS(
		ctf_integer(dev_t, dev, disk_devt(q->disk))
		ctf_integer(pid_t, task, task)
		ctf_integer(bool, antic, antic)
		ctf_integer(u64, gap, gap)
		ctf_integer(u64, throttle, throttle)
		ctf_integer(unsigned int, inflight, inflight)
		ctf_integer(unsigned int, queued, queued)
	)
)

/* Anticipation of a task's next request: started, expired, cancelled. */
LTTNG_TRACEPOINT_EVENT_CLASS(flashfq_antic,

	TP_PROTO(struct request_queue *q, pid_t task, u64 start, u64 until_ns,
		 u64 block_ns),

	TP_ARGS(q, task, start, until_ns, block_ns),

	TP_FIELDS(
		ctf_integer(dev_t, dev, disk_devt(q->disk))
		ctf_integer(pid_t, task, task)
		ctf_integer(u64, start, start)
		ctf_integer(u64, until_ns, until_ns)
		ctf_integer(u64, block_ns, block_ns)
	)
)

LTTNG_TRACEPOINT_EVENT_INSTANCE(flashfq_antic, flashfq_antic_start,

	TP_PROTO(struct request_queue *q, pid_t task, u64 start, u64 until_ns,
		 u64 block_ns),

	TP_ARGS(q, task, start, until_ns, block_ns)
)

LTTNG_TRACEPOINT_EVENT_INSTANCE(flashfq_antic, flashfq_antic_expire,

	TP_PROTO(struct request_queue *q, pid_t task, u64 start, u64 until_ns,
		 u64 block_ns),

	TP_ARGS(q, task, start, until_ns, block_ns)
)

LTTNG_TRACEPOINT_EVENT_INSTANCE(flashfq_antic, flashfq_antic_cancel,

	TP_PROTO(struct request_queue *q, pid_t task, u64 start, u64 until_ns,
		 u64 block_ns),

	TP_ARGS(q, task, start, until_ns, block_ns)
)

/* Virtual time moved forward to vtime (by delta). */
LTTNG_TRACEPOINT_EVENT(flashfq_vtime,

	TP_PROTO(struct request_queue *q, u64 vtime, u64 delta),

	TP_ARGS(q, vtime, delta),

	TP_FIELDS(
		ctf_integer(dev_t, dev, disk_devt(q->disk))
		ctf_integer(u64, vtime, vtime)
		ctf_integer(u64, delta, delta)
	)
)

/* A cost point in force changed (trace/events/flashfq.h). */
LTTNG_TRACEPOINT_EVENT(flashfq_cost,

	TP_PROTO(struct request_queue *q, unsigned int point, u32 old, u32 cost,
		 unsigned int source, u32 samples),

	TP_ARGS(q, point, old, cost, source, samples),

	TP_FIELDS(
		ctf_integer(dev_t, dev, disk_devt(q->disk))
		ctf_integer(unsigned int, point, point)
		ctf_integer(u32, old, old)
		ctf_integer(u32, cost, cost)
		ctf_integer(unsigned int, source, source)
		ctf_integer(u32, samples, samples)
	)
)

#endif /* LTTNG_TRACE_FLASHFQ_H */

#include <lttng/define_trace.h>
