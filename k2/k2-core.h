/* SPDX-License-Identifier: GPL-2.0 */
/*
 * K2 decision logic, kept free of any elevator API so that tests/unit can
 * build it in userspace (with tests/unit/kshim.h) under ASan and UBSan.
 * The elevator glue in k2-iosched.c owns all locking and memory; every
 * function here works on plain values the caller passes in.
 *
 * K2 (Miemietz, Weisse, Haertig: "K2: Work-Constraining Scheduling of NVMe-
 * Attached Storage", RTSS 2019) keeps one staging queue per real-time I/O
 * priority level and one for everything else, serves them in strict
 * priority order and dispatches only while fewer than a bound of requests
 * are in flight in the device.
 */
#ifndef _K2_CORE_H
#define _K2_CORE_H

#ifdef __KERNEL__
#include <linux/types.h>
#include <linux/bitops.h>
#include <linux/ioprio.h>
#else
#include "kshim.h"
#endif

/* Staging queues: RT levels 0..7 (0 is served first), then all others. */
#define K2_NR_RT_QUEUES		8
#define K2_BE_QUEUE		8
#define K2_NR_QUEUES		9
#define K2_ALL_QUEUES_MASK	((1U << K2_NR_QUEUES) - 1)
#define K2_RT_QUEUES_MASK	((1U << K2_NR_RT_QUEUES) - 1)

/* Tunables: default bound, and the largest starvation_ms accepted. */
#define K2_DEFAULT_MAX_INFLIGHT	32U
#define K2_MAX_STARVATION_MS	60000U

/*
 * k2_ioprio_to_queue() - staging queue of an I/O priority value
 *
 * IOPRIO_CLASS_RT level N goes to queue N.  Everything else (BE, IDLE,
 * NONE, and any class the kernel may add) shares K2_BE_QUEUE.  The level is
 * the low bits of the priority data (IOPRIO_PRIO_LEVEL), so the hint bits
 * that newer kernels keep above it do not matter.  The public K2 code
 * derived the level with IOPRIO_PRIO_VALUE(), which put every RT level in
 * the same queue.
 */
static inline unsigned int k2_ioprio_to_queue(unsigned int ioprio)
{
	if (IOPRIO_PRIO_CLASS(ioprio) == IOPRIO_CLASS_RT)
		return IOPRIO_PRIO_LEVEL(ioprio);
	return K2_BE_QUEUE;
}

/*
 * k2_bound() - the bound in force: the max_inflight setting, clamped to the
 * scheduler queue depth (q->nr_requests), and never below one.  Applying the
 * clamp at use rather than when the depth changes lets a setting survive a
 * temporary reduction of nr_requests.
 */
static inline unsigned int k2_bound(unsigned int max_inflight,
				    unsigned long depth)
{
	unsigned int bound = max_inflight;

	if (depth < bound)
		bound = depth;
	return bound ? bound : 1;
}

/*
 * k2_default_rt_tags() - the tags kept for real-time submitters when the
 * elevator starts on a queue with @depth tags per hardware queue: a
 * quarter (64 of the usual 256), the share 6.1's mq-deadline keeps back
 * from asynchronous requests (async_depth).  Stored as a count, so it stays when
 * nr_requests changes (k2_rt_tags() then clamps it).
 */
static inline unsigned int k2_default_rt_tags(unsigned long depth)
{
	return depth / 4;
}

/*
 * k2_rt_tags() - how many of a hardware queue's @depth scheduler tags
 * (q->nr_requests) are kept for real-time submitters: the @setting, but
 * never more than half, so that best effort keeps at least half of them
 * whatever nr_requests later becomes.  k2_be_depth() - how many a
 * submitter that is not real-time may hold: the rest, at least one.
 */
static inline unsigned int k2_rt_tags(unsigned int setting,
				      unsigned long depth)
{
	return setting < depth / 2 ? setting : depth / 2;
}

static inline unsigned int k2_be_depth(unsigned int setting,
				       unsigned long depth)
{
	unsigned long be = depth - k2_rt_tags(setting, depth);

	return be ? be : 1;
}

/*
 * k2_be_wait() - how long the non-RT queue has been starved: the lesser of
 * the age of its oldest request and the time since it was last served.
 * Measured this way, a promotion (k2_pick_queue()) restarts the clock, so
 * a backlogged non-RT queue gets one request ahead of RT per starvation
 * period instead of taking over once its whole backlog has aged.
 */
static inline unsigned long k2_be_wait(unsigned long head_age,
				       unsigned long since_served)
{
	return head_age < since_served ? head_age : since_served;
}

/* k2_pick_queue() results that are not a queue index. */
#define K2_PICK_EMPTY		(-1)
#define K2_PICK_THROTTLED	(-2)

/*
 * k2_pick_queue() - which staging queue to dispatch from
 * @nonempty:	bit i set if staging queue i holds a request
 * @inflight:	requests counted in flight in the device
 * @bound:	the bound in force (k2_bound())
 * @be_wait:	how long K2_BE_QUEUE has been starved (k2_be_wait()), in
 *		any time unit
 * @starve_after: starvation after which its oldest request goes first,
 *		same unit; 0 disables the promotion (strict priority)
 * @promoted:	set when the choice overrode strict priority
 *
 * Returns a queue index, K2_PICK_EMPTY when nothing is queued, or
 * K2_PICK_THROTTLED when requests are queued but the bound is reached.  A
 * bound lowered below @inflight simply keeps returning K2_PICK_THROTTLED
 * until enough requests complete.
 */
static inline int k2_pick_queue(unsigned int nonempty, u32 inflight,
				u32 bound, unsigned long be_wait,
				unsigned long starve_after, bool *promoted)
{
	*promoted = false;
	nonempty &= K2_ALL_QUEUES_MASK;
	if (!nonempty)
		return K2_PICK_EMPTY;
	if (inflight >= bound)
		return K2_PICK_THROTTLED;
	if ((nonempty & (1U << K2_BE_QUEUE)) && (nonempty & K2_RT_QUEUES_MASK) &&
	    starve_after && be_wait >= starve_after) {
		*promoted = true;
		return K2_BE_QUEUE;
	}
	/* the highest priority queued: one instruction, not a loop */
	return __ffs(nonempty);
}

/*
 * The in-flight count: the requests dispatched and not yet completed or
 * requeued, one 32-bit word that the glue changes by compare-and-exchange.
 */

/*
 * k2_inflight_inc() - take a slot: false (and *@new untouched) if @old
 * already counts @bound or more requests.
 */
static inline bool k2_inflight_inc(u32 old, u32 bound, u32 *new)
{
	if (old >= bound)
		return false;
	*new = old + 1;
	return true;
}

/*
 * k2_inflight_dec() - give back a slot.  Never goes below zero: false (and
 * *@new untouched) if @old is already zero, an accounting bug the caller
 * reports.
 */
static inline bool k2_inflight_dec(u32 old, u32 *new)
{
	if (!old)
		return false;
	*new = old - 1;
	return true;
}

/*
 * k2_inflight_recover() - after a stall, the count to put in place of
 * @before, or false to leave it.  The caller read the count (@before), then
 * counted the requests that still exist and hold a slot (@found), then read
 * the count again (@after), with no slot taken meanwhile.  A request gives
 * its slot back before it drops its K2_RQ_COUNTED flag, so unless a slot
 * was given back during the walk (@after != @before, and the device is not
 * stalled after all) every request still holding a slot was found, and
 * the @before - @found others will never give theirs back: they are lost.
 * @found can exceed the truth (a request that gave its slot back before
 * @before and had not yet dropped its flag), never fall short of it; so a
 * recovery never lets more than the bound into the device, at worst it
 * leaves a slot lost until the next one.
 */
static inline bool k2_inflight_recover(u32 before, u32 after, u32 found,
				       u32 *new)
{
	if (after != before || found >= before)
		return false;
	*new = found;
	return true;
}

/*
 * Stall detection, for a count that stays at the bound with nothing left to
 * complete (lost slots).  Dispatch calls k2_stall_check() each time it finds
 * the bound reached; blk-mq re-runs a queue whose elevator has work but
 * dispatches nothing every few milliseconds, so the check keeps being made.
 * Any completion or requeue changes the count, any dispatch the dispatch
 * sequence; when neither has changed for @timeout, the caller looks for
 * the requests that hold the slots (k2_inflight_recover()).  A slow but
 * healthy device, or one hung until its own timeout, holds every slot with
 * a request that exists: nothing is recovered, and the wait starts again.
 */
struct k2_stall {
	u32 count;		/* in-flight count when the wait began */
	u64 seq;		/* dispatch sequence then */
	unsigned long since;	/* time then, same unit as @now */
	bool armed;		/* a wait is being timed */
};

static inline bool k2_stall_check(struct k2_stall *s, u32 count, u64 seq,
				  unsigned long now, unsigned long timeout)
{
	if (!s->armed || s->count != count || s->seq != seq) {
		s->armed = true;
		s->count = count;
		s->seq = seq;
		s->since = now;
		return false;
	}
	return now - s->since >= timeout;
}

static inline void k2_stall_disarm(struct k2_stall *s)
{
	s->armed = false;
}

/*
 * Adaptive bound (sysfs target_latency_us; 0 keeps the fixed bound)
 * ------------------------------------------------------------------
 * Completions of real-time requests record their latency (from the
 * request's allocation to its finish: the wait for a slot and the device
 * time) in a histogram of K2_LAT_BUCKETS log-spaced buckets: values
 * below 8 us have a bucket each, and every power of two above is split in
 * K2_LAT_SUB buckets, so a bucket is at most 1/8 (12.5 %) wide and the
 * estimate k2_lat_value() gives is within about 6 % of any value in it.
 * The last bucket takes everything from about 15.7 s up.
 *
 * The controller (k2_adapt_decide()) runs once per window: a window ends
 * when it holds at least K2_ADAPT_MIN_SAMPLES real-time completions, or
 * K2_ADAPT_EARLY_OVER of them above the target, and is at least twice the
 * target long (so that what it measured was served under the bound it
 * started with).  Three samples above the target put the 99.9th
 * percentile of fewer than 3000 above it (a window holds at most about
 * K2_ADAPT_MIN_SAMPLES), so a window that ends there takes the decision a
 * full one would, a lower bound, sooner: after a rise in background load
 * real-time requests complete far more slowly, and a full window would
 * take seconds.  Three, not one: a stall of the host delays the one or two
 * real-time requests then in flight, and should cost one fall, not two.  Its
 * estimate is the 99.9th percentile (K2_ADAPT_PERMILLE) of the window's
 * samples added to half the previous estimate's histogram, so that it rests
 * on about twice a window's samples (k2_lat_tail()).  With fewer than 1000
 * samples the 99.9th percentile is their largest, and under an exponential
 * tail the largest of 100-200 samples is about the 99.3rd percentile, well
 * below the 99.9th: on ssdsim's random reads beside three best-effort
 * readers, at bound 21, the windows' largest were 29.6-44.1 ms, median
 * 32.6, where the 99.9th percentile of 935 reads was 44.1 (and halving a
 * bucket rounds down, so that a lone slow sample is gone from the fold a
 * window later: the tail of the estimate is one window's).  So below 1000
 * samples the estimate adds to the largest half the tail's extrapolation to
 * the 99.9th percentile: an exponential tail of mean excess m (over the
 * 90th percentile, the mean of about a tenth of the samples, far steadier
 * than any one of them) grows by m * ln(1000 / n) from the largest of n
 * samples to the 99.9th percentile.  Half of it, because where the noise is
 * bounded, as in the simulated plants below, the tail ends at the largest
 * sample, and the whole extrapolation holds the bound far under the best
 * one.  tests/unit/k2_test.c (sim_latency_tail()) holds the estimate to
 * an exponential tail; k2/README.md has its figures.  Then:
 *  - above the target: the bound falls in proportion to the overshoot
 *    (bound * target / estimate, as if latency grew linearly with the
 *    requests in the device), by at least one and at most to half, and
 *    the histogram is cleared: what was measured at the old bound says
 *    nothing about the new one.  A fall on ample evidence (a window with
 *    K2_ADAPT_EARLY_OVER samples or more over the target, 3 % of a full
 *    window and more where 0.1 % are allowed) that follows one doubles
 *    the cut (twice the proportional one, then four times, up to
 *    2^K2_ADAPT_FALLS times, still at most to half): the proportional cut
 *    assumed that latency falls in proportion with the bound, and where a
 *    fixed part dominates (a read behind page programs waits for one
 *    program at bound 1 and for two from 2 up) it falls far less.
 *    (Proportional cuts alone took the bound from 17 to 4 in five
 *    windows, 0.7 each, on ssdsim under random writes against a target
 *    that only bound 1 met.  Doubling after any fall, as TCP's MD,
 *    left the simulated device that gains a fifth per doubling at half
 *    its best bound or below in 35 of 200 settled windows: there a
 *    window's single sample over the target, noise, cuts by one, and the
 *    need is one.)
 *  - at 3/4 of the target or below: it rises halfway toward the bound
 *    that would put the estimate at 3/4 of the target if latency grew
 *    linearly with the bound (bound * 3/4 target / estimate), by one at
 *    least and to twice at most.  Latency grows at most linearly with
 *    the bound (each request in the device adds at most one service time
 *    ahead of a real-time one, on top of a fixed part that does not
 *    grow), so the new bound's estimate stays below 3/4 of the target;
 *    from far below, the bound doubles each window (a slow start, as
 *    TCP's: 1, 2, 4, 8, 16 in four windows).  An estimate that rests on
 *    one window's samples (the first after a fall or the start: fewer
 *    than K2_ADAPT_SETTLED) is near their maximum, a lower percentile
 *    than the 99.9th, and earns a rise of one only.
 *  - otherwise (between 3/4 of the target and the target) it holds, as
 *    it does at max_inflight (a rise that cannot go above it is none).
 * Both moves are proportional, with a dead band in between: a bound
 * that misses the target is cut at once, one that meets it with room to
 * spare climbs toward the band (its last step, of one, slowly, as AIMD's
 * additive increase), and in the band nothing moves, so the bound does
 * not chatter between two values whose latencies straddle the target.  A
 * rise aims at the band's bottom, a quarter below the target, so that
 * only a latency growing faster than the bound, or a window's noise of
 * more than a third, carries it above the target; then the cut brings it
 * back (MD, as TCP and blk-iolatency; the dead band as in kyber's domain
 * tokens that only move when latency is clearly good or bad).
 *
 * A raise must also buy best effort bandwidth (k2_adapt_gain()): where
 * the device is already at its limit (random writes behind page programs
 * give the same bandwidth from bound 2 up) a higher bound only lengthens
 * the real-time tail.  The bandwidth judged is best effort's, what the
 * bound is raised for: on a device whose total is fixed (the paper's
 * throttled one) best effort gains what a real-time job slowed within its
 * target leaves, as the target allows; where the real-time share is small
 * (one writer beside three) that is too little to count.  A climb is judged
 * once it has doubled the bound: the rate (best effort's sectors dispatched
 * per unit of time, k2_adapt_rate()) of the first window at twice the bound
 * the climb started from, or more, is compared with the rate at that base
 * (the mean of its windows, the latest weighing half).  Twice the bound must
 * buy an eighth more bandwidth (12.5 %, an eighth of the proportional
 * gain); a first window that falls short is not enough to undo it: the
 * bound holds for a second window, and the mean of the two is
 * judged.  Failing that, the bound goes back to the base, no raise goes
 * above it for K2_ADAPT_PROBE windows, and then it probes again, since the
 * device or the load may have changed.  A probe that fails from the same
 * base doubles that hold, up to K2_ADAPT_PROBE_MAX windows (until a climb
 * from there or above is kept), so that a saturated device sees one now and
 * then.  The rate of one window varies by 5 to 10 % under a steady load
 * (more in a guest whose host is busy): a step of one (16 to 17, a gain of
 * 6 % at best) cannot be told from noise, where a doubling can.
 *
 * A bound that missed the target is remembered (k2_adapt_miss()): no
 * raise goes to it or above for K2_ADAPT_PROBE windows, and a probe of
 * it that misses again doubles that hold, up to K2_ADAPT_PROBE_MAX
 * windows, so that a bound whose tail is rare is tried now and then, not
 * after every window that looks good.  A window holds about
 * K2_ADAPT_MIN_SAMPLES samples and its estimate about twice that, so
 * where a bound's slowest reads come once in 500 (ssdsim under random
 * writes: most reads of bound 2 within 27 ms, a few at 43-55 ms, against
 * a 37.5 ms target that bound 1 meets) most windows hold none of them:
 * the estimate is then about the 99th percentile, the bound below rose
 * to the one that missed on the next such window, and spent most of the
 * time there, missing the target.  The memory is kept until the bound
 * meets the target for as many windows as it was last held back, so that
 * a probe that meets by luck for a window or two does not reset the
 * back-off.  While it is held back, a raise to it is still let through
 * when the estimate, scaled linearly to it, is at 3/4 of the target or
 * below (the rise's own rule): the load has fallen, and the bound below
 * it measures far less than it did.
 *
 * Both the rise and the band assume that latency grows in proportion to
 * the bound, through the origin.  Where a fixed part dominates (ssdsim's
 * random reads at time_scale 50 in a TCG guest: RT p99.9 10.5 ms at
 * bound 1, 18 ms at 8, 27.4 ms at 16), the estimate at a small bound is
 * already near 3/4 of the target, the rise is one a window, and the band
 * holds the bound far below the best: against a 26 ms target the bound
 * took 16 windows, 20 s, from 1 to 14, and in the k2 suite's 24 s runs
 * adaptive K2 delivered less than bound 8 (4.4 to 5.9 MiB/s against 5.2
 * to 5.8).  So the controller keeps a reference, the lowest bound whose
 * estimate it settled on since the last fall (k2_adapt_slope()), and
 * from twice that bound up it uses the line through the two estimates,
 * the latency's measured slope: a rise goes to where the line reaches
 * 3/4 of the target, if that is higher than the proportional rule's
 * (twice the bound at most), and in the band the bound still rises by
 * one while the line puts the next bound at 7/8 of the target or below,
 * a histogram bucket (1/8) under it.  On the simulated device of that
 * shape (sim_latency_fixed()) the bound reached 3/4 of the best in 8
 * windows and settled at a mean of 12.0 (best 14), where the rules above
 * alone held it at 10 (RT p99.9 of the settled windows 544 and 464 us
 * for a 600 us target).
 *
 * A fall on fewer than K2_ADAPT_EARLY_OVER samples over the target cuts
 * by one, whatever the overshoot (k2_adapt_lone()): with fewer than 1000
 * samples the estimate is near their maximum, and one or two slow requests
 * say that the bound is at the target's edge, not how far above it.  In
 * a TCG guest beside another busy process the whole device stops
 * completing for 93-102 ms every 4-7 s, and the proportional cut halved
 * the bound on each stall (15 to 7, 11 to 5, 8 to 4 in one 24 s run).
 */
#define K2_LAT_SUB_SHIFT	3
#define K2_LAT_SUB		8U	/* 1 << K2_LAT_SUB_SHIFT */
#define K2_LAT_BUCKETS		176
#define K2_ADAPT_MIN_SAMPLES	100U
#define K2_ADAPT_SETTLED	125U	/* more than one window's samples */
#define K2_ADAPT_EARLY_OVER	3U
#define K2_ADAPT_PERMILLE	999U
#define K2_ADAPT_FALLS		4U	/* a cut doubles this often in a row */
#define K2_ADAPT_PROBE		8U	/* windows under a climb that bought nothing */
#define K2_ADAPT_PROBE_MAX	32U	/* ... after failed probes from one base */
#define K2_MAX_TARGET_US	10000000U	/* 10 s */

/* k2_lat_bucket() - the histogram bucket of a latency of @us microseconds */
static inline unsigned int k2_lat_bucket(u64 us)
{
	unsigned int msb, b;

	if (us < K2_LAT_SUB)
		return us;
	msb = fls64(us) - 1;	/* >= K2_LAT_SUB_SHIFT */
	b = (msb - K2_LAT_SUB_SHIFT + 1) * K2_LAT_SUB +
	    ((us >> (msb - K2_LAT_SUB_SHIFT)) & (K2_LAT_SUB - 1));
	return b < K2_LAT_BUCKETS ? b : K2_LAT_BUCKETS - 1;
}

/* k2_lat_value() - the latency (us) bucket @b stands for: its middle */
static inline u64 k2_lat_value(unsigned int b)
{
	unsigned int shift;

	if (b < K2_LAT_SUB)
		return b;
	shift = b / K2_LAT_SUB - 1;
	return ((u64)(K2_LAT_SUB + b % K2_LAT_SUB) << shift) +
	       ((1ULL << shift) >> 1);
}

/*
 * k2_lat_percentile() - the @permille-th per-mille latency (us) of a
 * histogram holding @total samples, 0 if it is empty: the value of the
 * bucket that holds the sample of that rank counted from the top.
 */
static inline u64 k2_lat_percentile(const u32 *hist, u64 total,
				    unsigned int permille)
{
	/* samples above the percentile: the rest, rounded down */
	u64 above = total * (1000 - permille) / 1000, seen = 0;
	int b;

	if (!total)
		return 0;
	for (b = K2_LAT_BUCKETS - 1; b > 0; b--) {
		seen += hist[b];
		if (seen > above)
			return k2_lat_value(b);
	}
	return k2_lat_value(0);
}

/*
 * k2_log2_q8() - log2(@x) in 1/256ths for @x >= 1, the fraction linear
 * between powers of two (at most 0.09 below the true logarithm)
 */
static inline u64 k2_log2_q8(u64 x)
{
	unsigned int i = fls64(x) - 1;

	return (u64)i * 256 + ((x << 8 >> i) - 256);
}

/*
 * k2_lat_tail() - the adaptive estimate (us) of a histogram holding
 * @total samples: its K2_ADAPT_PERMILLE-th per-mille latency, and with
 * fewer than 1000 samples (of which that is the largest) half the growth
 * of an exponential tail from the largest to the 99.9th percentile more:
 * m * ln(1000 / @total) / 2, m the mean excess over the 90th
 * percentile.  Fewer than 20 samples have no tail to measure.
 */
static inline u64 k2_lat_tail(const u32 *hist, u64 total)
{
	u64 top = k2_lat_percentile(hist, total, K2_ADAPT_PERMILLE);
	u64 p90, excess = 0, above = 0, ln;
	unsigned int b;

	if (total < 20 || total >= 1000)
		return top;
	p90 = k2_lat_percentile(hist, total, 900);
	for (b = K2_LAT_BUCKETS - 1; b > 0 && k2_lat_value(b) > p90; b--) {
		excess += (k2_lat_value(b) - p90) * hist[b];
		above += hist[b];
	}
	if (!above)
		return top;
	/* ln(1000 / total) in 1/256ths: log2 times ln 2 (177 / 256) */
	ln = (k2_log2_q8(1000) - k2_log2_q8(total)) * 177 / 256;
	return top + excess / above * ln / (2 * 256);
}

/*
 * k2_lat_fold() - fold a window's histogram @win into the running one
 * @acc, whose counts are halved first; returns the samples @acc now holds.
 */
static inline u64 k2_lat_fold(u32 *acc, const u32 *win)
{
	u64 total = 0;
	unsigned int b;

	for (b = 0; b < K2_LAT_BUCKETS; b++) {
		acc[b] = acc[b] / 2 + win[b];
		total += acc[b];
	}
	return total;
}

/*
 * k2_adapt_window_done() - whether a window that began @elapsed_ns ago and
 * holds @samples real-time completions, @over of them above the target,
 * is complete for @target_us.
 */
static inline bool k2_adapt_window_done(u64 elapsed_ns, u64 samples,
					u64 over, u32 target_us)
{
	return (samples >= K2_ADAPT_MIN_SAMPLES ||
		over >= K2_ADAPT_EARLY_OVER) &&
	       elapsed_ns >= 2000ULL * target_us;
}

/* k2_adapt_decide() results: why the bound moved (or did not). */
enum k2_adapt_reason {
	K2_ADAPT_HOLD,		/* in [3/4 target, target], at max, held */
	K2_ADAPT_DOWN,		/* above the target */
	K2_ADAPT_UP,		/* below 3/4 of it: one more */
	K2_ADAPT_UP_FAST,	/* ... more, toward 3/4 of it */
	K2_ADAPT_IDLE,		/* no real-time requests: max_inflight */
	K2_ADAPT_RETURN,	/* real-time requests again */
	K2_ADAPT_UP_DOUBLE,	/* ... twice (far below it) */
	K2_ADAPT_NO_GAIN,	/* back: the last raise bought no bandwidth */
	K2_ADAPT_NR_REASONS,
};

/*
 * k2_adapt_decide() - the next adaptive bound after a window
 * @bound:	the adaptive bound the window was measured under
 * @max:	the largest it may become (max_inflight)
 * @est_us:	the window's latency estimate
 * @samples:	the samples it rests on (the folded histogram's)
 * @target_us:	the target (non-zero)
 * @falls:	the falls on ample evidence in a row before it, if it has
 *		ample evidence too (k2_adapt_falls()); else 0
 * @next:	the new bound, in [1, @max]
 */
static inline enum k2_adapt_reason k2_adapt_decide(u32 bound, u32 max,
						   u64 est_us, u64 samples,
						   u32 target_us, u32 falls,
						   u32 *next)
{
	enum k2_adapt_reason why;
	u64 t = target_us, n;

	if (bound > max)
		bound = max;
	if (!bound)
		bound = 1;
	*next = bound;
	if (est_us > t) {
		n = (u64)bound * t / est_us;
		if (n >= bound)
			n = bound - 1;
		/* the cut doubles with each fall in a row before it */
		if (falls > K2_ADAPT_FALLS)
			falls = K2_ADAPT_FALLS;
		n = bound - ((bound - n) << falls);
		if (n < bound / 2 || n >= bound)	/* (n wraps) */
			n = bound / 2;
		*next = n ? n : 1;
		return K2_ADAPT_DOWN;
	}
	if (4 * est_us <= 3 * t) {
		/*
		 * halfway to 3/4 of the target, one more at least, twice at
		 * most; one more on an estimate of a single window
		 */
		if (samples < K2_ADAPT_SETTLED)
			n = bound + 1;
		else if (est_us)
			n = ((u64)bound * 3 * t / (4 * est_us) + bound) / 2;
		else
			n = 2 * (u64)bound;
		if (n >= 2 * (u64)bound) {
			n = 2 * (u64)bound;
			why = K2_ADAPT_UP_DOUBLE;
		} else if (n <= bound + 1) {
			n = bound + 1;
			why = K2_ADAPT_UP;
		} else {
			why = K2_ADAPT_UP_FAST;
		}
		if (n > max)
			n = max;
		if (n > bound) {
			*next = n;
			return why;
		}
	}
	return K2_ADAPT_HOLD;
}

/*
 * k2_adapt_falls() - the falls on ample evidence in a row (@falls before)
 * after a window of @over samples over the target and decision @why: a
 * fall on at least K2_ADAPT_EARLY_OVER such samples counts one more, any
 * other decision ends the run (at K2_ADAPT_FALLS, it stays there).
 */
static inline u32 k2_adapt_falls(u32 falls, enum k2_adapt_reason why,
				 u64 over)
{
	if (why != K2_ADAPT_DOWN || over < K2_ADAPT_EARLY_OVER)
		return 0;
	return falls < K2_ADAPT_FALLS ? falls + 1 : K2_ADAPT_FALLS;
}

/*
 * k2_adapt_lone() - the bound after a fall (@why, @next from
 * k2_adapt_decide()) when the window held fewer than K2_ADAPT_EARLY_OVER
 * samples over the target (@over): one less than @bound, whatever the
 * overshoot.  Returns the next bound.
 */
static inline u32 k2_adapt_lone(u32 bound, u64 over,
				enum k2_adapt_reason why, u32 next)
{
	if (why != K2_ADAPT_DOWN || over >= K2_ADAPT_EARLY_OVER || bound <= 1)
		return next;
	return bound - 1;
}

/*
 * k2_adapt_rate() - a window's rate: @sectors dispatched in @ns, in
 * sectors per 1024 ns, times 2^20 (rounded down: within 0.1 % from
 * 0.5 MiB/s up; no overflow below 2^43 sectors a window).
 */
static inline u64 k2_adapt_rate(u64 sectors, u64 ns)
{
	u64 units = ns >> 10;

	return (sectors << 20) / (units ? units : 1);
}

/*
 * k2_adapt_backoff() - the next hold after a failed probe: twice the last
 * one (@probe, 0 if none) up to K2_ADAPT_PROBE_MAX if it failed @again
 * (the same probe as before), else K2_ADAPT_PROBE.
 */
static inline u32 k2_adapt_backoff(u32 probe, bool again)
{
	if (!again || !probe)
		return K2_ADAPT_PROBE;
	return 2 * probe < K2_ADAPT_PROBE_MAX ? 2 * probe : K2_ADAPT_PROBE_MAX;
}

/*
 * The gain check's state (k2_adapt_gain()), between windows.
 */
struct k2_gain {
	u64 rate;	/* k2_adapt_rate() under @base (its windows' mean) */
	u64 first;	/* the first window's rate, while @doubt */
	bool doubt;	/* the climb's first window fell short */
	u32 base;	/* bound the climb being judged started from, or 0 */
	u32 ceiling;	/* no raise above it while @hold */
	u32 hold;	/* windows left under @ceiling */
	u32 probe;	/* last hold's length; 0: a climb from @ceiling kept */
};

/*
 * k2_adapt_no_gain() - undo the climb k2_adapt_gain() judges: *@next no
 * higher than its base, which becomes the ceiling, held for
 * k2_adapt_backoff() windows.
 */
static inline void k2_adapt_no_gain(struct k2_gain *g, u32 *next)
{
	g->probe = k2_adapt_backoff(g->probe, g->ceiling == g->base);
	g->ceiling = g->base;
	g->hold = g->probe;
	if (*next > g->base)
		*next = g->base;
}

/*
 * k2_adapt_gain() - judge a climb, and hold back the next one
 * @g:		state between windows
 * @bound:	the adaptive bound the window was measured under
 * @rate:	its k2_adapt_rate()
 * @why:	k2_adapt_decide()'s reason for the window
 * @next:	k2_adapt_decide()'s next bound, changed if need be
 *
 * Returns the reason in force: @why, K2_ADAPT_NO_GAIN when the climb
 * that led to @bound, twice its base or more, bought less than an eighth
 * more bandwidth over two windows (*@next is then the base), or
 * K2_ADAPT_HOLD when a raise would go above a ceiling still held, or
 * when the climb's first window fell short (*@next is then @bound at
 * most, for the second).  A fall (K2_ADAPT_DOWN) stays one; one that
 * comes while the climb is in doubt undoes it as a failed judgement does
 * (a lone slow request cuts by one only, k2_adapt_lone(), and would
 * leave the bound above a base that did as well, free to rise again);
 * the window after a fall starts a climb.
 */
static inline enum k2_adapt_reason k2_adapt_gain(struct k2_gain *g,
						 u32 bound, u64 rate,
						 enum k2_adapt_reason why,
						 u32 *next)
{
	if (g->hold)
		g->hold--;
	if (why == K2_ADAPT_DOWN) {
		/* a doubted climb that missed: undone, as one that failed */
		if (g->doubt)
			k2_adapt_no_gain(g, next);
		g->base = 0;
		g->doubt = false;
		return why;
	}
	if (!g->base || bound < g->base) {
		g->base = bound;
		g->rate = rate;
		g->doubt = false;
	} else if (bound == g->base) {
		g->rate = (g->rate + rate) / 2;
	} else if (bound >= 2 * (u64)g->base) {
		u64 judged = g->doubt ? (g->first + rate) / 2 : rate;
		bool fell_short = 8 * judged < 9 * g->rate;

		if (fell_short && !g->doubt) {
			/* one window's noise: judged again on the next */
			g->doubt = true;
			g->first = rate;
			if (*next <= bound)
				return why;
			*next = bound;
			return K2_ADAPT_HOLD;
		}
		g->doubt = false;
		if (fell_short) {
			k2_adapt_no_gain(g, next);
			return K2_ADAPT_NO_GAIN;
		}
		if (g->base >= g->ceiling)
			g->probe = 0;
		g->base = bound;
		g->rate = judged;
	}
	if (*next <= bound)
		return why;
	if (g->hold && *next > g->ceiling) {
		if (bound >= g->ceiling) {
			*next = bound;
			return K2_ADAPT_HOLD;
		}
		*next = g->ceiling;
	}
	return why;
}

/*
 * The memory of a bound that missed (k2_adapt_miss()), between windows.
 */
struct k2_miss {
	u32 bound;	/* the last bound that missed; 0: none */
	u32 hold;	/* windows left with no raise to @bound or above */
	u32 probe;	/* the last hold's length */
	u32 met;	/* windows at @bound or above that met it since */
};

/*
 * k2_adapt_miss() - remember a bound that missed, and hold raises below it
 * @m:		state between windows
 * @bound:	the adaptive bound the window was measured under
 * @est_us:	the window's latency estimate
 * @target_us:	the target (non-zero)
 * @why:	the reason so far (k2_adapt_gain()'s)
 * @next:	the next bound so far, changed if need be
 *
 * Returns the reason in force: @why, or K2_ADAPT_HOLD when a raise would
 * reach a bound held back (*@next is then below it, at @bound at least).
 * A fall (K2_ADAPT_DOWN) is never changed: it makes @bound the one
 * remembered, held back for K2_ADAPT_PROBE windows, or for twice its
 * last hold (up to K2_ADAPT_PROBE_MAX) if it was the one remembered.
 */
static inline enum k2_adapt_reason k2_adapt_miss(struct k2_miss *m,
						 u32 bound, u64 est_us,
						 u32 target_us,
						 enum k2_adapt_reason why,
						 u32 *next)
{
	if (m->hold)
		m->hold--;
	if (why == K2_ADAPT_DOWN) {
		m->probe = k2_adapt_backoff(m->probe, bound == m->bound);
		m->bound = bound;
		m->hold = m->probe;
		m->met = 0;
		return why;
	}
	if (!m->bound)
		return why;
	if (bound >= m->bound) {
		/* it met the target there: forgotten once it did so long */
		if (++m->met >= m->probe)
			*m = (struct k2_miss){ 0 };
		return why;
	}
	if (*next < m->bound || !m->hold ||
	    4 * est_us * m->bound <= 3 * (u64)target_us * bound)
		return why;
	*next = m->bound - 1;
	if (*next > bound)
		return why;
	*next = bound;
	return K2_ADAPT_HOLD;
}

/*
 * The slope check's reference (k2_adapt_slope()), between windows.
 */
struct k2_ref {
	u64 est;	/* the estimate under @bound */
	u32 bound;	/* the lowest bound with a settled estimate; 0: none */
};

/*
 * k2_adapt_slope() - rise along the slope measured from a lower bound
 * @r:		state between windows
 * @bound:	the adaptive bound the window was measured under
 * @max:	the largest it may become (max_inflight)
 * @est_us:	the window's latency estimate
 * @samples:	the samples it rests on (the folded histogram's)
 * @target_us:	the target (non-zero)
 * @why:	k2_adapt_decide()'s reason
 * @next:	k2_adapt_decide()'s next bound, raised if need be
 *
 * Returns the reason in force.  With a settled estimate (resting on
 * K2_ADAPT_SETTLED samples or more) at @bound and one at the
 * reference, at most half of it: a rise goes to the bound where the line
 * through the two estimates reaches 3/4 of the target, if that is
 * higher (twice @bound at most, and twice it where the estimate has not
 * grown); a hold in the band below the target becomes a rise of one when
 * that line puts the next bound's estimate at 7/8 of the target or
 * below.  A fall forgets the reference; a settled estimate at the
 * reference's bound or below becomes it.
 */
static inline enum k2_adapt_reason k2_adapt_slope(struct k2_ref *r,
						  u32 bound, u32 max,
						  u64 est_us, u64 samples,
						  u32 target_us,
						  enum k2_adapt_reason why,
						  u32 *next)
{
	bool settled = samples >= K2_ADAPT_SETTLED;
	/* a line through the reference's estimate and this one */
	bool line = settled && r->bound && 2 * (u64)r->bound <= bound;
	u64 n, t = target_us;

	if (why == K2_ADAPT_DOWN) {
		r->bound = 0;
		return why;
	}
	if ((why == K2_ADAPT_UP || why == K2_ADAPT_UP_FAST) && line) {
		if (est_us <= r->est)
			n = 2 * (u64)bound;
		else
			n = bound + (3 * t - 4 * est_us) * (bound - r->bound) /
				    (4 * (est_us - r->est));
		if (n > 2 * (u64)bound)
			n = 2 * (u64)bound;
		if (n > max)
			n = max;
		if (n > *next) {
			*next = n;
			why = n == 2 * (u64)bound ? K2_ADAPT_UP_DOUBLE :
						     K2_ADAPT_UP_FAST;
		}
	}
	if (why == K2_ADAPT_HOLD && line && est_us > r->est && bound < max &&
	    8 * (est_us + (est_us - r->est) / (bound - r->bound)) <= 7 * t) {
		*next = bound + 1;
		why = K2_ADAPT_UP;
	}
	if (settled && (!r->bound || bound <= r->bound)) {
		r->bound = bound;
		r->est = est_us;
	}
	return why;
}

/*
 * k2_adapt_in_force() - the bound the adaptive controller puts in force:
 * max_inflight while no real-time request is around (@idle), else its
 * own bound, never above max_inflight.  k2_bound() then clamps it to the
 * queue depth like any setting.
 */
static inline u32 k2_adapt_in_force(u32 adaptive, u32 max_inflight,
				    bool idle)
{
	if (idle || adaptive > max_inflight)
		return max_inflight;
	return adaptive ? adaptive : 1;
}

/*
 * Per-request state, kept in rq->elv.priv[0]: the staging queue index and
 * three flags.
 */
#define K2_RQ_QUEUE_MASK	0x0fUL
#define K2_RQ_QUEUED		0x10UL	/* on a staging queue */
#define K2_RQ_ON_RB		0x20UL	/* on its queue's sector-sorted tree */
#define K2_RQ_COUNTED		0x40UL	/* holds a slot of the in-flight count */

static inline unsigned int k2_rq_state_queue(unsigned long state)
{
	unsigned int idx = state & K2_RQ_QUEUE_MASK;

	return idx < K2_NR_QUEUES ? idx : K2_BE_QUEUE;
}

#endif /* _K2_CORE_H */
