/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Trace system "ssdsim": the emulated flash SSD's requests and the flash
 * operations its model reserves for them (ssdsim/README.md, "Tracepoints").
 *
 * Every *_ns field that is a point in time (arrive_ns, done_ns, start_ns,
 * end_ns) is on the model's clock, ktime_get_ns() (CLOCK_MONOTONIC, the
 * "mono" trace clock), and is known when the request arrives: a die
 * operation is traced when it is reserved, so its start and end usually
 * lie in the future of the event's timestamp.  Durations are ns.  Sectors
 * are 512-byte units, rwbs as in the block layer's events; a request is
 * (dev, hctx, tag) while it lives (tag: the driver tag), and its events
 * begin with these fields (iosched-rq.h).  Each event is a static-key
 * tracepoint: a disabled one costs a patched branch.  LTTng probes for the
 * same events are in tracepoints/lttng/.  Adding a field here means adding
 * it there too.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM ssdsim

#if !defined(_TRACE_SSDSIM_H) || defined(TRACE_HEADER_MULTI_READ)
#define _TRACE_SSDSIM_H

#include <linux/tracepoint.h>
#include <trace/events/iosched-rq.h>

/* The op field of ssdsim_die_op (ssdsim-main.c maps enum ssdm_op). */
#define SSDSIM_TRACE_OP_READ		0	/* host page read */
#define SSDSIM_TRACE_OP_PROGRAM		1	/* page program */
#define SSDSIM_TRACE_OP_MAP_READ	2	/* translation page read */
#define SSDSIM_TRACE_OP_MAP_WRITE	3	/* translation page written back */

#define ssdsim_show_op(op)						\
	__print_symbolic(op,						\
			 { SSDSIM_TRACE_OP_READ,	"read" },	\
			 { SSDSIM_TRACE_OP_PROGRAM,	"program" },	\
			 { SSDSIM_TRACE_OP_MAP_READ,	"map_read" },	\
			 { SSDSIM_TRACE_OP_MAP_WRITE,	"map_write" })

/*
 * A request reached the device and its flash operations are reserved:
 * it arrived at arrive_ns and will complete at done_ns (device_ns =
 * done_ns - arrive_ns; 0 for a discard or a request served from the
 * write buffer at once).  The request's ssdsim_die_op and ssdsim_gc events
 * come just before it, under the same lock.
 */
TRACE_EVENT(ssdsim_queue,

	TP_PROTO(struct request *rq, u64 arrive_ns, u64 done_ns),

	TP_ARGS(rq, arrive_ns, done_ns),

	TP_STRUCT__entry_iosched_rq(
		__field(u64,		arrive_ns)
		__field(u64,		done_ns)
		__field(u64,		device_ns)
	),

	TP_fast_assign_iosched_rq(rq->tag,
		__entry->arrive_ns = arrive_ns;
		__entry->done_ns = done_ns;
		__entry->device_ns = done_ns - arrive_ns;
	),

	TP_printk_iosched_rq("arrive_ns=%llu done_ns=%llu device_ns=%llu",
		  (unsigned long long)__entry->arrive_ns,
		  (unsigned long long)__entry->done_ns,
		  (unsigned long long)__entry->device_ns)
);

/*
 * A request completed.  error: its errno (0 or negative); device_ns: the
 * model's device time (as in ssdsim_queue); latency_ns: measured, from
 * its arrival to this completion (the timer's lateness is the rest).
 */
TRACE_EVENT(ssdsim_complete,

	TP_PROTO(struct request *rq, int error, u64 device_ns, u64 latency_ns),

	TP_ARGS(rq, error, device_ns, latency_ns),

	TP_STRUCT__entry_iosched_rq(
		__field(int,		error)
		__field(u64,		device_ns)
		__field(u64,		latency_ns)
	),

	TP_fast_assign_iosched_rq(rq->tag,
		__entry->error = error;
		__entry->device_ns = device_ns;
		__entry->latency_ns = latency_ns;
	),

	TP_printk_iosched_rq("error=%d device_ns=%llu latency_ns=%llu",
		  __entry->error, (unsigned long long)__entry->device_ns,
		  (unsigned long long)__entry->latency_ns)
);

/*
 * A page operation reserved on a die, occupying it from start_ns to
 * end_ns (a read: array read and transfer out; a program: transfer in and
 * array program; waits for the channel included).
 */
TRACE_EVENT(ssdsim_die_op,

	TP_PROTO(struct gendisk *disk, u32 die, u32 channel, unsigned int op,
		 u64 start_ns, u64 end_ns),

	TP_ARGS(disk, die, channel, op, start_ns, end_ns),

	TP_STRUCT__entry(
		__field(dev_t,		dev)
		__field(u32,		die)
		__field(u32,		channel)
		__field(unsigned int,	op)
		__field(u64,		start_ns)
		__field(u64,		end_ns)
	),

	TP_fast_assign(
		__entry->dev = disk_devt(disk);
		__entry->die = die;
		__entry->channel = channel;
		__entry->op = op;
		__entry->start_ns = start_ns;
		__entry->end_ns = end_ns;
	),

	TP_printk("%d,%d die=%u channel=%u op=%s start_ns=%llu end_ns=%llu",
		  MAJOR(__entry->dev), MINOR(__entry->dev),
		  __entry->die, __entry->channel, ssdsim_show_op(__entry->op),
		  (unsigned long long)__entry->start_ns,
		  (unsigned long long)__entry->end_ns)
);

/*
 * Garbage collection on a die before a host write: victims blocks
 * collected (block: the last one, a device-wide block index), copied
 * valid pages moved (copybacks inside the die), then the erases; the die
 * is busy with it from start_ns to end_ns.
 */
TRACE_EVENT(ssdsim_gc,

	TP_PROTO(struct gendisk *disk, u32 die, u32 block, u32 victims,
		 u32 copied, u64 start_ns, u64 end_ns),

	TP_ARGS(disk, die, block, victims, copied, start_ns, end_ns),

	TP_STRUCT__entry(
		__field(dev_t,		dev)
		__field(u32,		die)
		__field(u32,		block)
		__field(u32,		victims)
		__field(u32,		copied)
		__field(u64,		start_ns)
		__field(u64,		end_ns)
	),

	TP_fast_assign(
		__entry->dev = disk_devt(disk);
		__entry->die = die;
		__entry->block = block;
		__entry->victims = victims;
		__entry->copied = copied;
		__entry->start_ns = start_ns;
		__entry->end_ns = end_ns;
	),

	TP_printk("%d,%d die=%u block=%u victims=%u copied=%u start_ns=%llu end_ns=%llu",
		  MAJOR(__entry->dev), MINOR(__entry->dev),
		  __entry->die, __entry->block, __entry->victims,
		  __entry->copied, (unsigned long long)__entry->start_ns,
		  (unsigned long long)__entry->end_ns)
);

#endif /* _TRACE_SSDSIM_H */

/* This part must be outside protection */
#include <trace/define_trace.h>
