/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The request fields of tracepoints/trace/events/iosched-rq.h (which see
 * for their meaning) as LTTng fields, with the same names and types: an
 * LTTNG_TRACEPOINT_EVENT_CODE() of a request event of "k2", "flashfq",
 * "cars" or "ssdsim" takes TP_locvar_iosched_rq and TP_code_pre_iosched_rq
 * (rwbs is filled into a local variable first) and gives its own fields to
 * TP_FIELDS_iosched_rq(), which records the request's before them.
 *
 * The macros read the event's request argument by its name, rq.  An
 * include guard of its own, as the kernel's: each of LTTng's passes over
 * a system's header expands them with that pass's definitions.
 */
#ifndef LTTNG_TRACE_IOSCHED_RQ_H
#define LTTNG_TRACE_IOSCHED_RQ_H

#include <trace/events/iosched-rq.h>

#define TP_locvar_iosched_rq						\
	TP_locvar(char rwbs[IOSCHED_RQ_RWBS_LEN];)

#define TP_code_pre_iosched_rq						\
	TP_code_pre(blk_fill_rwbs(tp_locvar->rwbs, rq->cmd_flags);)

/* rq_tag: the tag the system identifies the request by */
#define TP_FIELDS_iosched_rq(rq_tag, args...)				\
	TP_FIELDS(							\
		ctf_integer(dev_t, dev, disk_devt(rq->q->disk))		\
		ctf_integer(sector_t, sector, blk_rq_pos(rq))		\
		ctf_integer(unsigned int, nr_sector, blk_rq_sectors(rq)) \
		ctf_integer(unsigned int, hctx, rq->mq_hctx->queue_num)	\
		ctf_integer(int, tag, rq_tag)				\
		ctf_array_text(char, rwbs, tp_locvar->rwbs,		\
			       IOSCHED_RQ_RWBS_LEN)			\
		args)

#endif /* LTTNG_TRACE_IOSCHED_RQ_H */
