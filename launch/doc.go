// Package launch starts a gofi job: it learns this process's rank, the job
// size and the ranks sharing its host from whatever launched it, and gives
// the ranks a small key-value exchange to swap endpoint names before the
// first message (launch.Connect).
//
// Init speaks the launcher's own wire protocol, in pure Go; gofi starts no
// daemons of its own:
//
//   - PMI-1 and PMI-2 (pmi1.go, pmi2.go over wire.go): the process
//     management interface of MPICH's Hydra (mpiexec.hydra) and of Slurm's
//     srun --mpi=pmi2, found through PMI_FD or PMI_PORT.
//   - the env rendezvous (env.go): RANK, WORLD_SIZE, MASTER_ADDR and
//     MASTER_PORT as torchrun and Kubernetes training operators set them;
//     rank 0 serves the exchange over TCP.
//   - otherwise a singleton (singleton.go): rank 0 of 1.
//
// Each is a kvs (kvs.go), one small interface; Job (job.go) builds on it:
// it names keys per rank, encodes values of any bytes for the launcher's
// character set and splits them across keys when they exceed its value
// limit (value.go).
//
// Imports: the root package fi (for Errno, Endpoint and AV) and the
// standard library. launch imports fi, never the reverse; nothing in the
// library imports launch.
package launch
