// SPDX-License-Identifier: GPL-2.0
/*
 * LTTng probe for the CARS scheduler's tracepoints: load it (modprobe
 * lttng-probe-cars) and `lttng enable-event -k 'cars_*'` records
 * them.  Built by `make lttng-probes` against the LTTng modules
 * scripts/lttng-modules builds for the same kernel.  LTTng attaches to the
 * tracepoints by name when cars-iosched.ko is loaded: no symbol of it
 * is linked.
 */
#include <linux/module.h>
#include <lttng/tracer.h>

#include <trace/events/cars.h>

#include <wrapper/tracepoint.h>

#define LTTNG_PACKAGE_BUILD
#define CREATE_TRACE_POINTS
#define TRACE_INCLUDE_PATH instrumentation/events

#include <instrumentation/events/cars.h>

MODULE_LICENSE("GPL and additional rights");
MODULE_AUTHOR("ssd-iosched project");
MODULE_DESCRIPTION("LTTng probe for the cars I/O scheduler's events");

/*
 * LTTng attaches each probe to the tracepoint of its name without
 * comparing prototypes: one that differs from the kernel event's (a
 * TP_PROTO changed in trace/events/cars.h alone) would read its
 * arguments wrong.  The kernel header's own checks compare them here, at
 * build time.
 */
static void __maybe_unused cars_check_probe_protos(void)
{
	check_trace_callback_type_cars_insert(__event_probe__cars_insert);
	check_trace_callback_type_cars_dispatch(__event_probe__cars_dispatch);
	check_trace_callback_type_cars_complete(__event_probe__cars_complete);
	check_trace_callback_type_cars_requeue(__event_probe__cars_requeue);
	check_trace_callback_type_cars_skip(__event_probe__cars_skip);
}
