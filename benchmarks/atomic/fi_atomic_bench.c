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
#include <rdma/fi_atomic.h>
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

static uint64_t *region; /* target memory, 64 bytes */
static uint64_t local[4]; /* operand, compare, result, zero */

static void open_node(struct node *n, const char *prov)
{
	struct fi_info *hints = fi_allocinfo();
	hints->caps = FI_ATOMIC | FI_RMA;
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

static void target(int fd, const char *prov)
{
	struct node n;
	open_node(&n, prov);
	struct fid_mr *mr;
	region = aligned_alloc(64, 64);
	memset(region, 0, 64);
	CHECK(fi_mr_reg(n.dom, region, 64, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 7, 0, &mr, NULL));
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
		fi_cq_read(n.cq, &e, 1); /* progress: executes peers' atomics */
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

static void wait_one(struct node *n)
{
	struct fi_cq_entry e;
	for (;;) {
		ssize_t r = fi_cq_read(n->cq, &e, 1);
		if (r == 1)
			return;
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
	}
}

static int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void report(const char *name, double *t, int n)
{
	qsort(t, (size_t)n, sizeof *t, cmpd);
	printf("%s %.3f %.3f\n", name, t[n / 2], t[(int)(n * 0.99)]);
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
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) {
		perror("socketpair");
		return 1;
	}
	pid_t pid = fork();
	if (pid == 0) {
		close(sv[0]);
		target(sv[1], prov);
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
	struct fid_mr *lmr;
	CHECK(fi_mr_reg(n.dom, local, sizeof local, FI_READ | FI_WRITE, 0, 8, 0, &lmr, NULL));
	if (n.info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
		CHECK(fi_mr_bind(lmr, &n.ep->fid, 0));
		CHECK(fi_mr_enable(lmr));
	}
	void *desc = fi_mr_desc(lmr);
	size_t count;
	CHECK(fi_fetch_atomicvalid(n.ep, FI_UINT64, FI_SUM, &count));
	CHECK(fi_compare_atomicvalid(n.ep, FI_UINT64, FI_CSWAP, &count));
	local[0] = 1;
	double *t = calloc((size_t)iters, sizeof *t);
	int warm = iters / 10 + 1;
	/* fetch-add latency */
	for (int i = -warm; i < iters; i++) {
		double t0 = now_us();
		ssize_t r;
		while ((r = fi_fetch_atomic(n.ep, &local[0], 1, desc, &local[2], desc, dest, w.addr, w.key,
					    FI_UINT64, FI_SUM, NULL)) == -FI_EAGAIN)
			fi_cq_read(n.cq, NULL, 0);
		CHECK(r);
		wait_one(&n);
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
		while ((r = fi_compare_atomic(n.ep, &local[0], 1, desc, &local[1], desc, &local[2], desc, dest,
					      w.addr, w.key, FI_UINT64, FI_CSWAP, NULL)) == -FI_EAGAIN)
			fi_cq_read(n.cq, NULL, 0);
		CHECK(r);
		wait_one(&n);
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
				ssize_t r = fi_atomic(n.ep, &local[0], 1, desc, dest, w.addr, w.key, FI_UINT64, FI_SUM, NULL);
				if (r == -FI_EAGAIN)
					break;
				CHECK(r);
				posted++;
			}
			struct fi_cq_entry e[16];
			ssize_t k = fi_cq_read(n.cq, e, 16);
			if (k > 0)
				done += (int)k;
			else if (k != -FI_EAGAIN) {
				fprintf(stderr, "rate: fi_cq_read: %s\n", fi_strerror((int)-k));
				return 1;
			}
		}
	}
	printf("rate %.0f\n", total / ((now_us() - t0) / 1e6));
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
