/*
 * fibench.h: the libfabric set-up shared by gofi's C comparison programs
 * (benchmarks/rma/fi_rma_bench.c, benchmarks/atomic/fi_atomic_bench.c).
 *
 * Both fork a target process that opens an RDM endpoint, registers one
 * region, sends its endpoint name, key and address to the initiator over
 * a socketpair and then only drives libfabric's progress (libfabric's shm
 * and tcp;ofi_rxm move RMA data and execute atomics in the target's
 * progress) until the initiator writes one byte to stop it. Everything is
 * static: each program includes this header once.
 */
#ifndef GOFI_FIBENCH_H
#define GOFI_FIBENCH_H

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

/* node is one process's fabric, domain, AV, CQ and endpoint. */
struct node {
	struct fi_info *info;
	struct fid_fabric *fab;
	struct fid_domain *dom;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
};

/* wire is what the target sends the initiator. */
struct wire {
	uint64_t key, addr;
	size_t namelen;
	char name[256];
};

/* open_node opens an RDM endpoint of provider prov with capabilities caps,
 * delivery-complete transmits (as gofi's completions always are). */
static void open_node(struct node *n, const char *prov, uint64_t caps)
{
	struct fi_info *hints = fi_allocinfo();
	hints->caps = caps;
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

static void close_node(struct node *n)
{
	fi_close(&n->ep->fid);
	fi_close(&n->av->fid);
	fi_close(&n->cq->fid);
	fi_close(&n->dom->fid);
	fi_close(&n->fab->fid);
	fi_freeinfo(n->info);
}

/* reg_mr registers buf with the given access and requested key, bound to
 * the endpoint where the provider's MR mode asks for it. */
static struct fid_mr *reg_mr(struct node *n, void *buf, size_t len, uint64_t access, uint64_t key)
{
	struct fid_mr *mr;
	CHECK(fi_mr_reg(n->dom, buf, len, access, 0, key, 0, &mr, NULL));
	if (n->info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
		CHECK(fi_mr_bind(mr, &n->ep->fid, 0));
		CHECK(fi_mr_enable(mr));
	}
	return mr;
}

/* full writes (wr) or reads exactly n bytes of fd, exiting on failure. */
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

/* serve is the target process: it registers region (size bytes) for
 * remote read and write, sends its wire record on fd and drives progress
 * until the initiator writes to fd. It does not return. */
static void serve(int fd, const char *prov, uint64_t caps, void *region, size_t size)
{
	struct node n;
	open_node(&n, prov, caps);
	struct fid_mr *mr = reg_mr(&n, region, size, FI_REMOTE_READ | FI_REMOTE_WRITE, 7);
	struct wire w = {.key = fi_mr_key(mr), .namelen = sizeof w.name};
	w.addr = (n.info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)region : 0;
	CHECK(fi_getname(&n.ep->fid, w.name, &w.namelen));
	full(fd, &w, sizeof w, 1);
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	struct fi_cq_entry e;
	for (unsigned long i = 0;; i++) {
		fi_cq_read(n.cq, &e, 1); /* progress: serves the peer's RMA and atomics */
		if ((i & 1023) == 0 && poll(&pfd, 1, 0) > 0)
			break;
	}
	fi_close(&mr->fid);
	close_node(&n);
	exit(0);
}

/* job is the initiator's side of a run: its node, the target's address
 * and wire record, and the socket that stops the target. */
struct job {
	struct node n;
	struct wire w;
	fi_addr_t dest;
	int fd;
	pid_t pid;
};

/* start forks a target serving a region of size bytes (allocated in the
 * child, 4 KiB-aligned and zeroed, returned through *region there) and
 * connects the initiator to it. */
static void start(struct job *j, const char *prov, uint64_t caps, size_t size)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) {
		perror("socketpair");
		exit(1);
	}
	j->pid = fork();
	if (j->pid < 0) {
		perror("fork");
		exit(1);
	}
	if (j->pid == 0) {
		close(sv[0]);
		size_t alloc = (size + 4095) & ~(size_t)4095;
		void *region = aligned_alloc(4096, alloc);
		memset(region, 0, alloc);
		serve(sv[1], prov, caps, region, size);
	}
	close(sv[1]);
	j->fd = sv[0];
	open_node(&j->n, prov, caps);
	full(j->fd, &j->w, sizeof j->w, 0);
	if (fi_av_insert(j->n.av, j->w.name, 1, &j->dest, 0, NULL) != 1) {
		fprintf(stderr, "fi_av_insert failed\n");
		exit(1);
	}
}

/* stop ends the target and closes the initiator's node. */
static void stop(struct job *j)
{
	full(j->fd, "x", 1, 1);
	waitpid(j->pid, NULL, 0);
	close_node(&j->n);
}

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* reap reads up to 16 completions and returns how many, exiting on an
 * error completion or a failed read. */
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

/* median_p99 sorts t (n samples) and stores its median and 99th
 * percentile. */
static void median_p99(double *t, int n, double *med, double *p99)
{
	qsort(t, (size_t)n, sizeof *t, cmpd);
	*med = t[n / 2];
	*p99 = t[(int)(n * 0.99)];
}

#endif
