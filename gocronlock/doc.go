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
// The Locker does: Lock takes the job's lock without waiting, then looks
// for the done-marker of the job's current slot — the time rounded to the
// period the Locker is made with — and fails (gocron then skips the run)
// when the lock is held or the slot is done. The marker is distlock.Once's
// (etcdlock.NewMarks, zklock.NewMarks), written through the lock's fence
// with its token while its entry still exists, so `distlock status` shows
// it and a holder that lost the lock cannot write it. In AtMostOnce mode
// it is written in Lock, before the job runs; in AtLeastOnce mode (the
// default) in Unlock, after it: a scheduler that dies mid-run leaves the
// slot unmarked, and an instance that tries later in the slot runs it
// again. gocron does not tell a Locker whether the job failed, so a job
// that returned an error counts as done all the same.
//
// The slot is the Locker's clock rounded to the nearest multiple of the
// period (UTC): instances agree on it as long as each fires within half a
// period of the scheduled time, skew and splay included. Use a period
// equal to the job's interval, with jobs that fire at fixed wall-clock
// times (gocron.CronJob, DailyJob, ...), not at intervals counted from each
// instance's start.
package gocronlock
