/*
 * fi_rma_bench: libfabric's RMA write and read latency and bandwidth, the
 * C side of gofi's "perftest rma" (benchmarks/rma/vs_libfabric.sh runs
 * both).
 *
 * One process forks a target: the target registers a region as large as
 * the largest size, sends its endpoint name, key and address over a
 * socketpair, and polls its CQ (libfabric's shm and rxm move RMA data in
 * the target's progress) until told to stop. The initiator measures per
 * size:
 *
 *   write-lat / read-lat  fi_write / fi_read, one in flight: median and
 *                         p99 latency in us
 *   write-bw / read-bw    a window in flight: MB/s (10^6 bytes)
 *
 * and prints lines "test size value [p99]", the format perftest rma
 * prints. Delivery-complete writes, as gofi's completions always are.
 *
 * -t names the tests to run (comma-separated, as perftest rma's -tests),
 * so that a profile or perf stat sees one of them alone.
 *
 *   cc -O2 -o fi_rma_bench fi_rma_bench.c -lfabric
 *   ./fi_rma_bench -p shm -s 8,4096,65536,1048576 -n 2000 -w 16
 *   ./fi_rma_bench -p 'tcp;ofi_rxm' -s 8 -t write-lat,read-lat
 */
#include "../fibench.h"

#define CAPS (FI_RMA | FI_MSG)

static char *local; /* initiator buffer */

struct ctx {
	struct node *n;
	fi_addr_t dest;
	struct wire *w;
	void *desc;
};

/* post starts one operation; completions reaped while the queue is full
 * are returned. */
static int post(struct ctx *c, int rd, size_t size)
{
	ssize_t r;
	int got = 0;
	for (;;) {
		if (rd)
			r = fi_read(c->n->ep, local, size, c->desc, c->dest, c->w->addr, c->w->key, NULL);
		else
			r = fi_write(c->n->ep, local, size, c->desc, c->dest, c->w->addr, c->w->key, NULL);
		if (r != -FI_EAGAIN)
			break;
		got += reap(c->n);
	}
	CHECK(r);
	return got;
}

static void latency(struct ctx *c, int rd, size_t size, int iters)
{
	double *t = calloc((size_t)iters, sizeof *t);
	int warm = iters / 10 + 1;
	for (int i = -warm; i < iters; i++) {
		double t0 = now_us();
		post(c, rd, size);
		while (reap(c->n) == 0)
			;
		if (i >= 0)
			t[i] = now_us() - t0;
	}
	double med, p99;
	median_p99(t, iters, &med, &p99);
	printf("%s %zu %.3f %.3f\n", rd ? "read-lat" : "write-lat", size, med, p99);
	free(t);
}

static void bandwidth(struct ctx *c, int rd, size_t size, int total, int window)
{
	double t0 = 0;
	for (int phase = 0; phase < 2; phase++) {
		int goal = phase == 0 ? (total / 10 > 0 ? total / 10 : 1) : total;
		int posted = 0, done = 0;
		if (phase == 1)
			t0 = now_us();
		while (done < goal) {
			while (posted < goal && posted - done < window) {
				done += post(c, rd, size);
				posted++;
			}
			done += reap(c->n);
		}
	}
	printf("%s %zu %.1f\n", rd ? "read-bw" : "write-bw", size, (double)total * (double)size / (now_us() - t0));
}

static int imax(int a, int b) { return a > b ? a : b; }

/* wanted reports whether test is named in the comma-separated list. */
static int wanted(const char *list, const char *test)
{
	size_t n = strlen(test);
	for (const char *p = list; *p;) {
		const char *e = strchr(p, ',');
		size_t k = e ? (size_t)(e - p) : strlen(p);
		if (k == n && strncmp(p, test, n) == 0)
			return 1;
		p += k + (e != NULL);
	}
	return 0;
}
static int imin(int a, int b) { return a < b ? a : b; }

int main(int argc, char **argv)
{
	const char *prov = "shm";
	char sizes_arg[256] = "8,4096,65536,1048576";
	const char *tests = "write-lat,read-lat,write-bw,read-bw";
	int iters = 2000, window = 16, c;
	while ((c = getopt(argc, argv, "p:s:n:w:t:")) != -1) {
		switch (c) {
		case 'p': prov = optarg; break;
		case 's': snprintf(sizes_arg, sizeof sizes_arg, "%s", optarg); break;
		case 'n': iters = atoi(optarg); break;
		case 'w': window = atoi(optarg); break;
		case 't': tests = optarg; break;
		default:
			fprintf(stderr, "usage: %s [-p prov] [-s sizes] [-n iters] [-w window] [-t tests]\n", argv[0]);
			return 2;
		}
	}
	size_t sizes[32];
	int nsizes = 0;
	size_t maxsize = 1;
	for (char *tok = strtok(sizes_arg, ","); tok && nsizes < 32; tok = strtok(NULL, ",")) {
		sizes[nsizes] = strtoull(tok, NULL, 0);
		if (sizes[nsizes] > maxsize)
			maxsize = sizes[nsizes];
		nsizes++;
	}
	struct job j;
	start(&j, prov, CAPS, maxsize);
	local = aligned_alloc(4096, (maxsize + 4095) & ~(size_t)4095);
	memset(local, 1, maxsize);
	struct fid_mr *lmr = reg_mr(&j.n, local, maxsize, FI_READ | FI_WRITE, 8);
	struct ctx cx = {.n = &j.n, .dest = j.dest, .w = &j.w, .desc = fi_mr_desc(lmr)};
	for (int i = 0; i < nsizes; i++) {
		size_t size = sizes[i];
		int lat = imax(10, imin(iters, (int)((long)iters * 4096 / (long)(size ? size : 1))));
		if (wanted(tests, "write-lat"))
			latency(&cx, 0, size, lat);
		if (wanted(tests, "read-lat"))
			latency(&cx, 1, size, lat);
		int total = imax(4 * window, imin(20 * iters, (int)((256L << 20) / (long)(size ? size : 1))));
		if (wanted(tests, "write-bw"))
			bandwidth(&cx, 0, size, total, window);
		if (wanted(tests, "read-bw"))
			bandwidth(&cx, 1, size, total, window);
	}
	fi_close(&lmr->fid);
	stop(&j);
	return 0;
}
