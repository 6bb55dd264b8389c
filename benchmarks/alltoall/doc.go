// Command alltoall is gofi's side of the job-scale benchmark: N ranks on
// one host, every rank sends a message to every other rank, some rounds
// in a row, over the shm provider. alltoall.c is the same exchange in MPI
// (MPI_Irecv, MPI_Isend, MPI_Waitall per round), and run.sh runs both
// side by side under mpiexec.hydra, alternating, at several job sizes.
//
// Under a launcher (mpiexec.hydra, srun, torchrun's environment) a rank
// joins the job with package launch and swaps addresses with
// launch.Connect. A test that starts the ranks itself sets A2A_RANK,
// A2A_SIZE and A2A_DIR instead: the addresses then meet as files in that
// directory.
//
// Each round posts N-1 receives, sends N-1 messages (of -size bytes, the
// first 16 naming round and sender, checked on receipt) and waits for the
// 2(N-1) completions in CQ.Sread, which spins briefly and then sleeps on
// the endpoint's doorbell. A warm-up round connects everybody; a barrier
// (dissemination, zero-byte messages) starts the timed rounds together.
// Rank 0 prints one line: the slowest rank's time, and the bytes the shm
// directory holds once everybody is connected and at the end.
//
// Usage: alltoall [-size 64[,64k,...]] [-kind msg[,tagged]] [-rounds 2] [-hold] [-timeout 60s]
//
// It imports fi, launch and shm (for the shm directory's accounting).
package main
