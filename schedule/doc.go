// Package schedule names the slots of a once-per-slot job
// (distlock.Once, the distlock once command) by time: one slot per hour
// (Hourly), per day (Daily) or per fire time of a cron expression (Cron),
// in a time zone every instance agrees on, so that a fleet's instances
// agree on the slot that is due without talking to each other.
//
// Why a package of its own: it is the only part of distlock's user
// contract that needs a cron parser (github.com/robfig/cron/v3). In the
// root package, every program that imports distlock, etcdlock or zklock
// would link that parser in, whether or not it names slots by time; here,
// only the programs that use a Schedule do. Once itself stays in the root
// package: it takes a slot name of any origin ("batch-42" as well as
// "2026-12-01"), and its marker store (distlock.SlotMarks) is what the
// backends' Marks implement, so the backends need not import a helper
// package to name it.
package schedule
