/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The request fields that the trace systems "k2", "flashfq", "cars" and
 * "ssdsim" put first in each request event, written once, as
 * include/trace/events/btrfs.h writes the fields its events share: a
 * request event gives its own fields to TP_STRUCT__entry_iosched_rq(),
 * TP_fast_assign_iosched_rq() and TP_printk_iosched_rq(), which put these
 * before them.
 *
 * dev: the disk (major,minor); sector, nr_sector: where the request starts
 * and its length, in 512-byte sectors; hctx: its hardware queue; tag: the
 * scheduler tag (rq->internal_tag) in the schedulers' systems, the driver
 * tag (rq->tag) in "ssdsim"'s; rwbs: its operation and flags as the block
 * layer's events print them.  A request is (dev, hctx, tag) while it
 * lives.  Printed: "MAJ,MIN hctx=H tag=T RWBS SECTOR+NR ", then the
 * event's own format (scripts/trace-report parses it).
 *
 * The macros read the event's request argument by its name, rq.  They
 * have an include guard of their own: they only name TP_STRUCT__entry(),
 * __field() and the others, so every pass of <trace/define_trace.h> over
 * a system's header expands them with that pass's definitions.
 * tracepoints/lttng/instrumentation/events/iosched-rq.h records the same
 * fields for LTTng.
 */
#ifndef _TRACE_IOSCHED_RQ_H
#define _TRACE_IOSCHED_RQ_H

#include <linux/blkdev.h>
#include <linux/blk-mq.h>
#include <linux/blktrace_api.h>

/* Size of the rwbs field: the block layer's events' RWBS_LEN */
#define IOSCHED_RQ_RWBS_LEN	8

#define TP_STRUCT__entry_iosched_rq(args...)				\
	TP_STRUCT__entry(						\
		__field(dev_t,		dev)				\
		__field(sector_t,	sector)				\
		__field(unsigned int,	nr_sector)			\
		__field(unsigned int,	hctx)				\
		__field(int,		tag)				\
		__array(char,		rwbs,	IOSCHED_RQ_RWBS_LEN)	\
		args)

/* rq_tag: the tag the system identifies the request by */
#define TP_fast_assign_iosched_rq(rq_tag, args...)			\
	TP_fast_assign(							\
		__entry->dev = disk_devt(rq->q->disk);			\
		__entry->sector = blk_rq_pos(rq);			\
		__entry->nr_sector = blk_rq_sectors(rq);		\
		__entry->hctx = rq->mq_hctx->queue_num;			\
		__entry->tag = rq_tag;					\
		blk_fill_rwbs(__entry->rwbs, rq->cmd_flags);		\
		args)

#define TP_printk_iosched_rq(fmt, args...)				\
	TP_printk("%d,%d hctx=%u tag=%d %s %llu+%u " fmt,		\
		  MAJOR(__entry->dev), MINOR(__entry->dev),		\
		  __entry->hctx, __entry->tag, __entry->rwbs,		\
		  (unsigned long long)__entry->sector, __entry->nr_sector, \
		  args)

#endif /* _TRACE_IOSCHED_RQ_H */
