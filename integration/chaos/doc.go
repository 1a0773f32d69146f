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
// ElectionWorkload campaigns with priorities (worker 0 always the
// highest, the others drawn at each campaign) in an election with a short
// preempt grace, on sessions mostly revocable. Each term reads and writes
// back plus one the same three registers with its term's token, then
// ends at random by Resign, by HandOff to the next in line, by HandOff to
// a named worker (ErrNoCandidate leaves it leading; it resigns), or by
// holding until preempted (then handing off) — or, stubborn, until forced
// out, writing with its stale token after its successor. Checked: the
// register checks, one leader at a time outside forced expiries (leaders
// forced out by a preemption included), at most one Leadership's Done open
// at any instant (each term timed in process from its Campaign's return
// to its Done's close; overlaps after forced ends counted apart), one
// leader per term, terms' tokens strictly increasing by real time, each
// handoff's returned term newer and the very token its successor's
// Campaign returned, observers seeing terms strictly in order with no "no
// leader" inside a handoff.
//
// More workloads exercise the other recipes: RWWorkload (no writer
// overlaps anyone, readers may overlap) and SemaphoreWorkload (no slot
// held twice, at most N holds at once).
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
