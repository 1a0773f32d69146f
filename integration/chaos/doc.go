// Package chaos is a Jepsen-style fault suite for distlock: it runs a
// workload against a real etcd cluster or ZooKeeper ensemble started by the
// integration harness while a nemesis injects faults, records a history of
// every operation with its invoke and complete times, and checks the
// history once every fault is healed.
//
// A run is described by a Config (store, workload, nemeses, duration,
// seed) and executed by Run, which returns a Result: the checkers'
// verdicts, the history and the counts the summary table shows. Every run
// prints its seed; the same seed replays the same choice and timing of
// faults (the servers' own timing still varies from run to run).
//
// The register workload is the heart of the suite: workers take one
// Mutex, and inside the critical section read a register and write it
// back incremented, on three registers at once: one fenced in memory
// (fencing.Memory), one fenced in the store (etcdfence or zkfence), and
// one that is not fenced at all, the control. A lock alone cannot keep a
// holder that paused past its TTL from writing after its successor, so
// under the holder-pause nemesis the control must lose updates (and the
// checkers must say so), while the fenced registers must stay
// linearizable. A checker that never fails proves nothing.
//
// MultiWorkload does the same with multi-locks: workers take one
// MultiMutex on a random two or three of three lock names, listed in a
// random order, and in the critical section read and write back plus one
// the three registers of every name held; the memory registers of all
// its names in one fencing.DoAll, the store registers in one
// etcdfence.WriteAll or zkfence.WriteAll, each with the acquisition's
// token of its own name, the controls one by one. The paused child holder
// takes one name's plain Mutex, which the multi-locks of that name must
// exclude. Checked: the register checks on every name's registers (the
// controls flagged under holder pauses, the fenced ones not), mutual
// exclusion, handoffs and FIFO per name over the history as each name's
// queue saw it, and one token per name, all of one sequence, per
// acquisition.
//
// More workloads exercise the other recipes: RWWorkload (no writer
// overlaps anyone, readers may overlap), ElectionWorkload (one leader per
// term, leaderships never overlap, Observe reports terms in order) and
// SemaphoreWorkload (no slot held twice, at most N holds at once).
// Every run also checks liveness after the last heal, that no queue entry
// is left once every session closed, and FIFO order on fault-free runs.
//
// Nemeses (AllNemeses, Nemeses) pause a lock holder in a child process
// past its TTL, kill or pause members, kill the leader, partition the
// leader or a follower (both directions or one), expire from outside the
// ZooKeeper session of a worker stalled inside its critical section (two
// then believe they hold: the fences must refuse the loser), hold or drop a ZooKeeper client's replies, and
// compact etcd's history. The schedule draws them, their targets and
// their lengths from the run's seed.
//
// The package's tests run a short version of the suite in "go test"; the
// Makefile's chaos target runs the long one (CHAOS_DURATION, CHAOS_SEED,
// CHAOS_OUT).
package chaos
