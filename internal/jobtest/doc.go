// Package jobtest runs jobs under real launchers for tests: MPICH's
// Hydra (mpiexec.hydra), Slurm's srun --mpi=pmi2 on a one-node cluster it
// starts itself as root (munged, slurmctld and slurmd with every file in
// one temporary directory), and N processes started with the environment
// torchrun gives its workers (RANK, WORLD_SIZE, MASTER_ADDR, ...).
//
// Every run has a deadline and kills its whole process group when it
// ends; the cluster's daemons die with the test process (Pdeathsig), and
// a cluster a killed test left behind is reaped at the next start. When a
// launcher is missing the calls skip the test, except under CI (the CI
// environment variable set), where they fail it: CI installs them.
//
// Ranks are usually the test binary itself: ChildArgs re-executes it with
// -test.run naming the test that plays a rank, and a rank prints its
// result as a line "@@rank R ..." that Result.Ranks collects.
//
// Test support only: it imports nothing from gofi and carries no
// compatibility promise (it is internal).
package jobtest
