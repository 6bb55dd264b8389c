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
 *   cc -O2 -o fi_rma_bench fi_rma_bench.c -lfabric
 *   ./fi_rma_bench -p shm -s 8,4096,65536,1048576 -n 2000 -w 16
 *   ./fi_rma_bench -p 'tcp;ofi_rxm'
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#define CHECK(call)                                                            \
	do {                                                                   \
		int ret_ = (int)(call);                                        \
		if (ret_) {                                                    \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, \
				#call, fi_strerror(-ret_));                    \
			exit(1);                                               \
		}                                                              \
	} while (0)

struct node {
	struct fi_info *info;
	struct fid_fabric *fab;
	struct fid_domain *dom;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
};

struct wire {
	uint64_t key, addr;
	size_t namelen;
	char name[256];
};

static char *region; /* target memory */
static char *local;  /* initiator buffer */

static void open_node(struct node *n, const char *prov)
{
	struct fi_info *hints = fi_allocinfo();
	hints->caps = FI_RMA | FI_MSG;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->fabric_attr->prov_name = strdup(prov);
	hints->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
	CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &n->info));
	fi_freeinfo(hints);
	CHECK(fi_fabric(n->info->fabric_attr, &n->fab, NULL));
	CHECK(fi_domain(n->fab, n->info, &n->dom, NULL));
	struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_CONTEXT, .size = 1024};
	CHECK(fi_cq_open(n->dom, &cqa, &n->cq, NULL));
	struct fi_av_attr ava = {.type = FI_AV_TABLE};
	CHECK(fi_av_open(n->dom, &ava, &n->av, NULL));
	CHECK(fi_endpoint(n->dom, n->info, &n->ep, NULL));
	CHECK(fi_ep_bind(n->ep, &n->cq->fid, FI_TRANSMIT | FI_RECV));
	CHECK(fi_ep_bind(n->ep, &n->av->fid, 0));
	CHECK(fi_enable(n->ep));
}

static void full(int fd, void *b, size_t n, int wr)
{
	char *p = b;
	while (n > 0) {
		ssize_t k = wr ? write(fd, p, n) : read(fd, p, n);
		if (k <= 0) {
			perror(wr ? "write" : "read");
			exit(1);
		}
		p += k;
		n -= (size_t)k;
	}
}

static void target(int fd, const char *prov, size_t size)
{
	struct node n;
	open_node(&n, prov);
	struct fid_mr *mr;
	region = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);
	memset(region, 0, size);
	CHECK(fi_mr_reg(n.dom, region, size, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 7, 0, &mr, NULL));
	if (n.info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
		CHECK(fi_mr_bind(mr, &n.ep->fid, 0));
		CHECK(fi_mr_enable(mr));
	}
	struct wire w = {.key = fi_mr_key(mr), .namelen = sizeof w.name};
	w.addr = (n.info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)region : 0;
	CHECK(fi_getname(&n.ep->fid, w.name, &w.namelen));
	full(fd, &w, sizeof w, 1);
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	struct fi_cq_entry e;
	for (unsigned long i = 0;; i++) {
		fi_cq_read(n.cq, &e, 1); /* progress: moves peers' RMA data */
		if ((i & 1023) == 0 && poll(&pfd, 1, 0) > 0)
			break;
	}
	fi_close(&mr->fid);
	fi_close(&n.ep->fid);
	fi_close(&n.av->fid);
	fi_close(&n.cq->fid);
	fi_close(&n.dom->fid);
	fi_close(&n.fab->fid);
	exit(0);
}

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* reap reads completions: how many, exiting on an error. */
static int reap(struct node *n)
{
	struct fi_cq_entry e[16];
	ssize_t r = fi_cq_read(n->cq, e, 16);
	if (r > 0)
		return (int)r;
	if (r == -FI_EAVAIL) {
		struct fi_cq_err_entry ee = {0};
		fi_cq_readerr(n->cq, &ee, 0);
		fprintf(stderr, "error completion: %s\n", fi_strerror(ee.err));
		exit(1);
	}
	if (r != -FI_EAGAIN) {
		fprintf(stderr, "fi_cq_read: %s\n", fi_strerror((int)-r));
		exit(1);
	}
	return 0;
}

static int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

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
	qsort(t, (size_t)iters, sizeof *t, cmpd);
	printf("%s %zu %.3f %.3f\n", rd ? "read-lat" : "write-lat", size, t[iters / 2], t[(int)(iters * 0.99)]);
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
static int imin(int a, int b) { return a < b ? a : b; }

int main(int argc, char **argv)
{
	const char *prov = "shm";
	char sizes_arg[256] = "8,4096,65536,1048576";
	int iters = 2000, window = 16, c;
	while ((c = getopt(argc, argv, "p:s:n:w:")) != -1) {
		switch (c) {
		case 'p': prov = optarg; break;
		case 's': snprintf(sizes_arg, sizeof sizes_arg, "%s", optarg); break;
		case 'n': iters = atoi(optarg); break;
		case 'w': window = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: %s [-p prov] [-s sizes] [-n iters] [-w window]\n", argv[0]);
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
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) {
		perror("socketpair");
		return 1;
	}
	pid_t pid = fork();
	if (pid == 0) {
		close(sv[0]);
		target(sv[1], prov, maxsize);
	}
	close(sv[1]);
	struct node n;
	open_node(&n, prov);
	struct wire w;
	full(sv[0], &w, sizeof w, 0);
	fi_addr_t dest;
	if (fi_av_insert(n.av, w.name, 1, &dest, 0, NULL) != 1) {
		fprintf(stderr, "fi_av_insert failed\n");
		return 1;
	}
	local = aligned_alloc(4096, (maxsize + 4095) & ~(size_t)4095);
	memset(local, 1, maxsize);
	struct fid_mr *lmr;
	CHECK(fi_mr_reg(n.dom, local, maxsize, FI_READ | FI_WRITE, 0, 8, 0, &lmr, NULL));
	if (n.info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
		CHECK(fi_mr_bind(lmr, &n.ep->fid, 0));
		CHECK(fi_mr_enable(lmr));
	}
	struct ctx cx = {.n = &n, .dest = dest, .w = &w, .desc = fi_mr_desc(lmr)};
	for (int i = 0; i < nsizes; i++) {
		size_t size = sizes[i];
		int lat = imax(10, imin(iters, (int)((long)iters * 4096 / (long)(size ? size : 1))));
		latency(&cx, 0, size, lat);
		latency(&cx, 1, size, lat);
		int total = imax(4 * window, imin(20 * iters, (int)((256L << 20) / (long)(size ? size : 1))));
		bandwidth(&cx, 0, size, total, window);
		bandwidth(&cx, 1, size, total, window);
	}
	full(sv[0], "x", 1, 1);
	waitpid(pid, NULL, 0);
	fi_close(&lmr->fid);
	fi_close(&n.ep->fid);
	fi_close(&n.av->fid);
	fi_close(&n.cq->fid);
	fi_close(&n.dom->fid);
	fi_close(&n.fab->fid);
	return 0;
}
