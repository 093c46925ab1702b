// SPDX-License-Identifier: GPL-2.0
/*
 * LTTng probe for the ssdsim driver's tracepoints: load it (modprobe
 * lttng-probe-ssdsim) and `lttng enable-event -k 'ssdsim_*'` records
 * them.  Built by `make lttng-probes` against the LTTng modules
 * scripts/lttng-modules builds for the same kernel.  LTTng attaches to
 * the tracepoints by name when ssdsim.ko is loaded: no symbol of it is
 * linked.
 */
#include <linux/module.h>
#include <lttng/tracer.h>

#include <trace/events/ssdsim.h>

#include <wrapper/tracepoint.h>

#define LTTNG_PACKAGE_BUILD
#define CREATE_TRACE_POINTS
#define TRACE_INCLUDE_PATH instrumentation/events

#include <instrumentation/events/ssdsim.h>

MODULE_LICENSE("GPL and additional rights");
MODULE_AUTHOR("ssd-iosched project");
MODULE_DESCRIPTION("LTTng probe for the ssdsim block driver's events");
