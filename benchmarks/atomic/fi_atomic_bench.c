/*
 * fi_atomic_bench: libfabric's atomic latency and rate, the C side of
 * gofi's "perftest atomic" (benchmarks/atomic/vs_libfabric.sh runs both).
 *
 * One process forks a target: the target registers a 64-byte region,
 * sends its endpoint name, key and address over a socketpair, and polls
 * its CQ (libfabric's shm and rxm execute atomics in the target's
 * progress) until told to stop. The initiator measures, on one uint64:
 *
 *   fetch-add  fi_fetch_atomic(FI_SUM), one in flight: latency per op
 *   cswap      fi_compare_atomic(FI_CSWAP), one in flight
 *   rate       fi_atomic(FI_SUM) with a window in flight: ops/s
 *
 * and prints lines "op median_us p99_us" and "rate ops_per_s", the same
 * format perftest atomic -raw prints.
 *
 *   cc -O2 -o fi_atomic_bench fi_atomic_bench.c -lfabric
 *   ./fi_atomic_bench -p shm -n 20000 -w 64
 *   ./fi_atomic_bench -p 'tcp;ofi_rxm' -n 20000 -w 64
 */
#include "../fibench.h"

#define CAPS (FI_ATOMIC | FI_RMA)

static uint64_t local[4]; /* operand, compare, result, zero */

static void report(const char *name, double *t, int n)
{
	double med, p99;
	median_p99(t, n, &med, &p99);
	printf("%s %.3f %.3f\n", name, med, p99);
}

int main(int argc, char **argv)
{
	const char *prov = "shm";
	int iters = 20000, window = 64, c;
	while ((c = getopt(argc, argv, "p:n:w:")) != -1) {
		switch (c) {
		case 'p': prov = optarg; break;
		case 'n': iters = atoi(optarg); break;
		case 'w': window = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: %s [-p prov] [-n iters] [-w window]\n", argv[0]);
			return 2;
		}
	}
	struct job j;
	start(&j, prov, CAPS, 64);
	struct node *n = &j.n;
	const struct wire *w = &j.w;
	fi_addr_t dest = j.dest;
	struct fid_mr *lmr = reg_mr(n, local, sizeof local, FI_READ | FI_WRITE, 8);
	void *desc = fi_mr_desc(lmr);
	size_t count;
	CHECK(fi_fetch_atomicvalid(n->ep, FI_UINT64, FI_SUM, &count));
	CHECK(fi_compare_atomicvalid(n->ep, FI_UINT64, FI_CSWAP, &count));
	local[0] = 1;
	double *t = calloc((size_t)iters, sizeof *t);
	int warm = iters / 10 + 1;
	/* fetch-add latency */
	for (int i = -warm; i < iters; i++) {
		double t0 = now_us();
		ssize_t r;
		while ((r = fi_fetch_atomic(n->ep, &local[0], 1, desc, &local[2], desc, dest, w->addr, w->key,
					    FI_UINT64, FI_SUM, NULL)) == -FI_EAGAIN)
			fi_cq_read(n->cq, NULL, 0);
		CHECK(r);
		while (reap(n) == 0)
			;
		if (i >= 0)
			t[i] = now_us() - t0;
	}
	report("fetch-add", t, iters);
	/* cswap latency: swap the value read last (always succeeds) */
	for (int i = -warm; i < iters; i++) {
		local[1] = local[2];
		local[0] = local[2] + 1;
		double t0 = now_us();
		ssize_t r;
		while ((r = fi_compare_atomic(n->ep, &local[0], 1, desc, &local[1], desc, &local[2], desc, dest,
					      w->addr, w->key, FI_UINT64, FI_CSWAP, NULL)) == -FI_EAGAIN)
			fi_cq_read(n->cq, NULL, 0);
		CHECK(r);
		while (reap(n) == 0)
			;
		if (i >= 0)
			t[i] = now_us() - t0;
	}
	report("cswap", t, iters);
	/* rate: non-fetching adds, window in flight */
	local[0] = 1;
	int total = iters * 5, posted = 0, done = 0;
	double t0 = 0;
	for (int phase = 0; phase < 2; phase++) {
		int goal = phase == 0 ? total / 10 : total;
		posted = done = 0;
		if (phase == 1)
			t0 = now_us();
		while (done < goal) {
			while (posted < goal && posted - done < window) {
				ssize_t r = fi_atomic(n->ep, &local[0], 1, desc, dest, w->addr, w->key, FI_UINT64, FI_SUM, NULL);
				if (r == -FI_EAGAIN)
					break;
				CHECK(r);
				posted++;
			}
			done += reap(n);
		}
	}
	printf("rate %.0f\n", total / ((now_us() - t0) / 1e6));
	fi_close(&lmr->fid);
	stop(&j);
	return 0;
}
