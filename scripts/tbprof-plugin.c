// SPDX-License-Identifier: GPL-2.0
/*
 * QEMU TCG plugin for scripts/tbprof.py: how many times each translated
 * block ran, written out on demand.
 *
 * Every block gets an execution callback that counts into an entry keyed
 * by its guest virtual address and instruction count (a block translated
 * again finds its entry).  Blocks that end in a return or an indirect jump
 * or call, which QEMU leaves through a lookup of the next block, are
 * listed once each as "ind VADDR_HEX NR_INSNS".  A thread watches a trigger file (argument
 * trigger=PATH); when it appears, its first line names an output file,
 * which gets one line per block that ran, "VADDR_HEX NR_INSNS COUNT",
 * written under another name and renamed into place; then the trigger is
 * removed.  The difference of two snapshots is what the guest ran between
 * them, exactly (the callbacks do not change the guest's instructions).
 * A block left for one that starts on another page than its own start,
 * by a direct jump, call or fall-through, is counted too ("pex VADDR_HEX
 * NR_INSNS COUNT" lines): in system emulation QEMU chains a block to the
 * next only within the page it starts on (translator_use_goto_tb()), so
 * such an exit, like an indirect one, looks the next block up.  Each vCPU
 * remembers the block it ran last; an interrupt taken between two blocks
 * counts as such an exit of the first.
 * Meant for one vCPU (the counts are not atomic), unless the argument
 * smp=on is given: then each count is a relaxed atomic add, for guests
 * on several vCPUs under multi-threaded TCG, where the vCPU threads run
 * the same blocks at once (slower: the adds contend on the host).
 *
 * With the argument locks=on it also follows the guest's spinlocks, for
 * tbprof --locks.  The trigger's first line is then either an output file
 * or "locks", followed by "VADDR_HEX CODE" lines naming the entry of each
 * lock primitive (1 takes a lock, 2 tries to, 3 releases one).  At the
 * entry of a primitive the callback reads RDI (the lock), the return
 * address at RSP (the call site) and EFLAGS.IF (were interrupts off
 * already); a lock's record is closed when a release names the same lock,
 * and the vCPU's instructions in between (a per-vCPU count of the blocks
 * run) are its hold.  Snapshots then also carry one line per (call site,
 * lock, primitive): "lock SITE LOCK PRIMITIVE ACQUISITIONS HELD IRQOFF",
 * one per atomic read-modify-write instruction (a lock prefix, or the DS
 * prefix that the kernel patches lock prefixes into on one CPU, or xchg
 * with memory): "atomic VADDR EXECUTIONS OTHER LINE:HITS...", the cache
 * lines it touched (the first four; OTHER counts the accesses to more),
 * and "unmatched RELEASES DROPPED": releases of no lock held, records
 * dropped for want of room.  Every block's callback then asks for the
 * registers (QEMU_PLUGIN_CB_R_REGS), which costs host time, not guest
 * instructions.
 *
 * With the argument lines=on (and smp=on: it needs several vCPUs) every
 * load and store of the guest's kernel code also goes through a model of
 * the caches' coherence, one cache per vCPU, by 64-byte line: a line is
 * held modified by one vCPU or shared by a set of them.  A load of a line
 * another vCPU holds modified, and a store to a line another vCPU holds
 * at all, is a transfer (what a real CPU pays a cache-to-cache transfer
 * or an invalidation for); first touches and lines only this vCPU holds
 * are not.  Transfers are counted by the instruction that caused them, and
 * snapshots carry "xfer VADDR TRANSFERS" lines.  The model knows nothing
 * of capacity (no line is evicted but by another vCPU) nor of user space
 * (not followed), and it costs host time, not guest instructions.
 *
 * With the argument tlb=BITS every load and store of the guest's kernel
 * code also goes through a model of TCG's softmmu TLB, one per vCPU (as
 * QEMU's, per MMU index: the kernel's own addresses in one, user
 * addresses the kernel touches in another): direct-mapped by 4 KiB
 * virtual page with 2^BITS entries, and a victim TLB of 8 that takes the
 * entry a fill evicts and swaps back on a hit (accel/tcg/cputlb.c).  A
 * load or store that misses both is a fill, the page walk
 * (tlb_set_page_full()); one found in the victim TLB costs the swap.
 * Snapshots carry "tlb VADDR FILLS VICTIM_HITS" lines, by instruction.
 * Not modelled: QEMU resizing its TLB (between 2^6 and 2^22 entries, at
 * a flush, by the use it saw) and the flushes themselves (a page table
 * switch, INVLPG), so the absolute figures are a model's; the same run
 * under two schedulers, compared, says which pages an elevator adds and
 * which instructions find them evicted.
 *
 * Built against QEMU's plugin API (include/qemu/qemu-plugin.h); only the
 * few declarations used are repeated here, so that no QEMU headers are
 * needed: those calls and qemu_info_t are unchanged from API version 1 to
 * the QEMU 10 this project runs (scripts/vmbed.py qemu_command()).
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;

typedef struct qemu_info_t {
	const char *target_name;
	struct {
		int min;
		int cur;
	} version;
	bool system_emulation;
	union {
		struct {
			int smp_vcpus;
			int max_vcpus;
		} system;
	};
} qemu_info_t;

typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id,
					       struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index,
					    void *userdata);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id,
					   qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb,
					  qemu_plugin_vcpu_udata_cb_t cb,
					  int flags, void *userdata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);

/* For locks=on (API version 2 on: registers; 4: guest memory). */
struct qemu_plugin_insn;
struct qemu_plugin_register;
typedef uint32_t qemu_plugin_meminfo_t;
enum { CB_NO_REGS, CB_R_REGS };
enum { MEM_R = 1, MEM_W, MEM_RW };
typedef struct { char *data; unsigned int len; } garray_t;	/* GArray */
typedef struct { uint8_t *data; unsigned int len; } gbytes_t;	/* GByteArray */
typedef struct {
	struct qemu_plugin_register *handle;
	const char *name;
	const char *feature;
} reg_descriptor_t;
typedef void (*qemu_plugin_vcpu_simple_cb_t)(qemu_plugin_id_t id,
					     unsigned int vcpu_index);
typedef void (*qemu_plugin_vcpu_mem_cb_t)(unsigned int vcpu_index,
					  qemu_plugin_meminfo_t info,
					  uint64_t vaddr, void *userdata);

void qemu_plugin_register_vcpu_init_cb(qemu_plugin_id_t id,
				       qemu_plugin_vcpu_simple_cb_t cb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb,
						 size_t idx);
size_t qemu_plugin_insn_data(const struct qemu_plugin_insn *insn, void *dest,
			     size_t len);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn *insn,
				      qemu_plugin_vcpu_mem_cb_t cb, int flags,
				      int rw, void *userdata);
garray_t *qemu_plugin_get_registers(void);
int qemu_plugin_read_register(struct qemu_plugin_register *handle,
			      gbytes_t *buf);
bool qemu_plugin_read_memory_vaddr(uint64_t addr, gbytes_t *data, size_t len);
bool qemu_plugin_mem_is_store(qemu_plugin_meminfo_t info);
/* glib's, which QEMU links */
gbytes_t *g_byte_array_new(void);
gbytes_t *g_byte_array_set_size(gbytes_t *array, unsigned int length);

/* The plugin API version this was written against: QEMU 10's. */
EXPORT int qemu_plugin_version = 4;

struct insn;

#define BLOCK_ATOMICS 8

struct block {
	uint64_t vaddr;
	uint64_t insns;
	uint64_t count;		/* executions, by the vCPU thread */
	struct block *next;	/* hash chain */
	int code;		/* locks=on: a lock primitive's entry (1-3) */
	bool indirect;		/* ends in a return or an indirect jump or call */
	uint64_t pexits;	/* left for a block on another page (not indirect) */
	unsigned int natomics;
	struct insn *atomics[BLOCK_ATOMICS];
};

#define ATOMIC_LINES 4

/*
 * An instruction's records, by its address: as an atomic one (locks=on)
 * its executions and lines, and the transfers it caused (lines=on).
 */
struct insn {
	uint64_t vaddr;
	uint64_t execs;
	uint64_t xfers;		/* relaxed atomic adds */
	uint64_t fills;		/* tlb=: misses of both TLBs (relaxed adds) */
	uint64_t victims;	/* tlb=: hits in the victim TLB */
	uint64_t line[ATOMIC_LINES];	/* cache line addresses (>> 6) */
	uint64_t hits[ATOMIC_LINES];
	uint64_t other;
	struct insn *next;
};

/* A (call site, lock, primitive)'s totals (locks=on). */
struct hold {
	uint64_t site, lock, fn;
	uint64_t acquisitions, held, irqoff;
	struct hold *next;
};

#define VCPUS 64
#define HELD 32
#define PRIMITIVES 64
#define IF_FLAG (1U << 9)

struct held {
	uint64_t site, lock, fn, start;
	int irqoff;
};

struct vcpu {
	uint64_t insns;		/* instructions of the blocks it ran */
	struct block *last;	/* the block it ran last, by its thread */
	unsigned int nheld;
	struct held held[HELD];
	gbytes_t *buf;
};

#define BUCKETS (1U << 20)
#define KERNEL_SPACE 0xffff800000000000ULL
static struct block *table[BUCKETS];
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static const char *trigger = "tbprof.trigger";

static bool locks;
static bool smp;
static bool lines;
static struct qemu_plugin_register *reg_rdi, *reg_rsp, *reg_eflags;
static struct vcpu vcpus[VCPUS];
static struct {
	uint64_t vaddr;
	int code;
} primitives[PRIMITIVES];
static unsigned int nprimitives;
#define SMALL_BUCKETS (1U << 16)
static struct hold *holds[SMALL_BUCKETS];
static struct insn *insns[SMALL_BUCKETS];
static uint64_t unmatched, dropped;

/*
 * The vCPU's last block, left for @b: counted if it was left through a
 * lookup of @b that the exit itself does not show (another page).
 */
static void page_exit(unsigned int vcpu, struct block *b, bool atomic)
{
	struct vcpu *v = &vcpus[vcpu < VCPUS ? vcpu : 0];
	struct block *last = v->last;

	v->last = b;
	if (!last || last->indirect || !((last->vaddr ^ b->vaddr) & ~0xfffULL))
		return;
	if (atomic)
		__atomic_fetch_add(&last->pexits, 1, __ATOMIC_RELAXED);
	else
		last->pexits++;
}

static void block_ran(unsigned int vcpu, void *data)
{
	((struct block *)data)->count++;
	page_exit(vcpu, data, false);
}

/* smp=on: vCPU threads may count the same block at once */
static void block_ran_smp(unsigned int vcpu, void *data)
{
	__atomic_fetch_add(&((struct block *)data)->count, 1, __ATOMIC_RELAXED);
	page_exit(vcpu, data, true);
}

static unsigned int small_hash(uint64_t a, uint64_t b, uint64_t c)
{
	uint64_t h = a * 0x9e3779b97f4a7c15ULL ^ b * 0xc2b2ae3d27d4eb4fULL ^
		     c * 0x165667b19e3779f9ULL;

	return (unsigned int)(h >> 48) & (SMALL_BUCKETS - 1);
}

static uint64_t read_reg(struct vcpu *v, struct qemu_plugin_register *reg)
{
	uint64_t val = 0;
	int n;

	if (!reg)
		return 0;
	g_byte_array_set_size(v->buf, 0);
	n = qemu_plugin_read_register(reg, v->buf);
	if (n > 0)
		memcpy(&val, v->buf->data, n < 8 ? (size_t)n : 8);
	return val;
}

static void hold_add(const struct held *h, uint64_t held)
{
	unsigned int i = small_hash(h->site, h->lock, h->fn);
	struct hold *r;

	for (r = holds[i]; r; r = r->next)
		if (r->site == h->site && r->lock == h->lock && r->fn == h->fn)
			break;
	if (!r) {
		r = calloc(1, sizeof(*r));
		if (!r)
			abort();
		r->site = h->site;
		r->lock = h->lock;
		r->fn = h->fn;
		pthread_mutex_lock(&table_lock);
		r->next = holds[i];
		holds[i] = r;
		pthread_mutex_unlock(&table_lock);
	}
	r->acquisitions++;
	r->held += held;
	r->irqoff += h->irqoff;
}

static void forget(struct vcpu *v, unsigned int i)
{
	memmove(&v->held[i], &v->held[i + 1],
		(v->nheld - i - 1) * sizeof(v->held[0]));
	v->nheld--;
}

/* At a lock primitive's entry: RDI the lock, [RSP] the call site. */
static void primitive(struct vcpu *v, const struct block *b)
{
	uint64_t lock = read_reg(v, reg_rdi);
	uint64_t rsp = read_reg(v, reg_rsp);
	uint64_t site = 0;
	unsigned int i;

	for (i = v->nheld; i-- > 0;)
		if (v->held[i].lock == lock)
			break;
	if (b->code == 3) {
		if (i < v->nheld) {
			hold_add(&v->held[i], v->insns - v->held[i].start);
			forget(v, i);
		} else {
			unmatched++;
		}
		return;
	}
	/* taken again: the earlier entry was a trylock that failed */
	if (i < v->nheld)
		forget(v, i);
	if (v->nheld == HELD) {
		forget(v, 0);
		dropped++;
	}
	if (qemu_plugin_read_memory_vaddr(rsp, v->buf, 8) && v->buf->len >= 8)
		memcpy(&site, v->buf->data, 8);
	v->held[v->nheld++] = (struct held){
		.site = site, .lock = lock, .fn = b->vaddr, .start = v->insns,
		.irqoff = !(read_reg(v, reg_eflags) & IF_FLAG),
	};
}

static void block_ran_locks(unsigned int vcpu, void *data)
{
	struct block *b = data;
	struct vcpu *v = &vcpus[vcpu < VCPUS ? vcpu : 0];
	unsigned int i;

	b->count++;
	for (i = 0; i < b->natomics; i++)
		b->atomics[i]->execs++;
	if (b->code)
		primitive(v, b);
	v->insns += b->insns;
	page_exit(vcpu, b, false);
}

static void atomic_access(unsigned int vcpu, qemu_plugin_meminfo_t info,
			  uint64_t vaddr, void *data)
{
	struct insn *a = data;
	uint64_t line = vaddr >> 6;
	unsigned int i;

	for (i = 0; i < ATOMIC_LINES; i++) {
		if (a->hits[i] && a->line[i] == line)
			break;
		if (!a->hits[i]) {
			a->line[i] = line;
			break;
		}
	}
	if (i < ATOMIC_LINES)
		a->hits[i]++;
	else
		a->other++;
}

#define LINE_BITS 24
#define LINE_PROBES 32
#define LINE_STRIPES 1024
#define NOBODY 0xff

/* A line's state: its address (>> 6, 0: free), who holds it how. */
struct line {
	uint64_t line;
	uint8_t modified;	/* the vCPU holding it modified, or NOBODY */
	uint64_t sharers;	/* vCPUs holding a copy (bit per vCPU) */
};

static struct line *line_table;

#define VTLB 8

/* tlb=: a vCPU's model of one MMU index's TLB; pages + 1, 0: empty */
struct tlb {
	uint64_t *page;
	uint64_t victim[VTLB];
	unsigned int vindex;
};

static unsigned int tlb_bits;
static struct tlb tlbs[VCPUS][2];
static pthread_mutex_t line_locks[LINE_STRIPES];

static struct line *line_find(uint64_t line)
{
	uint64_t h = (line * 0x9e3779b97f4a7c15ULL) >> (64 - LINE_BITS);
	struct line *e;
	unsigned int i;

	for (i = 0; i < LINE_PROBES; i++) {
		e = &line_table[(h + i) & ((1ULL << LINE_BITS) - 1)];

		if (e->line == line)
			return e;
		if (!e->line) {
			e->line = line;
			e->modified = NOBODY;
			e->sharers = 0;
			return e;
		}
	}
	/* full around here: the first probe's line is forgotten */
	e = &line_table[h];
	e->line = line;
	e->modified = NOBODY;
	e->sharers = 0;
	return e;
}

static void line_access(unsigned int vcpu, qemu_plugin_meminfo_t info,
			uint64_t vaddr, void *data)
{
	uint64_t line = (vaddr >> 6) | 1ULL << 63;	/* never 0 */
	uint64_t me = 1ULL << (vcpu & 63);
	pthread_mutex_t *lock = &line_locks[(line * 0x9e3779b97f4a7c15ULL) >> 54 &
					    (LINE_STRIPES - 1)];
	bool store = qemu_plugin_mem_is_store(info);
	bool transfer = false;
	struct line *e;

	pthread_mutex_lock(lock);
	e = line_find(line);
	if (store) {
		transfer = (e->sharers & ~me) != 0;
		e->sharers = me;
		e->modified = vcpu & 63;
	} else if (!(e->sharers & me)) {
		transfer = e->modified != NOBODY;
		e->sharers |= me;
		e->modified = NOBODY;
	}
	pthread_mutex_unlock(lock);
	if (transfer)
		__atomic_fetch_add(&((struct insn *)data)->xfers, 1, __ATOMIC_RELAXED);
}

/* tlb=: by the vCPU's own thread; the counts shared by all (relaxed) */
static void tlb_access(unsigned int vcpu, qemu_plugin_meminfo_t info,
		       uint64_t vaddr, void *data)
{
	struct tlb *t = &tlbs[vcpu < VCPUS ? vcpu : 0][vaddr >= KERNEL_SPACE];
	uint64_t page = (vaddr >> 12) + 1;
	uint64_t *e = &t->page[(vaddr >> 12) & ((1ULL << tlb_bits) - 1)];
	struct insn *x = data;
	unsigned int i;

	if (*e == page)
		return;
	for (i = 0; i < VTLB; i++)
		if (t->victim[i] == page) {
			t->victim[i] = *e;
			*e = page;
			__atomic_fetch_add(&x->victims, 1, __ATOMIC_RELAXED);
			return;
		}
	if (*e)
		t->victim[t->vindex++ % VTLB] = *e;
	*e = page;
	__atomic_fetch_add(&x->fills, 1, __ATOMIC_RELAXED);
}

/* tlb=: the tables of @n vCPUs; 0 or -1 (no memory) */
static int tlb_init(int n)
{
	int v, k;

	for (v = 0; v < n && v < VCPUS; v++)
		for (k = 0; k < 2; k++) {
			tlbs[v][k].page = calloc(1ULL << tlb_bits, sizeof(uint64_t));
			if (!tlbs[v][k].page)
				return -1;
		}
	return 0;
}

/* lines=on: the table of lines and its locks; 0 or -1 (no memory) */
static int lines_init(void)
{
	unsigned int i;

	line_table = calloc(1ULL << LINE_BITS, sizeof(*line_table));
	if (!line_table)
		return -1;
	for (i = 0; i < LINE_STRIPES; i++)
		pthread_mutex_init(&line_locks[i], NULL);
	return 0;
}

/*
 * Whether the instruction is an atomic read-modify-write: a lock prefix,
 * or DS (0x3e), which is what the kernel patches its lock prefixes into
 * when it runs on one CPU, before an opcode that can take lock; or xchg
 * with a memory operand (locked without a prefix).
 */
static bool is_atomic(const uint8_t *p, size_t len)
{
	bool lock = false, ds = false;
	size_t i = 0;
	uint8_t op, reg;

	for (; i < len; i++) {
		if (p[i] == 0xf0)
			lock = true;
		else if (p[i] == 0x3e)
			ds = true;
		else if (p[i] == 0x66 || p[i] == 0x67 || p[i] == 0xf2 ||
			 p[i] == 0xf3 || p[i] == 0x2e || p[i] == 0x36 ||
			 p[i] == 0x26 || p[i] == 0x64 || p[i] == 0x65)
			continue;
		else
			break;
	}
	if (i < len && (p[i] & 0xf0) == 0x40)	/* REX */
		i++;
	if (i >= len)
		return false;
	op = p[i];
	if ((op == 0x86 || op == 0x87) && i + 1 < len && (p[i + 1] >> 6) != 3)
		return true;
	if (lock)
		return true;
	if (!ds)
		return false;
	/* the opcodes lock applies to, with a memory operand */
	if (op == 0x0f) {
		if (i + 2 >= len)
			return false;
		op = p[i + 1];
		reg = (p[i + 2] >> 3) & 7;
		if ((p[i + 2] >> 6) == 3)
			return false;
		/* cmpxchg, xadd, bts, btr, btc, cmpxchg8b/16b */
		return op == 0xb0 || op == 0xb1 || op == 0xc0 || op == 0xc1 ||
		       op == 0xab || op == 0xb3 || op == 0xbb ||
		       (op == 0xba && reg >= 5) || (op == 0xc7 && reg == 1);
	}
	if (i + 1 >= len || (p[i + 1] >> 6) == 3)
		return false;
	reg = (p[i + 1] >> 3) & 7;
	if (op <= 0x33)		/* add, or, adc, sbb, and, sub, xor to memory */
		return (op & 7) <= 1;
	if (op == 0x80 || op == 0x81 || op == 0x83)
		return reg != 7;	/* not cmp */
	if (op == 0xf6 || op == 0xf7)
		return reg == 2 || reg == 3;	/* not, neg */
	if (op == 0xfe || op == 0xff)
		return reg <= 1;	/* inc, dec */
	return false;
}

/* The records of the instruction at @vaddr; under table_lock. */
static struct insn *insn_at(uint64_t vaddr)
{
	unsigned int i = small_hash(vaddr, 0, 0);
	struct insn *a;

	for (a = insns[i]; a; a = a->next)
		if (a->vaddr == vaddr)
			return a;
	a = calloc(1, sizeof(*a));
	if (!a)
		abort();
	a->vaddr = vaddr;
	a->next = insns[i];
	insns[i] = a;
	return a;
}

static int primitive_code(uint64_t vaddr)
{
	unsigned int i;

	for (i = 0; i < nprimitives; i++)
		if (primitives[i].vaddr == vaddr)
			return primitives[i].code;
	return 0;
}

static void vcpu_init(qemu_plugin_id_t id, unsigned int vcpu)
{
	garray_t *regs = qemu_plugin_get_registers();
	reg_descriptor_t *d = (reg_descriptor_t *)regs->data;
	unsigned int i;

	for (i = 0; i < regs->len; i++) {
		if (!strcmp(d[i].name, "rdi"))
			reg_rdi = d[i].handle;
		else if (!strcmp(d[i].name, "rsp"))
			reg_rsp = d[i].handle;
		else if (!strcmp(d[i].name, "eflags"))
			reg_eflags = d[i].handle;
	}
	if (vcpu < VCPUS)
		vcpus[vcpu].buf = g_byte_array_new();
}

/*
 * Whether the instruction leaves its block through a lookup of the next:
 * ret (c3, c2 iw, with prefixes), or jmp/call through a register or
 * memory (ff /2 to /5).  Direct jumps and calls are chained instead,
 * within the page the block starts on (page_exit() counts the others).
 */
static bool is_indirect(const uint8_t *p, size_t len)
{
	size_t i = 0;

	while (i < len && (p[i] == 0xf2 || p[i] == 0xf3 || p[i] == 0x2e ||
			   p[i] == 0x3e || p[i] == 0x66 || (p[i] & 0xf0) == 0x40))
		i++;
	if (i >= len)
		return false;
	if (p[i] == 0xc3 || p[i] == 0xc2)
		return true;
	if (p[i] == 0xff && i + 1 < len) {
		unsigned int reg = (p[i + 1] >> 3) & 7;

		return reg >= 2 && reg <= 5;
	}
	return false;
}

/*
 * @cb for every load and store of the block's @insns instructions, with
 * each instruction's records (insn_at()); under table_lock.
 */
static void watch_memory(struct qemu_plugin_tb *tb, size_t insns,
			 qemu_plugin_vcpu_mem_cb_t cb)
{
	size_t i;

	for (i = 0; i < insns; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);

		qemu_plugin_register_vcpu_mem_cb(insn, cb, CB_NO_REGS, MEM_RW,
						 insn_at(qemu_plugin_insn_vaddr(insn)));
	}
}

static void block_translated(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	uint64_t vaddr = qemu_plugin_tb_vaddr(tb);
	uint64_t insns = qemu_plugin_tb_n_insns(tb);
	unsigned int h = (unsigned int)((vaddr ^ (vaddr >> 20) ^ (insns << 7)) &
					(BUCKETS - 1));
	struct block *b;

	pthread_mutex_lock(&table_lock);
	for (b = table[h]; b; b = b->next)
		if (b->vaddr == vaddr && b->insns == insns)
			break;
	if (!b) {
		b = calloc(1, sizeof(*b));
		if (!b)
			abort();
		b->vaddr = vaddr;
		b->insns = insns;
		b->next = table[h];
		table[h] = b;
	}
	if (insns) {
		uint8_t bytes[16];
		size_t n = qemu_plugin_insn_data(qemu_plugin_tb_get_insn(tb, insns - 1),
						 bytes, sizeof(bytes));

		b->indirect = is_indirect(bytes, n);
	}
	if (locks) {
		size_t i;

		b->code = primitive_code(vaddr);
		for (i = 0; i < insns; i++) {
			struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
			uint8_t bytes[16];
			size_t n = qemu_plugin_insn_data(insn, bytes, sizeof(bytes));
			struct insn *a;
			unsigned int j;

			if (!is_atomic(bytes, n))
				continue;
			a = insn_at(qemu_plugin_insn_vaddr(insn));
			for (j = 0; j < b->natomics; j++)
				if (b->atomics[j] == a)
					break;
			if (j == b->natomics && b->natomics < BLOCK_ATOMICS)
				b->atomics[b->natomics++] = a;
			qemu_plugin_register_vcpu_mem_cb(insn, atomic_access, CB_NO_REGS,
							 MEM_RW, a);
		}
	}
	if (lines && vaddr >= KERNEL_SPACE)
		watch_memory(tb, insns, line_access);
	if (tlb_bits && vaddr >= KERNEL_SPACE)
		watch_memory(tb, insns, tlb_access);
	pthread_mutex_unlock(&table_lock);
	if (locks)
		qemu_plugin_register_vcpu_tb_exec_cb(tb, block_ran_locks, CB_R_REGS, b);
	else
		qemu_plugin_register_vcpu_tb_exec_cb(tb, smp ? block_ran_smp : block_ran,
						     CB_NO_REGS, b);
}

static void snapshot(const char *out)
{
	char tmp[4200];
	struct block *b;
	unsigned int i;
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", out);
	f = fopen(tmp, "w");
	if (!f)
		return;
	pthread_mutex_lock(&table_lock);
	for (i = 0; i < BUCKETS; i++)
		for (b = table[i]; b; b = b->next) {
			/* a vCPU thread may be counting it (smp=on) */
			uint64_t count = __atomic_load_n(&b->count, __ATOMIC_RELAXED);

			if (count)
				fprintf(f, "%" PRIx64 " %" PRIu64 " %" PRIu64 "\n",
					b->vaddr, b->insns, count);
			if (count && b->indirect)
				fprintf(f, "ind %" PRIx64 " %" PRIu64 "\n",
					b->vaddr, b->insns);
			count = __atomic_load_n(&b->pexits, __ATOMIC_RELAXED);
			if (count)
				fprintf(f, "pex %" PRIx64 " %" PRIu64 " %" PRIu64 "\n",
					b->vaddr, b->insns, count);
		}
	if (lines || tlb_bits) {
		struct insn *x;

		for (i = 0; i < SMALL_BUCKETS; i++)
			for (x = insns[i]; x; x = x->next) {
				uint64_t n = __atomic_load_n(&x->xfers, __ATOMIC_RELAXED);
				uint64_t fills = __atomic_load_n(&x->fills, __ATOMIC_RELAXED);
				uint64_t victims = __atomic_load_n(&x->victims,
								   __ATOMIC_RELAXED);

				if (n)
					fprintf(f, "xfer %" PRIx64 " %" PRIu64 "\n",
						x->vaddr, n);
				if (fills || victims)
					fprintf(f, "tlb %" PRIx64 " %" PRIu64 " %" PRIu64 "\n",
						x->vaddr, fills, victims);
			}
	}
	if (locks) {
		struct hold *h;
		struct insn *a;
		unsigned int j;

		for (i = 0; i < SMALL_BUCKETS; i++)
			for (h = holds[i]; h; h = h->next)
				fprintf(f, "lock %" PRIx64 " %" PRIx64 " %" PRIx64
					" %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
					h->site, h->lock, h->fn, h->acquisitions,
					h->held, h->irqoff);
		for (i = 0; i < SMALL_BUCKETS; i++)
			for (a = insns[i]; a; a = a->next) {
				if (!a->execs)
					continue;
				fprintf(f, "atomic %" PRIx64 " %" PRIu64 " %" PRIu64,
					a->vaddr, a->execs, a->other);
				for (j = 0; j < ATOMIC_LINES && a->hits[j]; j++)
					fprintf(f, " %" PRIx64 ":%" PRIu64,
						a->line[j] << 6, a->hits[j]);
				fputc('\n', f);
			}
		fprintf(f, "unmatched %" PRIu64 " %" PRIu64 "\n", unmatched,
			dropped);
	}
	pthread_mutex_unlock(&table_lock);
	if (fclose(f) == 0)
		rename(tmp, out);
}

/* "locks" then "VADDR_HEX CODE" lines: the lock primitives' entries. */
static void set_primitives(FILE *f)
{
	char line[256];
	uint64_t vaddr;
	struct block *b;
	unsigned int i;
	int code;

	pthread_mutex_lock(&table_lock);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%" SCNx64 " %d", &vaddr, &code) == 2 &&
		    nprimitives < PRIMITIVES) {
			primitives[nprimitives].vaddr = vaddr;
			primitives[nprimitives++].code = code;
		}
	for (i = 0; i < BUCKETS; i++)
		for (b = table[i]; b; b = b->next)
			b->code = primitive_code(b->vaddr);
	pthread_mutex_unlock(&table_lock);
}

static void *watch(void *arg)
{
	char out[4096];
	FILE *f;

	for (;;) {
		usleep(20000);
		f = fopen(trigger, "r");
		if (!f)
			continue;
		if (!fgets(out, sizeof(out), f)) {
			fclose(f);
			continue;
		}
		out[strcspn(out, "\n")] = '\0';
		if (!strcmp(out, "locks"))
			set_primitives(f);
		fclose(f);
		if (strcmp(out, "locks"))
			snapshot(out);
		unlink(trigger);
	}
	return NULL;
}

EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
			       int argc, char **argv)
{
	pthread_t thread;
	int i;

	for (i = 0; i < argc; i++)
		if (!strncmp(argv[i], "trigger=", 8))
			trigger = argv[i] + 8;
		else if (!strcmp(argv[i], "locks=on"))
			locks = true;
		else if (!strcmp(argv[i], "smp=on"))
			smp = true;
		else if (!strcmp(argv[i], "lines=on"))
			lines = true;
		else if (!strncmp(argv[i], "tlb=", 4))
			tlb_bits = (unsigned int)atoi(argv[i] + 4);
	/* QEMU's TLB: 2^6 to 2^22 entries */
	if (tlb_bits && (tlb_bits < 6 || tlb_bits > 22))
		return -1;
	if (tlb_bits && tlb_init(info->system_emulation ?
				 info->system.max_vcpus : 1))
		return -1;
	/* the lock records are per vCPU, their totals are not atomic */
	if (locks && smp)
		return -1;
	/* transfers need more than one vCPU */
	if (lines && !smp)
		return -1;
	if (lines && lines_init())
		return -1;
	if (locks)
		qemu_plugin_register_vcpu_init_cb(id, vcpu_init);
	qemu_plugin_register_vcpu_tb_trans_cb(id, block_translated);
	if (pthread_create(&thread, NULL, watch, NULL))
		return -1;
	pthread_detach(thread);
	return 0;
}
