// SPDX-License-Identifier: GPL-2.0
/*
 * cloneio: NTHREADS threads reading 4 KiB at random offsets of a block
 * device with O_DIRECT pread() for SECONDS, created with clone() with or
 * without CLONE_IO.  With CLONE_IO the threads share one I/O context, so a
 * scheduler that gives each context a share (FlashFQ) must count them
 * once; without it each thread has its own.  Prints the reads done.
 *
 * usage: cloneio 0|1 NTHREADS DEVICE SECONDS
 * Built by tests/vm/test_flashfq.py on the host and copied into the VM.
 *
 * The threads are bare clone()s, not pthreads: they share the creator's
 * thread pointer, so they must not touch anything of libc's that keeps
 * per-thread state (malloc's caches, errno): buffers are static and the
 * reads are raw system calls.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/fs.h>

#define STACK_SIZE	(256 * 1024)
#define MAX_THREADS	16

static int fd;
static uint64_t blocks;
static double until;
static volatile long done[MAX_THREADS];
static volatile int finished[MAX_THREADS];
static char bufs[MAX_THREADS][4096] __attribute__((aligned(4096)));

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int reader(void *arg)
{
	long idx = (long)arg;
	uint64_t x = 0x9e3779b97f4a7c15ULL * (idx + 1);

	while (now() < until) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		if (syscall(SYS_pread64, fd, bufs[idx], 4096,
			    (off_t)(x % blocks) * 4096) != 4096)
			break;
		done[idx]++;
	}
	finished[idx] = 1;
	return 0;
}

int main(int argc, char **argv)
{
	int share, n, i, flags;
	uint64_t bytes;
	long total = 0;

	if (argc != 5)
		return 2;
	share = atoi(argv[1]);
	n = atoi(argv[2]);
	if (n < 1 || n > MAX_THREADS)
		return 2;
	fd = open(argv[3], O_RDONLY | O_DIRECT);
	if (fd < 0 || ioctl(fd, BLKGETSIZE64, &bytes))
		return 3;
	blocks = bytes / 4096;
	/*
	 * The kernel gives a task its I/O context at its first request, and
	 * CLONE_IO shares only one that exists: read once before cloning.
	 */
	if (pread(fd, bufs[0], 4096, 0) != 4096)
		return 3;
	until = now() + atof(argv[4]);
	flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND |
		CLONE_THREAD | CLONE_SYSVSEM | (share ? CLONE_IO : 0);
	for (i = 1; i < n; i++) {
		char *stack = mmap(NULL, STACK_SIZE, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK,
				   -1, 0);

		if (stack == MAP_FAILED ||
		    clone(reader, stack + STACK_SIZE, flags, (void *)(long)i) < 0)
			return 4;
	}
	reader((void *)0);
	for (i = 1; i < n; i++)
		while (!finished[i])
			usleep(1000);
	for (i = 0; i < n; i++)
		total += done[i];
	printf("reads=%ld\n", total);
	return 0;
}
