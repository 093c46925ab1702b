// SPDX-License-Identifier: GPL-2.0
/*
 * LTTng probe for the FlashFQ scheduler's tracepoints: load it (modprobe
 * lttng-probe-flashfq) and `lttng enable-event -k 'flashfq_*'` records
 * them.  Built by `make lttng-probes` against the LTTng modules
 * scripts/lttng-modules builds for the same kernel.  LTTng attaches to the
 * tracepoints by name when flashfq-iosched.ko is loaded: no symbol of it
 * is linked.
 */
#include <linux/module.h>
#include <lttng/tracer.h>

#include <trace/events/flashfq.h>

#include <wrapper/tracepoint.h>

#define LTTNG_PACKAGE_BUILD
#define CREATE_TRACE_POINTS
#define TRACE_INCLUDE_PATH instrumentation/events

#include <instrumentation/events/flashfq.h>

MODULE_LICENSE("GPL and additional rights");
MODULE_AUTHOR("ssd-iosched project");
MODULE_DESCRIPTION("LTTng probe for the flashfq I/O scheduler's events");

/*
 * LTTng attaches each probe to the tracepoint of its name without
 * comparing prototypes: one that differs from the kernel event's (a
 * TP_PROTO changed in trace/events/flashfq.h alone) would read its
 * arguments wrong.  The kernel header's own checks compare them here, at
 * build time; an event class's instances share its probe.
 */
static void __maybe_unused flashfq_check_probe_protos(void)
{
	check_trace_callback_type_flashfq_insert(__event_probe__flashfq_insert);
	check_trace_callback_type_flashfq_dispatch(__event_probe__flashfq_dispatch);
	check_trace_callback_type_flashfq_complete(__event_probe__flashfq_complete);
	check_trace_callback_type_flashfq_requeue(__event_probe__flashfq_requeue);
	check_trace_callback_type_flashfq_throttled(__event_probe__flashfq_throttled);
	check_trace_callback_type_flashfq_antic_start(__event_probe__flashfq_antic);
	check_trace_callback_type_flashfq_antic_expire(__event_probe__flashfq_antic);
	check_trace_callback_type_flashfq_antic_cancel(__event_probe__flashfq_antic);
	check_trace_callback_type_flashfq_vtime(__event_probe__flashfq_vtime);
	check_trace_callback_type_flashfq_cost(__event_probe__flashfq_cost);
}
