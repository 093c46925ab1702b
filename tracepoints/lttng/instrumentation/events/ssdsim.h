/* SPDX-License-Identifier: GPL-2.0 */
/*
 * LTTng probe definitions of the "ssdsim" trace system: the same events
 * and field names as the kernel tracepoints in
 * tracepoints/trace/events/ssdsim.h (which see for their meaning, and
 * which lttng-probe-ssdsim.c includes first for the op values); op is a
 * CTF enumeration with the names ftrace prints.  The request events begin
 * with the request's fields, as in the kernel's header (iosched-rq.h).
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM ssdsim

#if !defined(LTTNG_TRACE_SSDSIM_H) || defined(TRACE_HEADER_MULTI_READ)
#define LTTNG_TRACE_SSDSIM_H

#include <lttng/tracepoint-event.h>
#include <instrumentation/events/iosched-rq.h>

LTTNG_TRACEPOINT_ENUM(ssdsim_op,
	TP_ENUM_VALUES(
		ctf_enum_value("read", SSDSIM_TRACE_OP_READ)
		ctf_enum_value("program", SSDSIM_TRACE_OP_PROGRAM)
		ctf_enum_value("map_read", SSDSIM_TRACE_OP_MAP_READ)
		ctf_enum_value("map_write", SSDSIM_TRACE_OP_MAP_WRITE)
	)
)

/* A request reached the device and its flash operations are reserved. */
LTTNG_TRACEPOINT_EVENT_CODE(ssdsim_queue,

	TP_PROTO(struct request *rq, u64 arrive_ns, u64 done_ns),

	TP_ARGS(rq, arrive_ns, done_ns),

	TP_locvar_iosched_rq,

	TP_code_pre_iosched_rq,

	TP_FIELDS_iosched_rq(rq->tag,
		ctf_integer(u64, arrive_ns, arrive_ns)
		ctf_integer(u64, done_ns, done_ns)
		ctf_integer(u64, device_ns, done_ns - arrive_ns)
	),

	TP_code_post()
)

/* A request completed. */
LTTNG_TRACEPOINT_EVENT_CODE(ssdsim_complete,

	TP_PROTO(struct request *rq, int error, u64 device_ns, u64 latency_ns),

	TP_ARGS(rq, error, device_ns, latency_ns),

	TP_locvar_iosched_rq,

	TP_code_pre_iosched_rq,

	TP_FIELDS_iosched_rq(rq->tag,
		ctf_integer(int, error, error)
		ctf_integer(u64, device_ns, device_ns)
		ctf_integer(u64, latency_ns, latency_ns)
	),

	TP_code_post()
)

/* A page operation reserved on a die. */
LTTNG_TRACEPOINT_EVENT(ssdsim_die_op,

	TP_PROTO(struct gendisk *disk, u32 die, u32 channel, unsigned int op,
		 u64 start_ns, u64 end_ns),

	TP_ARGS(disk, die, channel, op, start_ns, end_ns),

	TP_FIELDS(
		ctf_integer(dev_t, dev, disk_devt(disk))
		ctf_integer(u32, die, die)
		ctf_integer(u32, channel, channel)
		ctf_enum(ssdsim_op, unsigned int, op, op)
		ctf_integer(u64, start_ns, start_ns)
		ctf_integer(u64, end_ns, end_ns)
	)
)

/* Garbage collection on a die before a host write. */
LTTNG_TRACEPOINT_EVENT(ssdsim_gc,

	TP_PROTO(struct gendisk *disk, u32 die, u32 block, u32 victims,
		 u32 copied, u64 start_ns, u64 end_ns),

	TP_ARGS(disk, die, block, victims, copied, start_ns, end_ns),

	TP_FIELDS(
		ctf_integer(dev_t, dev, disk_devt(disk))
		ctf_integer(u32, die, die)
		ctf_integer(u32, block, block)
		ctf_integer(u32, victims, victims)
		ctf_integer(u32, copied, copied)
		ctf_integer(u64, start_ns, start_ns)
		ctf_integer(u64, end_ns, end_ns)
	)
)

#endif /* LTTNG_TRACE_SSDSIM_H */

#include <lttng/define_trace.h>
