// SPDX-License-Identifier: GPL-2.0
/*
 * LTTng probe for the K2 scheduler's tracepoints: load it (modprobe
 * lttng-probe-k2) and `lttng enable-event -k 'k2_*'` records them.  Built
 * by `make lttng-probes` against the LTTng modules scripts/lttng-modules
 * builds for the same kernel.
 */
#include <linux/module.h>
#include <lttng/tracer.h>

#include <trace/events/k2.h>

#include <wrapper/tracepoint.h>

#define LTTNG_PACKAGE_BUILD
#define CREATE_TRACE_POINTS
#define TRACE_INCLUDE_PATH instrumentation/events

#include <instrumentation/events/k2.h>

MODULE_LICENSE("GPL and additional rights");
MODULE_AUTHOR("ssd-iosched project");
MODULE_DESCRIPTION("LTTng probe for the k2 I/O scheduler's events");
