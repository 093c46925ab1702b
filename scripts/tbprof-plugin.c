// SPDX-License-Identifier: GPL-2.0
/*
 * QEMU TCG plugin for scripts/tbprof.py: how many times each translated
 * block ran, written out on demand.
 *
 * Every block gets an execution callback that counts into an entry keyed
 * by its guest virtual address and instruction count (a block translated
 * again finds its entry).  A thread watches a trigger file (argument
 * trigger=PATH); when it appears, its first line names an output file,
 * which gets one line per block that ran, "VADDR_HEX NR_INSNS COUNT",
 * written under another name and renamed into place; then the trigger is
 * removed.  The difference of two snapshots is what the guest ran between
 * them, exactly (the callbacks do not change the guest's instructions).
 * Meant for one vCPU (the counts are not atomic).
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

/* The plugin API version this was written against: QEMU 10's. */
EXPORT int qemu_plugin_version = 4;

struct block {
	uint64_t vaddr;
	uint64_t insns;
	uint64_t count;		/* executions, by the vCPU thread */
	struct block *next;	/* hash chain */
};

#define BUCKETS (1U << 20)
static struct block *table[BUCKETS];
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static const char *trigger = "tbprof.trigger";

static void block_ran(unsigned int vcpu, void *data)
{
	((struct block *)data)->count++;
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
	pthread_mutex_unlock(&table_lock);
	qemu_plugin_register_vcpu_tb_exec_cb(tb, block_ran, 0, b);
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
		for (b = table[i]; b; b = b->next)
			if (b->count)
				fprintf(f, "%" PRIx64 " %" PRIu64 " %" PRIu64 "\n",
					b->vaddr, b->insns, b->count);
	pthread_mutex_unlock(&table_lock);
	if (fclose(f) == 0)
		rename(tmp, out);
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
		fclose(f);
		out[strcspn(out, "\n")] = '\0';
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
	qemu_plugin_register_vcpu_tb_trans_cb(id, block_translated);
	if (pthread_create(&thread, NULL, watch, NULL))
		return -1;
	pthread_detach(thread);
	return 0;
}
