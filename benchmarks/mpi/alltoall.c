/*
 * alltoall.c: the MPI side of gofi's job-scale benchmark (see ../alltoall/main.go):
 * every rank sends a message of -size bytes to every other rank, some
 * rounds in a row: per round MPI_Irecv from everybody, MPI_Isend to
 * everybody (starting at the next rank), MPI_Waitall. A warm-up round and
 * a barrier come first; rank 0 prints the slowest rank's time for the
 * timed rounds, in the same format as gofi's side.
 *
 * Build: mpicc.mpich -O2 -o alltoall-mpi alltoall.c
 * Run:   mpiexec.hydra -n 64 ./alltoall-mpi [-size 64] [-rounds 2]
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_round(char **recv, int rank, int size, int64_t k)
{
	for (int j = 0; j < size; j++) {
		int64_t got[2];
		if (j == rank)
			continue;
		memcpy(got, recv[j], sizeof got);
		if (got[0] != k || got[1] != j) {
			fprintf(stderr, "alltoall-mpi rank %d: the receive from rank %d holds round %lld from rank %lld\n",
				rank, j, (long long)got[0], (long long)got[1]);
			return -1;
		}
	}
	return 0;
}

static int round_(char **send, char **recv, MPI_Request *req, MPI_Status *st, int rank, int size, int bytes, int64_t k)
{
	int n = 0;
	for (int d = 1; d < size; d++) {
		int j = (rank - d + size) % size;
		MPI_Irecv(recv[j], bytes, MPI_BYTE, j, 7, MPI_COMM_WORLD, &req[n++]);
	}
	for (int d = 1; d < size; d++) {
		int j = (rank + d) % size;
		int64_t h[2] = {k, rank};
		memcpy(send[j], h, sizeof h);
		MPI_Isend(send[j], bytes, MPI_BYTE, j, 7, MPI_COMM_WORLD, &req[n++]);
	}
	MPI_Waitall(n, req, st);
	return check_round(recv, rank, size, k);
}

int main(int argc, char **argv)
{
	int bytes = 64, rounds = 2, rank, size;
	MPI_Init(&argc, &argv);
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-size"))
			bytes = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-rounds"))
			rounds = atoi(argv[i + 1]);
	}
	if (bytes < 16)
		bytes = 16;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	char **send = calloc(size, sizeof *send), **recv = calloc(size, sizeof *recv);
	MPI_Request *req = calloc(2 * size, sizeof *req);
	MPI_Status *st = calloc(2 * size, sizeof *st);
	for (int j = 0; j < size; j++) {
		send[j] = calloc(1, bytes);
		recv[j] = calloc(1, bytes);
	}
	if (round_(send, recv, req, st, rank, size, bytes, 0))
		MPI_Abort(MPI_COMM_WORLD, 1);
	MPI_Barrier(MPI_COMM_WORLD);
	double t0 = MPI_Wtime();
	for (int k = 1; k <= rounds; k++)
		if (round_(send, recv, req, st, rank, size, bytes, k))
			MPI_Abort(MPI_COMM_WORLD, 1);
	double el = MPI_Wtime() - t0, worst;
	MPI_Reduce(&el, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("mpi alltoall ranks %d size %d rounds %d time %.6f s per-round %.1f us\n",
		       size, bytes, rounds, worst, worst * 1e6 / (rounds > 0 ? rounds : 1));
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Finalize();
	return 0;
}
