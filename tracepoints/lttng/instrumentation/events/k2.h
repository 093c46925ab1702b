/* SPDX-License-Identifier: GPL-2.0 */
/*
 * LTTng probe definitions of the "k2" trace system: the same events and
 * field names as the kernel tracepoints in tracepoints/trace/events/k2.h
 * (which see for their meaning), so that scripts/trace-report reads an
 * LTTng trace and an ftrace trace alike.  The request events begin with
 * the request's fields, as in the kernel's header (iosched-rq.h).
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM k2

#if !defined(LTTNG_TRACE_K2_H) || defined(TRACE_HEADER_MULTI_READ)
#define LTTNG_TRACE_K2_H

#include <lttng/tracepoint-event.h>
#include <linux/ioprio.h>
#include <instrumentation/events/iosched-rq.h>

/* A request entered a staging queue. */
LTTNG_TRACEPOINT_EVENT_CODE(k2_insert,

	TP_PROTO(struct request *rq, unsigned int queue, bool at_head),

	TP_ARGS(rq, queue, at_head),

	TP_locvar_iosched_rq,

	TP_code_pre_iosched_rq,

	TP_FIELDS_iosched_rq(rq->internal_tag,
		ctf_integer(unsigned int, queue, queue)
		ctf_integer(unsigned int, ioprio_class,
			    IOPRIO_PRIO_CLASS(req_get_ioprio(rq)))
		ctf_integer(unsigned int, ioprio_level,
			    IOPRIO_PRIO_LEVEL(req_get_ioprio(rq)))
		ctf_integer(int, at_head, at_head)
		ctf_integer(pid_t, pid, current->pid)
		ctf_array_text(char, comm, current->comm, TASK_COMM_LEN)
	),

	TP_code_post()
)

/* A request left its staging queue for the device. */
LTTNG_TRACEPOINT_EVENT_CODE(k2_dispatch,

	TP_PROTO(struct request *rq, unsigned int queue, u64 staged_ns,
		 unsigned int inflight, bool promoted),

	TP_ARGS(rq, queue, staged_ns, inflight, promoted),

	TP_locvar_iosched_rq,

	TP_code_pre_iosched_rq,

	TP_FIELDS_iosched_rq(rq->internal_tag,
		ctf_integer(unsigned int, queue, queue)
		ctf_integer(u64, staged_ns, staged_ns)
		ctf_integer(unsigned int, inflight, inflight)
		ctf_integer(int, promoted, promoted)
	),

	TP_code_post()
)

/* A dispatched request finished. */
LTTNG_TRACEPOINT_EVENT_CODE(k2_complete,

	TP_PROTO(struct request *rq, unsigned int queue, u64 device_ns,
		 unsigned int inflight),

	TP_ARGS(rq, queue, device_ns, inflight),

	TP_locvar_iosched_rq,

	TP_code_pre_iosched_rq,

	TP_FIELDS_iosched_rq(rq->internal_tag,
		ctf_integer(unsigned int, queue, queue)
		ctf_integer(u64, device_ns, device_ns)
		ctf_integer(unsigned int, inflight, inflight)
	),

	TP_code_post()
)

/* The driver gave a dispatched request back. */
LTTNG_TRACEPOINT_EVENT_CODE(k2_requeue,

	TP_PROTO(struct request *rq, unsigned int queue, unsigned int inflight),

	TP_ARGS(rq, queue, inflight),

	TP_locvar_iosched_rq,

	TP_code_pre_iosched_rq,

	TP_FIELDS_iosched_rq(rq->internal_tag,
		ctf_integer(unsigned int, queue, queue)
		ctf_integer(unsigned int, inflight, inflight)
	),

	TP_code_post()
)

/* Dispatch held queued requests back: the bound is reached. */
LTTNG_TRACEPOINT_EVENT(k2_throttled,

	TP_PROTO(struct request_queue *q, unsigned int inflight,
		 unsigned int bound, unsigned int queued),

	TP_ARGS(q, inflight, bound, queued),

	TP_FIELDS(
		ctf_integer(dev_t, dev, disk_devt(q->disk))
		ctf_integer(unsigned int, inflight, inflight)
		ctf_integer(unsigned int, bound, bound)
		ctf_integer(unsigned int, queued, queued)
	)
)

/* Anti-starvation: a non-RT request goes ahead of queued RT requests. */
LTTNG_TRACEPOINT_EVENT_CODE(k2_promote,

	TP_PROTO(struct request *rq, u64 waited_ns),

	TP_ARGS(rq, waited_ns),

	TP_locvar_iosched_rq,

	TP_code_pre_iosched_rq,

	TP_FIELDS_iosched_rq(rq->internal_tag,
		ctf_integer(unsigned int, queue, 8)
		ctf_integer(u64, waited_ns, waited_ns)
	),

	TP_code_post()
)

/* The adaptive bound changed or held (reason: enum k2_adapt_reason). */
LTTNG_TRACEPOINT_EVENT(k2_adjust,

	TP_PROTO(struct request_queue *q, unsigned int old, unsigned int new,
		 unsigned int est_us, unsigned int samples, unsigned int reason),

	TP_ARGS(q, old, new, est_us, samples, reason),

	TP_FIELDS(
		ctf_integer(dev_t, dev, disk_devt(q->disk))
		ctf_integer(unsigned int, old, old)
		ctf_integer(unsigned int, new, new)
		ctf_integer(unsigned int, est_us, est_us)
		ctf_integer(unsigned int, samples, samples)
		ctf_integer(unsigned int, reason, reason)
	)
)

#endif /* LTTNG_TRACE_K2_H */

#include <lttng/define_trace.h>
