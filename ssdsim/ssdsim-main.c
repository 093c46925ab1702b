// SPDX-License-Identifier: GPL-2.0
/*
 * ssdsim: an emulated flash SSD as a blk-mq block device (/dev/ssdsimN).
 *
 * The device's timing comes from the flash model in ssdsim-model.c (dies
 * on channels, page reads/programs/erases, a page-level FTL with garbage
 * collection, a DRAM write buffer, an optional mapping cache).  The data
 * is kept in memory, one page allocated on first write, so file systems
 * and fio verify work.  Each request is handled in ->queue_rq(): its data
 * is copied at once, the model gives its completion time, and a per-request
 * hrtimer ends it then (as null_blk's timer mode does).  The model's
 * hooks feed the trace system "ssdsim" (tracepoints/trace/events/ssdsim.h).
 *
 * Parameters, sysfs files and the choice of the default time_scale are
 * documented in ssdsim/README.md.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/blkdev.h>
#include <linux/blk-mq.h>
#include <linux/hrtimer.h>
#include <linux/highmem.h>
#include <linux/xarray.h>
#include <linux/slab.h>
#include <linux/log2.h>
#include <linux/sizes.h>
#include <linux/spinlock.h>
#include <linux/atomic.h>

#include "iosched-compat.h"
#include "ssdsim-model.h"

#define CREATE_TRACE_POINTS
#include <trace/events/ssdsim.h>

/* Module parameters, all read-only after load (ssdsim/README.md). */
static unsigned int g_nr_devices = 1;
module_param_named(nr_devices, g_nr_devices, uint, 0444);
MODULE_PARM_DESC(nr_devices, "Number of disks /dev/ssdsimN, 1-16 (default 1)");

static unsigned int g_capacity_mb = 256;
module_param_named(capacity_mb, g_capacity_mb, uint, 0444);
MODULE_PARM_DESC(capacity_mb, "Host-visible capacity of each disk, MiB (default 256)");

static unsigned int g_channels = 4;
module_param_named(channels, g_channels, uint, 0444);
MODULE_PARM_DESC(channels, "Flash channels, 1-64 (default 4)");

static unsigned int g_dies_per_channel = 2;
module_param_named(dies_per_channel, g_dies_per_channel, uint, 0444);
MODULE_PARM_DESC(dies_per_channel, "Dies on each channel, 1-64 (default 2)");

static unsigned int g_page_size = 4096;
module_param_named(page_size, g_page_size, uint, 0444);
MODULE_PARM_DESC(page_size, "Flash page, bytes: power of two, 512-65536 (default 4096)");

static unsigned int g_pages_per_block = 64;
module_param_named(pages_per_block, g_pages_per_block, uint, 0444);
MODULE_PARM_DESC(pages_per_block, "Pages in an erase block, 2-4096 (default 64)");

static unsigned int g_op_percent = 7;
module_param_named(op_percent, g_op_percent, uint, 0444);
MODULE_PARM_DESC(op_percent, "Over-provisioning: spare flash beyond the capacity, percent (default 7)");

static unsigned int g_gc_free_blocks = 2;
module_param_named(gc_free_blocks, g_gc_free_blocks, uint, 0444);
MODULE_PARM_DESC(gc_free_blocks, "GC starts when a die has this many free blocks, 1-64 (default 2)");

static unsigned int g_read_ns = 50000;
module_param_named(read_ns, g_read_ns, uint, 0444);
MODULE_PARM_DESC(read_ns, "Page read (array to register), ns before time_scale (default 50000)");

static unsigned int g_program_ns = 500000;
module_param_named(program_ns, g_program_ns, uint, 0444);
MODULE_PARM_DESC(program_ns, "Page program, ns before time_scale (default 500000)");

static unsigned int g_erase_ns = 3000000;
module_param_named(erase_ns, g_erase_ns, uint, 0444);
MODULE_PARM_DESC(erase_ns, "Block erase, ns before time_scale (default 3000000)");

static unsigned int g_xfer_ns = 10000;
module_param_named(xfer_ns, g_xfer_ns, uint, 0444);
MODULE_PARM_DESC(xfer_ns, "One page over the channel, ns before time_scale (default 10000)");

static unsigned int g_time_scale = 20;
module_param_named(time_scale, g_time_scale, uint, 0444);
MODULE_PARM_DESC(time_scale, "Multiplies every device time, 1-100000 (default 20, for the TCG VM; 1 = real time)");

static unsigned int g_write_buffer_kb = 256;
module_param_named(write_buffer_kb, g_write_buffer_kb, uint, 0444);
MODULE_PARM_DESC(write_buffer_kb, "DRAM write buffer, KiB; 0 = write-through (default 256)");

static unsigned int g_cmt_pages;
module_param_named(cmt_pages, g_cmt_pages, uint, 0444);
MODULE_PARM_DESC(cmt_pages, "Mapping-table cache, translation pages; 0 = whole table in DRAM (default 0)");

static unsigned int g_fill_percent;
module_param_named(fill_percent, g_fill_percent, uint, 0444);
MODULE_PARM_DESC(fill_percent, "Start preconditioned with this share of the capacity valid, percent (default 0)");

static unsigned int g_nr_hw_queues;
module_param_named(nr_hw_queues, g_nr_hw_queues, uint, 0444);
MODULE_PARM_DESC(nr_hw_queues, "Hardware queues; 0 = one per online CPU (default 0)");

static unsigned int g_queue_depth = 64;
module_param_named(queue_depth, g_queue_depth, uint, 0444);
MODULE_PARM_DESC(queue_depth, "Tags per hardware queue, 1-4096 (default 64)");

#define SSDSIM_MAX_DEVICES	16
#define SSDSIM_MAX_SECTORS	256	/* 128 KiB requests */

struct ssdsim_dev {
	struct gendisk *disk;
	struct blk_mq_tag_set tag_set;
	unsigned int page_shift;	/* log2(flash page in sectors) */
	/*
	 * @lock protects @model: the FTL maps, die and channel timelines,
	 * write buffer and statistics change under it in ->queue_rq() and
	 * are read under it by sysfs.  The geometry (model.p, ndies, ...)
	 * is fixed at load and read without it.  irqsave: a bio may be
	 * submitted from a completion handler.
	 */
	spinlock_t lock;
	struct ssdm model;
	/*
	 * @store: the data, PAGE_SIZE pages indexed by sector /
	 * PAGE_SECTORS, allocated on first write.  Its xa_lock (an irq lock)
	 * serialises insertion, removal and every copy to or from a stored
	 * page, so a discard never frees a page a read is copying.
	 */
	struct xarray store;
	atomic_long_t stored_pages;	/* pages in @store */
};

/* Per-request data (tag_set.cmd_size). */
struct ssdsim_cmd {
	struct hrtimer timer;	/* fires at the completion time */
	blk_status_t status;
	u64 arrive_ns;		/* model time of ->queue_rq() */
	u64 done_ns;		/* and of the completion it predicted */
};

/* Set in ssdsim_init() before any disk exists, read-only afterwards. */
static int ssdsim_major;
static struct ssdsim_dev **ssdsim_devs;
static struct ssdm_params ssdsim_params;

/* --- data store ---------------------------------------------------------- */

/* Copy @len bytes (within one store page) at @sector to or from @buf. */
static blk_status_t ssdsim_copy_chunk(struct ssdsim_dev *sd, sector_t sector,
				      void *buf, unsigned int len, bool write)
{
	pgoff_t idx = sector >> PAGE_SECTORS_SHIFT;
	unsigned int off = (sector & (PAGE_SECTORS - 1)) << SECTOR_SHIFT;
	struct page *page, *new = NULL;
	unsigned long flags;

	for (;;) {
		xa_lock_irqsave(&sd->store, flags);
		page = xa_load(&sd->store, idx);
		if (page || !write)
			break;
		if (new) {
			void *old = __xa_store(&sd->store, idx, new,
					       GFP_NOWAIT | __GFP_NOWARN);

			if (xa_is_err(old)) {
				xa_unlock_irqrestore(&sd->store, flags);
				__free_page(new);
				return BLK_STS_RESOURCE;
			}
			atomic_long_inc(&sd->stored_pages);
			page = new;
			new = NULL;
			break;
		}
		xa_unlock_irqrestore(&sd->store, flags);
		new = alloc_page(GFP_NOWAIT | __GFP_NOWARN | __GFP_ZERO);
		if (!new)
			return BLK_STS_RESOURCE;
	}
	if (write)
		memcpy_to_page(page, off, buf, len);
	else if (page)
		memcpy_from_page(buf, page, off, len);
	else
		memset(buf, 0, len);
	xa_unlock_irqrestore(&sd->store, flags);
	if (new)
		__free_page(new);
	return BLK_STS_OK;
}

/*
 * Copy a read or write request's data.  A write that cannot allocate a
 * page returns BLK_STS_RESOURCE and is retried whole by blk-mq (writing
 * the same data again is harmless).
 */
static blk_status_t ssdsim_copy_rq(struct ssdsim_dev *sd, struct request *rq,
				   bool write)
{
	sector_t sector = blk_rq_pos(rq);
	struct req_iterator iter;
	struct bio_vec bv;

	rq_for_each_segment(bv, rq, iter) {
		unsigned int done = 0;
		blk_status_t st = BLK_STS_OK;
		char *buf = bvec_kmap_local(&bv);

		while (done < bv.bv_len) {
			unsigned int off = (sector & (PAGE_SECTORS - 1)) <<
					   SECTOR_SHIFT;
			unsigned int len = min_t(unsigned int,
						 bv.bv_len - done,
						 PAGE_SIZE - off);

			st = ssdsim_copy_chunk(sd, sector, buf + done, len,
					       write);
			if (st)
				break;
			done += len;
			sector += len >> SECTOR_SHIFT;
		}
		kunmap_local(buf);
		if (st)
			return st;
	}
	return BLK_STS_OK;
}

/* Zero sectors [sector, end) of one store page, if it exists. */
static void ssdsim_zero_part(struct ssdsim_dev *sd, sector_t sector,
			     sector_t end)
{
	unsigned int off = (sector & (PAGE_SECTORS - 1)) << SECTOR_SHIFT;
	unsigned long flags;
	struct page *page;

	xa_lock_irqsave(&sd->store, flags);
	page = xa_load(&sd->store, sector >> PAGE_SECTORS_SHIFT);
	if (page)
		memzero_page(page, off, (end - sector) << SECTOR_SHIFT);
	xa_unlock_irqrestore(&sd->store, flags);
}

/* Discard or write zeroes: free the whole pages, zero the partial ones. */
static void ssdsim_discard(struct ssdsim_dev *sd, sector_t sector,
			   unsigned int nr)
{
	sector_t end = sector + nr;
	sector_t head = min_t(sector_t, end, round_up(sector, PAGE_SECTORS));
	sector_t tail = max_t(sector_t, head, round_down(end, PAGE_SECTORS));
	unsigned long idx;
	struct page *page;

	if (sector < head)
		ssdsim_zero_part(sd, sector, head);
	if (tail < end)
		ssdsim_zero_part(sd, tail, end);
	if (head >= tail)
		return;
	/*
	 * Free what xa_erase() returns: it takes the lock, so no copy is
	 * using that page any more.
	 */
	xa_for_each_range(&sd->store, idx, page, head >> PAGE_SECTORS_SHIFT,
			  (tail >> PAGE_SECTORS_SHIFT) - 1) {
		page = xa_erase_irq(&sd->store, idx);
		if (page) {
			atomic_long_dec(&sd->stored_pages);
			__free_page(page);
		}
	}
}

static void ssdsim_free_store(struct ssdsim_dev *sd)
{
	unsigned long idx;
	struct page *page;

	xa_for_each(&sd->store, idx, page)
		__free_page(page);
	xa_destroy(&sd->store);
}

/* --- tracepoints (tracepoints/trace/events/ssdsim.h) -------------------- */

/* The events' op field for each enum ssdm_op. */
static const unsigned int ssdsim_trace_op[] = {
	[SSDM_OP_READ]		= SSDSIM_TRACE_OP_READ,
	[SSDM_OP_PROGRAM]	= SSDSIM_TRACE_OP_PROGRAM,
	[SSDM_OP_MAP_READ]	= SSDSIM_TRACE_OP_MAP_READ,
	[SSDM_OP_MAP_WRITE]	= SSDSIM_TRACE_OP_MAP_WRITE,
};

/* The model's hooks, called under sd->lock as operations are reserved. */
static void ssdsim_trace_die_op(void *priv, u32 die, enum ssdm_op op,
				u64 start, u64 end)
{
	struct ssdsim_dev *sd = priv;

	if (trace_ssdsim_die_op_enabled())	/* spares the division */
		trace_ssdsim_die_op(sd->disk, die,
				    ssdm_die_channel(&sd->model, die),
				    ssdsim_trace_op[op], start, end);
}

static void ssdsim_trace_gc(void *priv, u32 die, u32 victim, u32 victims,
			    u32 copied, u64 start, u64 end)
{
	struct ssdsim_dev *sd = priv;

	trace_ssdsim_gc(sd->disk, die, victim, victims, copied, start, end);
}

/* --- blk-mq -------------------------------------------------------------- */

static void ssdsim_end_request(struct request *rq)
{
	struct ssdsim_cmd *cmd = blk_mq_rq_to_pdu(rq);

	if (trace_ssdsim_complete_enabled())
		trace_ssdsim_complete(rq, blk_status_to_errno(cmd->status),
				      cmd->done_ns - cmd->arrive_ns,
				      ktime_get_ns() - cmd->arrive_ns);
	blk_mq_end_request(rq, cmd->status);
}

static enum hrtimer_restart ssdsim_timer_fn(struct hrtimer *timer)
{
	struct ssdsim_cmd *cmd = container_of(timer, struct ssdsim_cmd, timer);

	ssdsim_end_request(blk_mq_rq_from_pdu(cmd));
	return HRTIMER_NORESTART;
}

static int ssdsim_init_request(struct blk_mq_tag_set *set, struct request *rq,
			       unsigned int hctx_idx,
			       compat_numa_node_t numa_node)
{
	struct ssdsim_cmd *cmd = blk_mq_rq_to_pdu(rq);

	compat_hrtimer_setup(&cmd->timer, ssdsim_timer_fn, CLOCK_MONOTONIC,
			     HRTIMER_MODE_ABS);
	return 0;
}

/* Flash pages [*first, *first + return) that sectors [pos, pos + nr) touch. */
static u32 ssdsim_pages(struct ssdsim_dev *sd, sector_t pos, unsigned int nr,
			u32 *first)
{
	*first = pos >> sd->page_shift;
	if (!nr)
		return 0;
	return ((pos + nr - 1) >> sd->page_shift) - *first + 1;
}

static blk_status_t ssdsim_queue_rq(struct blk_mq_hw_ctx *hctx,
				    const struct blk_mq_queue_data *bd)
{
	struct ssdsim_dev *sd = hctx->queue->queuedata;
	struct request *rq = bd->rq;
	struct ssdsim_cmd *cmd = blk_mq_rq_to_pdu(rq);
	sector_t pos = blk_rq_pos(rq);
	unsigned int nr = blk_rq_sectors(rq);
	enum req_op op = req_op(rq);
	unsigned long flags;
	u32 first, n, spp;
	u64 now, done;

	cmd->status = BLK_STS_OK;
	switch (op) {
	case REQ_OP_READ:
	case REQ_OP_WRITE:
		cmd->status = ssdsim_copy_rq(sd, rq, op == REQ_OP_WRITE);
		if (cmd->status == BLK_STS_RESOURCE)
			return BLK_STS_RESOURCE;
		break;
	case REQ_OP_DISCARD:
	case REQ_OP_WRITE_ZEROES:
		ssdsim_discard(sd, pos, nr);
		break;
	case REQ_OP_FLUSH:
		break;
	default:
		return BLK_STS_NOTSUPP;
	}
	blk_mq_start_request(rq);

	n = ssdsim_pages(sd, pos, nr, &first);
	spin_lock_irqsave(&sd->lock, flags);
	now = ktime_get_ns();
	switch (op) {
	case REQ_OP_READ:
		done = ssdm_read(&sd->model, now, first, n);
		break;
	case REQ_OP_WRITE:
		done = ssdm_write(&sd->model, now, first, n,
				  !!(rq->cmd_flags & REQ_FUA));
		break;
	case REQ_OP_FLUSH:
		done = ssdm_flush(&sd->model, now);
		break;
	default:
		/* only flash pages wholly inside the range are unmapped */
		spp = 1U << sd->page_shift;
		first = (pos + spp - 1) >> sd->page_shift;
		n = (pos + nr) >> sd->page_shift;
		if (n > first)
			ssdm_trim(&sd->model, first, n - first);
		done = now;
		break;
	}
	/* under the lock: right after the request's die operations */
	trace_ssdsim_queue(rq, now, done);
	spin_unlock_irqrestore(&sd->lock, flags);

	cmd->arrive_ns = now;
	cmd->done_ns = done;
	if (done <= now) {
		ssdsim_end_request(rq);
		return BLK_STS_OK;
	}
	hrtimer_start(&cmd->timer, ns_to_ktime(done), HRTIMER_MODE_ABS);
	return BLK_STS_OK;
}

static const struct blk_mq_ops ssdsim_mq_ops = {
	.queue_rq	= ssdsim_queue_rq,
	.init_request	= ssdsim_init_request,
};

static const struct block_device_operations ssdsim_fops = {
	.owner		= THIS_MODULE,
};

/* --- sysfs: /sys/block/ssdsimN/ssdsim/ ----------------------------------- */

static struct ssdsim_dev *ssdsim_from_dev(struct device *dev)
{
	return dev_to_disk(dev)->private_data;
}

/* Geometry and parameters: fixed at load, read without the lock. */
#define SSDSIM_GEO_ATTR(name, expr)					\
static ssize_t name##_show(struct device *dev,				\
			   struct device_attribute *attr, char *buf)	\
{									\
	const struct ssdm *m = &ssdsim_from_dev(dev)->model;		\
									\
	return sysfs_emit(buf, "%llu\n", (unsigned long long)(expr));	\
}									\
static DEVICE_ATTR_RO(name)

SSDSIM_GEO_ATTR(channels, m->p.channels);
SSDSIM_GEO_ATTR(dies_per_channel, m->p.dies_per_channel);
SSDSIM_GEO_ATTR(dies, m->ndies);
SSDSIM_GEO_ATTR(page_size, m->p.page_size);
SSDSIM_GEO_ATTR(pages_per_block, m->p.pages_per_block);
SSDSIM_GEO_ATTR(blocks_per_die, m->blocks_per_die);
SSDSIM_GEO_ATTR(logical_pages, m->lpns);
SSDSIM_GEO_ATTR(physical_pages, m->ppns);
SSDSIM_GEO_ATTR(op_percent, m->p.op_percent);
SSDSIM_GEO_ATTR(gc_free_blocks, m->p.gc_free_blocks);
SSDSIM_GEO_ATTR(read_ns, m->p.read_ns);
SSDSIM_GEO_ATTR(program_ns, m->p.program_ns);
SSDSIM_GEO_ATTR(erase_ns, m->p.erase_ns);
SSDSIM_GEO_ATTR(xfer_ns, m->p.xfer_ns);
SSDSIM_GEO_ATTR(time_scale, m->p.time_scale);
SSDSIM_GEO_ATTR(write_buffer_pages, m->p.buffer_pages);
SSDSIM_GEO_ATTR(cmt_pages, m->p.cmt_pages);
SSDSIM_GEO_ATTR(fill_percent, m->p.fill_percent);

/* Memory holding the data: PAGE_SIZE pages. */
static ssize_t stored_pages_show(struct device *dev,
				 struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%ld\n",
			  atomic_long_read(&ssdsim_from_dev(dev)->stored_pages));
}
static DEVICE_ATTR_RO(stored_pages);

/*
 * The die the next page written goes to (writes are allocated to the dies
 * round-robin): what a host-side scheduler predicting dies (cars's
 * write_pointer) must start from.
 */
static ssize_t write_die_show(struct device *dev,
			      struct device_attribute *attr, char *buf)
{
	struct ssdsim_dev *sd = ssdsim_from_dev(dev);
	unsigned long flags;
	u32 d;

	spin_lock_irqsave(&sd->lock, flags);
	d = sd->model.next_die;
	spin_unlock_irqrestore(&sd->lock, flags);
	return sysfs_emit(buf, "%u\n", d);
}
static DEVICE_ATTR_RO(write_die);

/* Statistics: a snapshot under the lock. */
#define SSDSIM_STAT_ATTR(name, expr)					\
static ssize_t name##_show(struct device *dev,				\
			   struct device_attribute *attr, char *buf)	\
{									\
	struct ssdsim_dev *sd = ssdsim_from_dev(dev);			\
	const struct ssdm_stats *st = &sd->model.st;			\
	unsigned long flags;						\
	u64 v;								\
									\
	spin_lock_irqsave(&sd->lock, flags);				\
	v = (expr);							\
	spin_unlock_irqrestore(&sd->lock, flags);			\
	return sysfs_emit(buf, "%llu\n", v);				\
}									\
static DEVICE_ATTR_RO(name)

SSDSIM_STAT_ATTR(host_read_pages, st->host_read_pages);
SSDSIM_STAT_ATTR(host_write_pages, st->host_write_pages);
SSDSIM_STAT_ATTR(buf_read_hits, st->buf_read_hits);
SSDSIM_STAT_ATTR(pages_programmed, st->pages_programmed);
SSDSIM_STAT_ATTR(write_amp_x1000, ssdm_wa_x1000(st));
SSDSIM_STAT_ATTR(gc_runs, st->gc_runs);
SSDSIM_STAT_ATTR(gc_copies, st->gc_copies);
SSDSIM_STAT_ATTR(erases, st->erases);
SSDSIM_STAT_ATTR(reads_delayed, st->reads_delayed);
SSDSIM_STAT_ATTR(read_delay_ns, st->read_delay_ns);
SSDSIM_STAT_ATTR(buf_stalls, st->buf_stalls);
SSDSIM_STAT_ATTR(buf_stall_ns, st->buf_stall_ns);
SSDSIM_STAT_ATTR(cmt_hits, st->cmt_hits);
SSDSIM_STAT_ATTR(cmt_misses, st->cmt_misses);
SSDSIM_STAT_ATTR(cmt_writebacks, st->cmt_writebacks);
SSDSIM_STAT_ATTR(trimmed_pages, st->trimmed_pages);
SSDSIM_STAT_ATTR(flushes, st->flushes);

enum ssdsim_die_stat { DIE_BUSY_NS, DIE_READS, DIE_PROGRAMS, DIE_ERASES };

/* One value per die, space-separated, die 0 first. */
static ssize_t ssdsim_die_show(struct device *dev, char *buf,
			       enum ssdsim_die_stat which)
{
	struct ssdsim_dev *sd = ssdsim_from_dev(dev);
	struct ssdm *m = &sd->model;
	unsigned long flags;
	int len = 0;
	u32 d;

	for (d = 0; d < m->ndies; d++) {
		u64 v;

		spin_lock_irqsave(&sd->lock, flags);
		switch (which) {
		case DIE_BUSY_NS:
			v = m->die[d].busy_ns;
			break;
		case DIE_READS:
			v = m->die[d].reads;
			break;
		case DIE_PROGRAMS:
			v = m->die[d].programs;
			break;
		default:
			v = m->die[d].erases;
			break;
		}
		spin_unlock_irqrestore(&sd->lock, flags);
		len += sysfs_emit_at(buf, len, "%s%llu", d ? " " : "", v);
	}
	return len + sysfs_emit_at(buf, len, "\n");
}

#define SSDSIM_DIE_ATTR(name, which)					\
static ssize_t name##_show(struct device *dev,				\
			   struct device_attribute *attr, char *buf)	\
{									\
	return ssdsim_die_show(dev, buf, which);			\
}									\
static DEVICE_ATTR_RO(name)

SSDSIM_DIE_ATTR(die_busy_ns, DIE_BUSY_NS);
SSDSIM_DIE_ATTR(die_reads, DIE_READS);
SSDSIM_DIE_ATTR(die_programs, DIE_PROGRAMS);
SSDSIM_DIE_ATTR(die_erases, DIE_ERASES);

/* Transfer time reserved on each channel, space-separated. */
static ssize_t channel_busy_ns_show(struct device *dev,
				    struct device_attribute *attr, char *buf)
{
	struct ssdsim_dev *sd = ssdsim_from_dev(dev);
	struct ssdm *m = &sd->model;
	unsigned long flags;
	int len = 0;
	u32 c;

	for (c = 0; c < m->p.channels; c++) {
		u64 v;

		spin_lock_irqsave(&sd->lock, flags);
		v = m->chan[c].busy_ns;
		spin_unlock_irqrestore(&sd->lock, flags);
		len += sysfs_emit_at(buf, len, "%s%llu", c ? " " : "", v);
	}
	return len + sysfs_emit_at(buf, len, "\n");
}
static DEVICE_ATTR_RO(channel_busy_ns);

static struct attribute *ssdsim_attrs[] = {
	&dev_attr_channels.attr,
	&dev_attr_dies_per_channel.attr,
	&dev_attr_dies.attr,
	&dev_attr_page_size.attr,
	&dev_attr_pages_per_block.attr,
	&dev_attr_blocks_per_die.attr,
	&dev_attr_logical_pages.attr,
	&dev_attr_physical_pages.attr,
	&dev_attr_op_percent.attr,
	&dev_attr_gc_free_blocks.attr,
	&dev_attr_read_ns.attr,
	&dev_attr_program_ns.attr,
	&dev_attr_erase_ns.attr,
	&dev_attr_xfer_ns.attr,
	&dev_attr_time_scale.attr,
	&dev_attr_write_buffer_pages.attr,
	&dev_attr_cmt_pages.attr,
	&dev_attr_fill_percent.attr,
	&dev_attr_host_read_pages.attr,
	&dev_attr_host_write_pages.attr,
	&dev_attr_buf_read_hits.attr,
	&dev_attr_pages_programmed.attr,
	&dev_attr_write_amp_x1000.attr,
	&dev_attr_gc_runs.attr,
	&dev_attr_gc_copies.attr,
	&dev_attr_erases.attr,
	&dev_attr_reads_delayed.attr,
	&dev_attr_read_delay_ns.attr,
	&dev_attr_buf_stalls.attr,
	&dev_attr_buf_stall_ns.attr,
	&dev_attr_cmt_hits.attr,
	&dev_attr_cmt_misses.attr,
	&dev_attr_cmt_writebacks.attr,
	&dev_attr_trimmed_pages.attr,
	&dev_attr_flushes.attr,
	&dev_attr_die_busy_ns.attr,
	&dev_attr_die_reads.attr,
	&dev_attr_die_programs.attr,
	&dev_attr_die_erases.attr,
	&dev_attr_channel_busy_ns.attr,
	&dev_attr_stored_pages.attr,
	&dev_attr_write_die.attr,
	NULL,
};

static const struct attribute_group ssdsim_attr_group = {
	.name	= "ssdsim",
	.attrs	= ssdsim_attrs,
};

static const struct attribute_group *ssdsim_attr_groups[] = {
	&ssdsim_attr_group,
	NULL,
};

/* --- devices ------------------------------------------------------------- */

static void ssdsim_free_dev(struct ssdsim_dev *sd)
{
	ssdsim_free_store(sd);
	ssdm_destroy(&sd->model);
	kfree(sd);
}

static int ssdsim_add(unsigned int index, struct ssdsim_dev **out)
{
	struct compat_disk_limits lim = {
		.logical_block_size	= SECTOR_SIZE,
		.physical_block_size	= min_t(unsigned int, g_page_size,
						PAGE_SIZE),
		.io_min			= g_page_size,
		.max_hw_sectors		= SSDSIM_MAX_SECTORS,
		.max_discard_sectors	= UINT_MAX >> SECTOR_SHIFT,
		.discard_granularity	= g_page_size,
		.write_cache		= true,
		.fua			= true,
	};
	struct ssdsim_dev *sd;
	struct gendisk *disk;
	int ret;

	sd = kzalloc(sizeof(*sd), GFP_KERNEL);
	if (!sd)
		return -ENOMEM;
	sd->page_shift = ilog2(g_page_size) - SECTOR_SHIFT;
	spin_lock_init(&sd->lock);
	xa_init_flags(&sd->store, XA_FLAGS_LOCK_IRQ);
	ret = ssdm_init(&sd->model, &ssdsim_params);
	if (ret) {
		kfree(sd);
		return ret;
	}
	sd->model.hooks = (struct ssdm_hooks) {
		.die_op	= ssdsim_trace_die_op,
		.gc	= ssdsim_trace_gc,
		.priv	= sd,
	};

	sd->tag_set.ops = &ssdsim_mq_ops;
	sd->tag_set.nr_hw_queues = g_nr_hw_queues ? g_nr_hw_queues :
						  num_online_cpus();
	sd->tag_set.queue_depth = g_queue_depth;
	sd->tag_set.numa_node = NUMA_NO_NODE;
	sd->tag_set.cmd_size = sizeof(struct ssdsim_cmd);
	sd->tag_set.flags = COMPAT_BLK_MQ_F_MERGE;
	sd->tag_set.driver_data = sd;
	ret = blk_mq_alloc_tag_set(&sd->tag_set);
	if (ret)
		goto out_model;

	disk = compat_blk_mq_alloc_disk(&sd->tag_set, &lim, sd);
	if (IS_ERR(disk)) {
		ret = PTR_ERR(disk);
		goto out_tags;
	}
	sd->disk = disk;
	disk->major = ssdsim_major;
	disk->first_minor = index;
	disk->minors = 1;
	disk->flags |= GENHD_FL_NO_PART;
	disk->fops = &ssdsim_fops;
	disk->private_data = sd;
	snprintf(disk->disk_name, DISK_NAME_LEN, "ssdsim%u", index);
	set_capacity(disk, (sector_t)sd->model.lpns << sd->page_shift);
	ret = device_add_disk(NULL, disk, ssdsim_attr_groups);
	if (ret)
		goto out_disk;
	*out = sd;
	return 0;

out_disk:
	put_disk(disk);
out_tags:
	blk_mq_free_tag_set(&sd->tag_set);
out_model:
	ssdsim_free_dev(sd);
	return ret;
}

/* Remove an idle disk: del_gendisk() waits for every request to end. */
static void ssdsim_remove(struct ssdsim_dev *sd)
{
	del_gendisk(sd->disk);
	put_disk(sd->disk);
	blk_mq_free_tag_set(&sd->tag_set);
	ssdsim_free_dev(sd);
}

/* The driver's own parameters; the model checks the flash ones. */
static int ssdsim_check_params(void)
{
	const char *why;
	u64 buf_pages;

	if (!g_nr_devices || g_nr_devices > SSDSIM_MAX_DEVICES) {
		pr_err("nr_devices=%u: must be from 1 to %u\n", g_nr_devices,
		       SSDSIM_MAX_DEVICES);
		return -EINVAL;
	}
	if (!g_queue_depth || g_queue_depth > 4096) {
		pr_err("queue_depth=%u: must be from 1 to 4096\n",
		       g_queue_depth);
		return -EINVAL;
	}
	if (g_nr_hw_queues > nr_cpu_ids) {
		pr_err("nr_hw_queues=%u: more than the %u possible CPUs\n",
		       g_nr_hw_queues, nr_cpu_ids);
		return -EINVAL;
	}
	ssdsim_params = (struct ssdm_params) {
		.channels		= g_channels,
		.dies_per_channel	= g_dies_per_channel,
		.page_size		= g_page_size,
		.pages_per_block	= g_pages_per_block,
		.capacity_bytes		= (u64)g_capacity_mb * SZ_1M,
		.op_percent		= g_op_percent,
		.gc_free_blocks		= g_gc_free_blocks,
		.read_ns		= g_read_ns,
		.program_ns		= g_program_ns,
		.erase_ns		= g_erase_ns,
		.xfer_ns		= g_xfer_ns,
		.time_scale		= g_time_scale,
		.cmt_pages		= g_cmt_pages,
		.fill_percent		= g_fill_percent,
	};
	if (ssdm_check_params(&ssdsim_params, &why)) {
		pr_err("invalid parameters (channels=%u dies_per_channel=%u page_size=%u pages_per_block=%u capacity_mb=%u): %s\n",
		       g_channels, g_dies_per_channel, g_page_size,
		       g_pages_per_block, g_capacity_mb, why);
		return -EINVAL;
	}
	buf_pages = (u64)g_write_buffer_kb * SZ_1K / g_page_size;
	if (g_write_buffer_kb &&
	    (!buf_pages || buf_pages > SSDM_MAX_BUFFER_PAGES)) {
		pr_err("write_buffer_kb=%u: must hold 1 to %u pages of %u bytes (or be 0)\n",
		       g_write_buffer_kb, SSDM_MAX_BUFFER_PAGES, g_page_size);
		return -EINVAL;
	}
	ssdsim_params.buffer_pages = (u32)buf_pages;
	return 0;
}

static int __init ssdsim_init(void)
{
	unsigned int i;
	int ret;

	ret = ssdsim_check_params();
	if (ret)
		return ret;
	ssdsim_devs = kcalloc(g_nr_devices, sizeof(*ssdsim_devs), GFP_KERNEL);
	if (!ssdsim_devs)
		return -ENOMEM;
	ret = register_blkdev(0, "ssdsim");
	if (ret < 0)
		goto out_free;
	ssdsim_major = ret;
	for (i = 0; i < g_nr_devices; i++) {
		ret = ssdsim_add(i, &ssdsim_devs[i]);
		if (ret)
			goto out_remove;
	}
	pr_info("%u disk(s) of %u MiB: %u dies on %u channels, time_scale %u\n",
		g_nr_devices, g_capacity_mb, g_channels * g_dies_per_channel,
		g_channels, g_time_scale);
	return 0;

out_remove:
	while (i--)
		ssdsim_remove(ssdsim_devs[i]);
	unregister_blkdev(ssdsim_major, "ssdsim");
out_free:
	kfree(ssdsim_devs);
	return ret;
}

static void __exit ssdsim_exit(void)
{
	unsigned int i;

	for (i = 0; i < g_nr_devices; i++)
		ssdsim_remove(ssdsim_devs[i]);
	unregister_blkdev(ssdsim_major, "ssdsim");
	kfree(ssdsim_devs);
}

module_init(ssdsim_init);
module_exit(ssdsim_exit);

MODULE_DESCRIPTION("ssdsim: an emulated flash SSD (dies, channels, FTL, GC, write buffer)");
MODULE_VERSION(IOSCHED_VERSION);
MODULE_LICENSE("GPL");
