// Package qlock is distlock's queue-lock engine, written once for every
// store: the life cycle of an entry, the rules of who waits for whom, and
// the recipes built on them. A store is reached only through the Driver
// interface (the queue mechanics) and the capability interfaces Slots,
// Elections and RevokeFollower (driver.go); its drivers live below this
// package (etcdq for etcd, zkq for ZooKeeper). A driver's session makes
// its State and its Engine (New), and the public packages etcdlock and
// zklock hand that engine to the recipes here.
//
// The life cycle (lifecycle.go, the place to read one acquisition from
// start to end): an acquisition enqueues one entry, whose position in the
// queue the store sets and only ever grows; it follows that entry (a
// delete by anyone else, or the session's end, fails the wait or loses
// the hold); it waits on one entry at a time, in a view of the entries
// ahead that only shrinks (queue.go); a last look (ConfirmAll) comes before
// it is reported held; the held entry is a distlock.Lease that ends with
// it; the release deletes the entry only while it is still this
// acquisition's; and every failure removes the entry it made.
//
// The rules (kind.go): an entry's Kind says whom it waits for. An
// exclusive entry (a Mutex's, an RWMutex writer's) waits for every lock
// entry ahead of it, a shared one (an RWMutex reader's) for exclusive
// ones only; candidates (an Election's) and counted entries (a
// Semaphore's line) are queues of their own, each entry waiting for every
// one of its kind ahead. An entry holds when no entry ahead of it
// conflicts with it; until then it waits on the nearest one that does.
//
// The recipes: Mutex and RWMutex (recipes.go), Election (election.go),
// and Semaphore (semaphore.go): N permits kept as numbered slots beside a
// FIFO line whose head alone claims a free slot. A recipe adds its own
// part to a held entry through hooks; every acquisition is traced and
// measured in one place (lock.takeWith, telemetry.go). The rest is what
// every session has (session.go: its end, its client-side deadline, kept
// suspend-safe by clock.go, its background work, and the part users see),
// revoking holders (revoke.go) and cleanups retried until done (retry.go).
package qlock
