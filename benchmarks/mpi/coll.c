/*
 * coll.c: the MPI side of "perftest coll" (../../cmd/perftest/coll.go):
 * the latency of MPI_Barrier, MPI_Bcast, MPI_Allreduce, MPI_Allgather and
 * MPI_Alltoall per size, timed the way the OSU micro-benchmarks time them
 * and printed in perftest coll's table format, so ../coll.sh can set the
 * two side by side.
 *
 * Per size: one checked call (every rank's data distinct, the result
 * known), a barrier, -x warm-up calls, then -I timed calls; each call is
 * timed on its own (MPI_Wtime before and after) and followed by an
 * MPI_Barrier (but barrier's own test). A rank's figure is its average
 * call; the table gives the average over ranks, the fastest and slowest
 * rank's, and the median over ranks of each rank's median call.
 * Allreduce is MPI_FLOAT MPI_SUM (size/4 floats), the others MPI_CHAR;
 * allgather and alltoall sizes are per rank block, as in OSU.
 *
 * Build: mpicc.mpich -O2 -o coll-mpich coll.c    (or mpicc.openmpi)
 * Run:   mpiexec.hydra -n 4 ./coll-mpich [-c barrier,bcast,...] [-S 4,64,1024 | -m [min:]max] [-I iters] [-x warmup]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXSIZES 64

static const char *names[] = {"barrier", "bcast", "allreduce", "allgather", "alltoall"};
enum { NCOLL = 5 };

static int rank, nranks;
static char *buf, *res;

static double median(double *v, int n)
{
	/* insertion sort: n is at most a few thousand, once per size */
	for (int i = 1; i < n; i++) {
		double x = v[i];
		int j = i - 1;
		while (j >= 0 && v[j] > x) {
			v[j + 1] = v[j];
			j--;
		}
		v[j + 1] = x;
	}
	if (n == 0)
		return 0;
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int parse_size(const char *s)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (*end == 'k' || *end == 'K')
		v <<= 10;
	else if (*end == 'm' || *end == 'M')
		v <<= 20;
	return (int)v;
}

static void call(int c, int size)
{
	switch (c) {
	case 0:
		MPI_Barrier(MPI_COMM_WORLD);
		break;
	case 1:
		MPI_Bcast(buf, size, MPI_CHAR, 0, MPI_COMM_WORLD);
		break;
	case 2:
		MPI_Allreduce(buf, res, size / 4, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		break;
	case 3:
		MPI_Allgather(buf, size, MPI_CHAR, res, size, MPI_CHAR, MPI_COMM_WORLD);
		break;
	case 4:
		MPI_Alltoall(buf, size, MPI_CHAR, res, size, MPI_CHAR, MPI_COMM_WORLD);
		break;
	}
}

/* fill and check mirror perftest coll's checked call. */
static void fill(int c, int size, int k)
{
	if (c == 2) {
		for (int i = 0; i + 4 <= size; i += 4) {
			float f = (float)((rank + 1) * (i / 4 % 7 + 1) + k);
			memcpy(buf + i, &f, 4);
		}
	} else if (c == 1) {
		for (int i = 0; i < size; i++)
			buf[i] = (char)(i * 7 + k + rank * 0x55);
	} else {
		for (long i = 0; i < (long)size * nranks; i++)
			buf[i] = (char)(rank * 31 + i / (size ? size : 1) * 17 + i + k);
	}
	memset(res, 0, (size_t)size * nranks);
}

static int check(int c, int size, int k)
{
	int n = nranks;
	if (c == 2) {
		for (int i = 0; i + 4 <= size; i += 4) {
			float f, want = (float)(n * (n + 1) / 2 * (i / 4 % 7 + 1) + n * k);
			memcpy(&f, res + i, 4);
			if (f != want) {
				fprintf(stderr, "rank %d: allreduce of %d B: element %d is %g, want %g\n", rank, size, i / 4, f, want);
				return -1;
			}
		}
	} else if (c == 1) {
		for (int i = 0; i < size; i++)
			if (buf[i] != (char)(i * 7 + k)) {
				fprintf(stderr, "rank %d: bcast of %d B: byte %d wrong\n", rank, size, i);
				return -1;
			}
	} else if (c == 3) {
		for (int r = 0; r < n; r++)
			for (int i = 0; i < size; i++)
				if (res[(long)r * size + i] != (char)(r * 31 + i + k)) {
					fprintf(stderr, "rank %d: allgather of %d B: rank %d's byte %d wrong\n", rank, size, r, i);
					return -1;
				}
	} else if (c == 4) {
		for (int r = 0; r < n; r++)
			for (int i = 0; i < size; i++) {
				long j = (long)rank * size + i;
				if (res[(long)r * size + i] != (char)(r * 31 + j / (size ? size : 1) * 17 + j + k)) {
					fprintf(stderr, "rank %d: alltoall of %d B: byte %d from rank %d wrong\n", rank, size, i, r);
					return -1;
				}
			}
	}
	return 0;
}

int main(int argc, char **argv)
{
	int sizes[MAXSIZES], nsizes = 0, iters_flag = -1, warm_flag = -1, want[NCOLL] = {1, 1, 1, 1, 1};
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	for (int i = 1; i + 1 < argc; i += 2) {
		const char *f = argv[i], *v = argv[i + 1];
		if (!strcmp(f, "-c")) {
			memset(want, 0, sizeof want);
			char *s = strdup(v);
			for (char *t = strtok(s, ","); t; t = strtok(NULL, ","))
				for (int c = 0; c < NCOLL; c++)
					if (!strcmp(t, names[c]))
						want[c] = 1;
			free(s);
		} else if (!strcmp(f, "-S")) {
			char *s = strdup(v);
			for (char *t = strtok(s, ","); t && nsizes < MAXSIZES; t = strtok(NULL, ","))
				sizes[nsizes++] = parse_size(t);
			free(s);
		} else if (!strcmp(f, "-m")) {
			int lo = 1, hi;
			const char *colon = strchr(v, ':');
			if (colon) {
				lo = parse_size(v);
				hi = parse_size(colon + 1);
			} else
				hi = parse_size(v);
			for (int n = lo > 0 ? lo : 1; n <= hi && nsizes < MAXSIZES; n *= 2)
				sizes[nsizes++] = n;
		} else if (!strcmp(f, "-I"))
			iters_flag = atoi(v);
		else if (!strcmp(f, "-x"))
			warm_flag = atoi(v);
	}
	if (nsizes == 0)
		for (int n = 1; n <= 1 << 20; n *= 2)
			sizes[nsizes++] = n;
	int maxsize = 4;
	for (int i = 0; i < nsizes; i++)
		if (sizes[i] > maxsize)
			maxsize = sizes[i];
	buf = malloc((size_t)maxsize * nranks);
	res = malloc((size_t)maxsize * nranks);
	int most = iters_flag > 0 ? iters_flag : 1000;
	double *samples = malloc(sizeof(double) * most);
	double *gather = malloc(sizeof(double) * 2 * nranks);

	char lib[MPI_MAX_LIBRARY_VERSION_STRING];
	int liblen;
	MPI_Get_library_version(lib, &liblen);
	const char *tool = strstr(lib, "Open MPI") ? "openmpi" : strstr(lib, "MPICH") ? "mpich" : "mpi";
	if (rank == 0) {
		char *nl = strchr(lib, '\n');
		if (nl)
			*nl = 0;
		printf("# %s coll: %d ranks; %s\n", tool, nranks, lib);
	}

	for (int c = 0; c < NCOLL; c++) {
		if (!want[c])
			continue;
		if (rank == 0) {
			printf("\n# %s%s\n", names[c], c == 2 ? " (FLOAT SUM)" : c >= 3 ? " (size per rank)" : "");
			printf("# %-10s %16s %16s %16s %11s %12s %12s\n", "Size", "Avg Latency(us)", "Min Latency(us)",
			       "Max Latency(us)", "Iterations", "P50(us)", "Allocs/call");
		}
		int k = 0;
		for (int s = 0; s < (c == 0 ? 1 : nsizes); s++, k++) {
			int size = c == 0 ? 0 : sizes[s];
			if (c == 2 && (size < 4 || size % 4))
				continue;
			int iters = size > 8192 ? 100 : 1000, warm = size > 8192 ? 10 : 200;
			if (iters_flag > 0)
				iters = iters_flag;
			if (warm_flag >= 0)
				warm = warm_flag;
			if (c != 0) {
				fill(c, size, k);
				call(c, size);
				if (check(c, size, k))
					MPI_Abort(MPI_COMM_WORLD, 1);
			}
			MPI_Barrier(MPI_COMM_WORLD);
			double total = 0;
			for (int i = 0; i < warm + iters; i++) {
				double t0 = MPI_Wtime();
				call(c, size);
				double t = MPI_Wtime() - t0;
				if (i >= warm) {
					total += t;
					samples[i - warm] = t;
				}
				if (c != 0)
					MPI_Barrier(MPI_COMM_WORLD);
			}
			double mine[2] = {total * 1e6 / iters, median(samples, iters) * 1e6};
			MPI_Gather(mine, 2, MPI_DOUBLE, gather, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);
			if (rank == 0) {
				double sum = 0, lo = 1e300, hi = 0, meds[nranks];
				for (int r = 0; r < nranks; r++) {
					double v = gather[2 * r];
					sum += v;
					lo = v < lo ? v : lo;
					hi = v > hi ? v : hi;
					meds[r] = gather[2 * r + 1];
				}
				printf("%-12d %16.2f %16.2f %16.2f %11d %12.2f %12s\n", size, sum / nranks, lo, hi, iters,
				       median(meds, nranks), "-");
				fflush(stdout);
			}
		}
	}
	free(buf);
	free(res);
	free(samples);
	free(gather);
	MPI_Finalize();
	return 0;
}
