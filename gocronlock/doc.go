// Package gocronlock plugs distlock into go-co-op/gocron v2, the in-process
// scheduler most Go services use: a Locker (gocron.WithDistributedLocker,
// WithDistributedJobLocker) that runs each job once per slot across a
// fleet, and an Elector (gocron.WithDistributedElector) that lets only the
// leader's scheduler run jobs.
//
// # Why a slot, not only a lock
//
// gocron's own contract for a Locker is a lock held while the job runs.
// With instances whose clocks differ a little, or that fire a little late
// (start-time splay), that is not enough: a fast job's lock is released
// before the slower instances try, so each of them runs the job again for
// the same scheduled time (go-co-op/gocron#841). No lock alone can tell a
// second run of a slot from the next slot's run, because none records
// which slot ran.
//
// The Locker does: Lock takes the lock of the job's current slot — the
// time rounded to the period the Locker is made with; each slot has a
// lock of its own (distlock.SlotLockName) — waiting for it until the slot
// ends, when the next slot is due. Holding it, Lock looks for the slot's
// done-marker and fails (gocron then skips the run) when the slot is
// done. The marker is distlock.Once's (etcdlock.NewMarks, zklock.NewMarks,
// kept per job), written with the slot lock's token while its entry
// exists, so `distlock status` shows it and a holder that lost the lock
// cannot write it. gocron does not tell a Locker whether the job failed,
// so a job that returned an error counts as done all the same.
//
// # When the instance running a slot dies
//
// A runner killed mid-run (kill -9, a crashed host) leaves its entry in
// the slot's lock until its session's TTL ends it; the other instances
// are queued behind it, waiting until the slot ends.
//   - AtLeastOnce (the default) marks the slot in Unlock, after the job.
//     The killed slot has no marker, so the first instance in the queue
//     runs it again once the entry is gone — exactly one, since the
//     others then find its marker — about a TTL after the kill: in the
//     crash test (three gocron processes, clocks ±300 ms apart, a
//     400-800 ms job) 1.6-2.2 s after the kill with a 2 s etcd TTL and
//     4 s slots, 0.7-1.0 s with an 800 ms ZooKeeper session timeout and
//     2 s slots.
//   - AtMostOnce marks the slot in Lock, before the job: the killed slot
//     counts as done and is not run again.
//
// Either way the next slot takes another lock, which the dead runner
// never held: it runs on time. A rerun must start before the slot ends,
// so in AtLeastOnce mode NewLocker refuses a session TTL that is not
// shorter than the period (ErrTTLTooLong); pick one below the period less
// the job's run time and the instances' lateness (TTL + run time +
// lateness < period), e.g. etcd's minimum of 2 s for slots of 4 s and
// more. A wait bounded by WithWait below the TTL would give up on a
// killed runner before its entry is gone.
//
// The slot is the Locker's clock rounded to the nearest multiple of the
// period (UTC): instances agree on it as long as each fires within half a
// period of the scheduled time, skew and splay included. Use a period
// equal to the job's interval, with jobs that fire at fixed wall-clock
// times (gocron.CronJob, DailyJob, ...), not at intervals counted from each
// instance's start.
package gocronlock
