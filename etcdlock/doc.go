// Package etcdlock runs distlock's recipes (package recipe) on etcd v3.
// It holds what belongs to etcd alone: a Session, one lease kept alive
// with a conservative client-side deadline, made from the caller's own
// *clientv3.Client (NewSession and its options), the session's lease ID
// and client, and NewAdmin, an Admin of a client's locks. The recipes
// themselves (recipe.Mutex, RWMutex, MultiMutex, Election, Semaphore,
// Marks, Admin) are written and documented once, in package recipe, for
// etcd and ZooKeeper alike, and take a *Session:
//
//	sess, err := etcdlock.NewSession(ctx, client)
//	m, err := recipe.NewMutex(sess, "daily-report")
//
// This documentation says how their entries look on etcd and what each
// call costs there.
//
// # What each call costs
//
//   - Mutex.Lock: one Txn that puts the key (bound to the lease) and reads
//     the nearest entries ahead; uncontended, that is the whole acquire.
//     Waiting is one watch on the key just ahead, from the current
//     revision. The token is the key's create revision.
//   - Mutex.TryLock: one Txn that compares the lock's queue and puts the
//     key only if it is empty: a loss writes nothing.
//   - Lease.Unlock: one Txn, the delete guarded by the key's create
//     revision (with WithLockDelay, the release mark put in the same Txn).
//   - RWMutex: as Mutex; TryRLock compares the writers' keys only.
//   - MultiMutex.Lock: one Txn that puts one key per name, all at one
//     revision (every token of the acquisition carries it), then a wait in
//     every name's queue at once; TryLock compares every name's queue in
//     the one Txn.
//   - Election.Campaign: uncontended, the enqueue Txn and the claim Txn;
//     the candidate follows the election with one watch on its
//     candidates, term record and foreign candidates (see below). Leader
//     is one linearizable Txn of range reads; Observe one watch from the
//     next revision, reading again after a compaction, a member's failure
//     or a reconnect. Proclaim is a Put
//     guarded by the key's create revision; HandOff and Resign one Txn.
//   - Semaphore.Acquire: a direct claim is one Txn that puts the slot's
//     key only if the slot is free and the line is empty; a waiter puts a
//     line key and watches the one ahead; the head watches the slots and
//     claims a freed one in one Txn that also deletes its line key.
//     TryAcquire is the direct claim alone.
//   - Admin.Inspect: one linearizable Txn of range reads sorted by create
//     revision (a consistent snapshot, the foreign keys of the name
//     included); QueueEntry.Created is zero, since
//     etcd keeps no creation time (the distlock command puts one in the
//     value). WatchQueue: one watch on the lock's name, set before each
//     read; it requires a leader, so a member cut off from the others ends
//     it with an error rather than going silent.
//   - Marks: Marker is one linearizable read; Mark one Txn through the
//     fence that also requires the lease's key, create revision and
//     lease; Markers one linearizable Txn (the count and n values); Prune
//     one request.
//   - Session.Close: one Revoke of the lease, which deletes all its keys
//     at once.
//
// # Keys
//
// A lock named N under the session's prefix P keeps its queue under
// "P" + N + "/@": each acquisition attempt puts one key
// "P" + N + "/@" + kind + lease + "_" + counter, bound to the session's
// lease. The "@" cannot occur in lock names (see distlock.ValidateName), so
// the keys of lock "a" never fall under the prefix of lock "a/b" or the
// other way round. Every Lock call has its own key, even for several
// goroutines sharing one session and one lock name: they queue like
// separate processes, in FIFO order, instead of one mistaking another's key
// for its own.
//
// A session may also have one guard key, "P" + "@guard/" + lease, bound to
// its lease: every enqueue Txn compares it, and the cleanup of an enqueue
// whose outcome is unknown (a Lock that failed or was cancelled while its
// Txn was in flight) moves it and deletes the key in one Txn, so the put,
// should the server apply it late, can never re-create a key after its
// cleanup: that put's compare of the guard fails once the cleanup moved
// it. It exists only once such a
// cleanup has happened, and goes with the lease. It is in no lock's queue:
// no lock name starts with "@".
//
// # Handoff
//
// Enqueue is one Txn that puts the key and reads the two newest entries it
// conflicts with (sorted by create revision, limited): an enqueue reads
// and a waiter keeps the same few keys whether ten or ten thousand are
// queued, and when those two are gone while older ones may be left, one
// read says whether any is. The waiter then
// watches only the nearest conflicting entry ahead of it, and when that one
// goes, moves on in the snapshot it already has: entries only leave the
// part of the queue ahead of it, never join it. While older entries may
// remain, it also follows the nearest of them, and when that one goes, one
// serializable read finds what is left: in a FIFO queue that happens when
// the predecessor acquires, so by the time the predecessor releases, the
// waiter knows nothing older is left. A release then costs the holder's one
// guarded delete and one watch notification; the read lands on the handoff
// only when the predecessor held for less than a round trip.
//
// Watches on the predecessor are opened at the current revision, never at a
// past one: etcd serves watchers that start in the past from a catch-up loop
// that runs every 100 ms, which is what makes concurrency.Mutex slow to hand
// over. A deletion that happened between the enqueue and the moment the
// watch started is found by one read at the watch's start revision, made
// only when the revision moved in between.
//
// # Readers and writers
//
// RWMutex keeps readers ("@r…") and writers ("@w…") in the same queue as
// Mutex (a Mutex is a writer there) and grants it in FIFO order: a writer
// waits on its immediate predecessor, a reader on the nearest writer ahead
// of it, so a reader that arrives while a writer waits queues behind that
// writer and a stream of readers cannot starve it. Readers between two
// writers hold together; each watches the writer ahead on its own watch,
// so a writer's release wakes exactly the readers behind it, each by one
// watch event. TryRLock compares the writers' sub-prefix only: it wins
// while readers alone hold, and loses, writing nothing, while any writer
// holds or waits.
//
// A reader's fencing token is its key's create revision like any other:
// readers holding together have distinct tokens that are not ordered among
// themselves for exclusivity. A writer's token exceeds every earlier
// reader's and writer's, so a fence that admits writers' tokens refuses any
// writer or reader older than the newest writer it admitted. Readers must
// not record their tokens in a writers' fence (one reader's token would
// refuse the older readers beside it); see RWMutex.
//
// # Election
//
// Election's candidates are keys of their own kind, "P" + N + "/@e" +
// lease + "_" + counter ("@ep" + priority + "." + lease + "_" + counter
// for a priority other than 0), whose value is the candidate's value. The
// term record is the key "P" + N + "/@l", whose value names the leading
// candidate's key, bound to the leader's lease; the leader's token is the
// record's mod revision, the revision of the Txn that began its term. A
// candidate leads once the record names it; a term is vacant when the key
// it names is gone, and the next in line (the highest priority, then the
// oldest) claims it with a Txn guarded by the record's mod revision and
// its own key's create revision, so there is no phantom leader and no two
// terms overlap. Resign and HandOff delete the leader's key and put the
// record naming the successor, with the successor's lease, in one Txn
// guarded the same way: the successor's term begins at the revision the
// leader's ends. A Campaign that fails leaves no key behind.
//
// Lock entries and candidates live in the same "/@" directory but never
// wait for each other: a lock's queue is the key range from "@r" to the
// end of the "@w" sub-prefix (readers and writers), an election's the "@e"
// sub-prefix and the "@l" record, which sort before it, so an Election
// and a Mutex or RWMutex of the same name do not interfere — the same
// behaviour as zklock, where candidates are "@e-…" nodes that lock queues
// ignore. Inspect lists both (give them different names).
//
// Proclaim is a Put guarded by the key's create revision (the key gone:
// distlock.ErrNotLeader); it does not hand leadership over. Leader is one
// linearizable range read of the candidates and the record; Observe reads
// them, then follows them with one watch from the next revision, reading
// again after compaction, member failure or a reconnect, and sends every
// change, "no leader" (the zero distlock.LeaderInfo) included, in order.
//
// Compared with etcd's concurrency.Election: a graceful handoff is one
// Txn after one read, with the successor chosen (by value, or by
// priority) and its term begun by that Txn, where etcd's Resign deletes
// and the next candidate then reads; a candidate of a higher priority can
// preempt the leader through a revocation record; a Campaign that fails
// or is cancelled deletes its key before returning; Observe reports "no
// leader" too. After a leader's session ends, the successor's claim is
// one write more than etcd's failover, which needs none: a term that
// begins by a write is what keeps tokens growing when the successor is
// not the oldest candidate.
//
// # Lock-delay
//
// With recipe.WithLockDelay, a session marks each release, in the
// release's own Txn (one round trip, as without it), by putting one key
// of its lease, "P" + "@released/" + lease in hex. A waiter that sees the
// key ahead deleted reads that mark at the delete's revision (one
// serializable read), and without it asks whether the key's lease still
// lives (TimeToLive: gone means the session ended). Without a delay no
// request is made. What etcd cannot tell: a key deleted by another client
// while its owner's lease lives counts as released; so does a waiter's
// giving up. A holder without the option does not mark its releases, and
// one that Unlocks and at once closes its session may then cost its
// successor a needless delay.
//
// # Other clients' locks of the same name
//
// etcd's own lock and election — the concurrency package's Mutex and
// Election, the v3lock and v3election services, etcdctl lock and elect —
// keep their waiters under the name they are given: a lock of "P" + "N"
// puts "P" + "N" + "/" + its lease ID in hex. The contrib recipes'
// RWMutex puts "P" + "N" + "/write/…" and "P" + "N" + "/read/…". All of
// them order their waiters by create revision, as this package does, so
// their keys and this package's entries make one queue: a Lock, RLock,
// TryLock or Campaign of lock "N" on prefix "P" is never granted while
// such a key of the same name, created before its own entry and
// conflicting with it (a reader waits for writers only; etcd's key is a
// writer, and a candidate in the election of that name), is there. It
// waits for that key's delete like for its own predecessor, and a TryLock
// fails with ErrLocked. Those clients wait for this package's entries
// too, by their own rules (the recipes' readers only with
// CompatEtcdRecipes, see below). Inspect lists the foreign keys with their
// Client (distlock.ClientEtcd, distlock.ClientEtcdRecipes), Kind and the
// Token this package would give them; a key under "P" + "N" + "/" that
// none of them made, nor a longer lock name ("N/sub"), is listed as
// distlock.ClientUnknown, logged once per session as a warning, and not
// waited for. A queue without foreign keys costs no request more: the
// reads of them are in the Txns the package sends anyway. With a
// lock-delay, a foreign key's release is told by its lease (etcd's key
// names it); the recipes' keys name none, so their going always counts as
// not released. docs/interop.md has the rules of each client.
//
// # Compatibility modes
//
// Without a mode, exclusion with etcd's clients holds both ways for a
// Mutex and for etcd's own lock, but not for the contrib recipes'
// readers: they wait only for keys under "P" + "N" + "/write", where this
// package's writers are not, so a recipes RLock is granted while a
// distlock writer holds. distlock.WithCompat names the other client a
// lock is shared with; every process must give the lock the same mode.
//
// distlock.CompatEtcd, for a Mutex, is shared with etcd's
// concurrency.Mutex, the v3lock service and etcdctl lock. They wait for
// every older key under their prefix, this package's entries included,
// so the mode changes no key: it names the sharing. One difference stays:
// a second Lock of etcd's Mutex on the same session (the same lease)
// reuses the session's one key under the prefix, so it returns at once
// and the two hold together on one key, which the first Unlock deletes
// for both; a second Lock of this package on the same Session makes an
// entry of its own and waits for the first like any other waiter.
//
// distlock.CompatEtcdRecipes, for an RWMutex, is shared with the contrib
// recipes' RWMutex (go.etcd.io/etcd/client/v3/experimental/recipes). Its
// writers' entries move to "P" + "N" + "/write/#w" + lease + "_" +
// counter, where the recipes' readers look for writers; readers stay in
// the queue ("/@r…"), which the recipes' writer, waiting for every older
// key under the name, already waits for. '#' starts no lock-name segment,
// so the moved entries are no keys of lock "N/write" (whose own are under
// "P" + "N" + "/write/@") or of any other name, and the two locks do not
// wait for each other. The moved entries are this package's own in every
// other way: any reader or writer of lock "N", with the mode or without,
// waits for them, at the same cost; Inspect lists them with no Client;
// they are released, revoked and followed like the others. The recipes'
// readers order themselves by mod revision, so a writer's enqueue that
// was retried after a lost answer (a second put of its key) is ordered
// by its last put for them.
//
// The modes of ZooKeeper's clients (distlock.CompatCurator, ...) are
// refused on etcd, as is a mode for a recipe the other client does not
// share (CompatEtcdRecipes for a Mutex, CompatEtcd for an RWMutex): the
// constructor's error wraps errors.ErrUnsupported.
// So is CompatEtcd for an Election: etcd's Election leads with the
// oldest key under the name and reports that key's value as the leader's,
// while this package's term record is a key under the name too. It is
// deleted with its leader's entry, but when that entry is deleted by
// anyone else the record stays until the leader's session ends, and the
// next term's claim overwrites it, keeping its older create revision:
// etcd's Leader would then report the record, whose value is a key's
// name, as the leader.
// Without the mode, an Election still waits for etcd's candidates that
// are older than its own.
//
// # One member failing
//
// A client configured with every member spreads its requests over them
// (gRPC round robin). A member that is frozen or cut off keeps its
// connections open and answers nothing, so a request that lands on it
// hangs; one that is killed refuses connections and is skipped. Requests
// that may be repeated — the keepalive, the guarded delete of a release,
// the reads of a waiter — are hedged: when an attempt is unanswered after
// a tenth of the TTL another goes out beside it, and the balancer sends it
// to the next member; the first answer wins, and the session's deadline
// counts from the send time of the attempt that was answered. A watch
// stream that sat on the failed member goes silent: each watch that has
// heard nothing for a sixth of the TTL asks its stream for a progress
// notification (one request per stream, answered to every watch on it),
// and after half the TTL without an answer the session opens its watches
// on a new stream, hence on another member, with the gap read that any
// re-opened watch makes. So a holder keeps its lock and a waiter its
// place, and hears a release, while two members serve. Enqueueing (Lock's
// first Txn) is not hedged: its put is not idempotent.
package etcdlock
