/* SPDX-License-Identifier: GPL-2.0 */
/*
 * LTTng probe definitions of the "cars" trace system: the same events and
 * field names as the kernel tracepoints in tracepoints/trace/events/cars.h
 * (which see for their meaning), so that scripts/trace-report reads an
 * LTTng trace and an ftrace trace alike.  The request events begin with
 * the request's fields, as in the kernel's header (iosched-rq.h).
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM cars

#if !defined(LTTNG_TRACE_CARS_H) || defined(TRACE_HEADER_MULTI_READ)
#define LTTNG_TRACE_CARS_H

#include <lttng/tracepoint-event.h>
#include <instrumentation/events/iosched-rq.h>

/* A request was queued on its flow. */
LTTNG_TRACEPOINT_EVENT_CODE(cars_insert,

	TP_PROTO(struct request *rq, pid_t flow, bool at_head),

	TP_ARGS(rq, flow, at_head),

	TP_locvar_iosched_rq,

	TP_code_pre_iosched_rq,

	TP_FIELDS_iosched_rq(rq->internal_tag,
		ctf_integer(pid_t, flow, flow)
		ctf_integer(bool, at_head, at_head)
	),

	TP_code_post()
)

/* A request left for the device, placed on its predicted dies. */
LTTNG_TRACEPOINT_EVENT_CODE(cars_dispatch,

	TP_PROTO(struct request *rq, pid_t flow, u32 die, u32 ndies, u32 op,
		 bool forced, bool cmt_miss, u32 inflight),

	TP_ARGS(rq, flow, die, ndies, op, forced, cmt_miss, inflight),

	TP_locvar_iosched_rq,

	TP_code_pre_iosched_rq,

	TP_FIELDS_iosched_rq(rq->internal_tag,
		ctf_integer(pid_t, flow, flow)
		ctf_integer(u32, die, die)
		ctf_integer(u32, ndies, ndies)
		ctf_integer(u32, op, op)
		ctf_integer(bool, forced, forced)
		ctf_integer(bool, cmt_miss, cmt_miss)
		ctf_integer(u32, inflight, inflight)
	),

	TP_code_post()
)

/* A dispatched request finished: its slot and dies are free. */
LTTNG_TRACEPOINT_EVENT_CODE(cars_complete,

	TP_PROTO(struct request *rq, pid_t flow, u32 die, u32 ndies,
		 u32 inflight),

	TP_ARGS(rq, flow, die, ndies, inflight),

	TP_locvar_iosched_rq,

	TP_code_pre_iosched_rq,

	TP_FIELDS_iosched_rq(rq->internal_tag,
		ctf_integer(pid_t, flow, flow)
		ctf_integer(u32, die, die)
		ctf_integer(u32, ndies, ndies)
		ctf_integer(u32, inflight, inflight)
	),

	TP_code_post()
)

/* The driver gave a dispatched request back. */
LTTNG_TRACEPOINT_EVENT_CODE(cars_requeue,

	TP_PROTO(struct request *rq, pid_t flow, bool kept, u32 inflight),

	TP_ARGS(rq, flow, kept, inflight),

	TP_locvar_iosched_rq,

	TP_code_pre_iosched_rq,

	TP_FIELDS_iosched_rq(rq->internal_tag,
		ctf_integer(pid_t, flow, flow)
		ctf_integer(bool, kept, kept)
		ctf_integer(u32, inflight, inflight)
	),

	TP_code_post()
)

/* A pick passed over flows' oldest requests. */
LTTNG_TRACEPOINT_EVENT(cars_skip,

	TP_PROTO(struct request_queue *q, pid_t flow, u32 reason, u32 die,
		 u32 skipped, bool dispatched),

	TP_ARGS(q, flow, reason, die, skipped, dispatched),

	TP_FIELDS(
		ctf_integer(dev_t, dev, disk_devt(q->disk))
		ctf_integer(pid_t, flow, flow)
		ctf_integer(u32, reason, reason)
		ctf_integer(u32, die, die)
		ctf_integer(u32, skipped, skipped)
		ctf_integer(bool, dispatched, dispatched)
	)
)

#endif /* LTTNG_TRACE_CARS_H */

#include <lttng/define_trace.h>
