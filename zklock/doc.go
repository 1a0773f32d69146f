// Package zklock runs distlock's recipes (package recipe) on ZooKeeper
// (github.com/go-zookeeper/zk). It holds what belongs to ZooKeeper alone:
// a Session that follows the state of a *zk.Conn the caller already has
// (NewSession and its options), the session's ID, connection and the
// servers' tick time, and NewAdmin, an Admin of a connection's locks. The
// recipes themselves (recipe.Mutex, RWMutex, MultiMutex, Election,
// Semaphore, Marks, Admin) are written and documented once, in package
// recipe, for etcd and ZooKeeper alike, and take a *Session:
//
//	sess, err := zklock.NewSession(ctx, conn)
//	m, err := recipe.NewMutex(sess, "daily-report")
//
// This documentation says how their entries look on ZooKeeper and what
// each call costs there.
//
// # What each call costs
//
//   - Mutex.Lock: a protected ephemeral sequential create in the lock's
//     directory (Dir), then a listing of the directory and a read of its
//     node's Stat, sent together; waiting is one data watch on the node
//     just ahead. The token is the node's czxid.
//   - Mutex.TryLock: ZooKeeper cannot compare children and create in one
//     operation, so TryLock syncs and lists the directory (a loss to a
//     visible entry writes nothing, and a release that completed before
//     the call is always seen), then creates its node and lists again; if
//     an entry created meanwhile is ahead, it deletes its node before
//     returning.
//   - Lease.Unlock: one multi that sets the node's data (the release
//     mark) and deletes it, version-checked.
//   - RWMutex: as Mutex.
//   - MultiMutex.Lock: one multi that creates one node per name (all at
//     one zxid), then a listing of each directory and a wait in every
//     directory at once; TryLock syncs and lists each directory first,
//     as Mutex.TryLock.
//   - Election.Campaign: uncontended, the create, a listing and the
//     claim's multi; the candidate follows the election with a child
//     watch on Dir() and data watches on Dir() (the term record) and on the
//     leader's node. Leader syncs, reads Dir()'s data and lists and reads
//     the candidates. Observe keeps those watches, re-arming the one that
//     fired (terms that follow each other faster than a watch is re-armed
//     are coalesced), and needs only the connection, so it carries on
//     across reconnects and after the Session ended. Proclaim is a SetData
//     guarded by the node's version; HandOff and Resign one multi.
//   - Semaphore.Acquire: the direct claim lists the line and the slots,
//     creates a free slot's ephemeral znode
//     Dir() + "/@permits/<slot>-of-<N>", and gives the slot back if a line
//     entry appeared meanwhile; a waiter creates a line node ("@c-…") and
//     watches the one ahead; the head alone has a child watch on @permits
//     and claims a freed slot with one multi that creates it and deletes
//     its line node.
//   - Admin.Inspect: a sync of the lock's directory, a listing, and a
//     read of every entry (sent together); entries deleted between the
//     listing and their read are left out. QueueEntry.Created is the
//     node's ctime. WatchQueue: a child watch on the directory (an exists
//     watch while there is none), set before each read.
//   - Marks: Marker reads after a sync; Mark is one multi through the fence
//     that also checks the lease's lock node; Markers syncs, lists and
//     reads n; Prune deletes a hundred per multi.
//   - Session.Close: deletes the session's lock nodes (the ZooKeeper
//     session, which belongs to the connection, stays open); the cleanups
//     of failed Locks outlive it until they succeed or the connection
//     loses the session.
//
// # Znodes
//
// A lock named N under the session's prefix P ("/distlock" by default)
// keeps its queue in the directory P + "/" + N. Each acquisition attempt
// creates one ephemeral sequential child "@w-<guid>-<seq>" ("@r-…" for
// RWMutex's readers; with a foreign recipe's marker before "<seq>" in a
// compatibility mode, see below): the "@" cannot occur in a lock-name segment (see
// distlock.ValidateName), so the entries of lock "a" are never mistaken for
// the sub-directory of lock "a/b", and children that do not parse as
// entries are no entries of distlock's (but see "Other clients' locks"). The GUID (protected mode) lets a Lock whose create
// was cut off by a connection loss find its node again; it adopts it only
// if the node's ephemeral owner is the session's ID, and deletes it
// otherwise. Directories are created on demand as container nodes, which
// the server removes once they are empty (persistent nodes on servers
// without containers).
//
// Sequence numbers order the entries of one directory incarnation only:
// they restart when the directory is deleted and recreated. The fencing
// token is therefore the holder node's czxid, which grows across every
// write of the ensemble and is never reused.
//
// # Handoff
//
// Lock creates its node, then at once lists the directory and reads its
// own node's Stat with a watch (the czxid, the ephemeral owner), and waits
// on its immediate predecessor only, with GetW (which, unlike ExistsW,
// leaves no watch behind on a node that is already gone). The two reads
// go out together, so an uncontended Lock costs the create's round trip
// and one read's, as zk.Lock's create + list does; the Stat read is the
// price of an exact token and of a lost signal when someone else deletes
// the node. (The directory's pzxid is not a substitute: it is the czxid
// only if no child changed after the create, which nothing in the listing
// proves.)
//
// A waiter must not take its predecessor's deletion for the handoff while
// older entries may remain (the predecessor may have given up waiting),
// and listing the directory again to find out costs bytes that grow with
// the queue (zk.Lock lists every child on every wake). So a holder
// releases with one transaction that sets its node's data and deletes it:
// its successor's data watch fires with a data change only for a release
// by a holder — nothing older is left, and the wake needs no request at
// all —, and with a plain deletion when the predecessor gave up, its
// session ended or someone else deleted it (which is also how
// WithLockDelay tells a release from the rest; readers mark their release
// the same way). After a plain deletion the waiter checks
// the nearest older entries of its snapshot one by one (Exists), and past
// two gone ones lists the directory once. A handoff is therefore one
// write and one event whatever the queue's length. Entry nodes must not be
// written by anyone else: a foreign Set on a waiting node reads as a
// release.
//
// TryLock cannot compare the children and create in one operation on
// ZooKeeper: it syncs and lists the directory first and loses at once,
// writing nothing, when an entry is there; otherwise it creates its node
// and lists again, and when an entry that came in between is ahead,
// deletes its node before returning distlock.ErrLocked. The Sync makes a
// release that completed before the call visible even on a lagging
// follower (as etcd's linearizable read does); a TryLock may still lose to
// a holder that releases at the same moment.
//
// # Readers and writers
//
// RWMutex keeps readers ("@r-…") and writers ("@w-…") in the same
// directory as Mutex (a Mutex is a writer there) and grants the lock in
// FIFO order: a writer waits on its immediate predecessor, a reader on the
// nearest writer ahead of it, so a reader that arrives while a writer waits
// queues behind that writer and a stream of readers cannot starve it.
// Readers between two writers hold together; each watches the writer ahead
// on its own watch, so a writer's release wakes exactly the readers behind
// it. Only a writer that waited releases with the set-data + delete
// transaction, and a waiter trusts a data change only on a writer: a
// writer held alone, so nothing older is left. Readers always delete
// plainly, since other readers older than them may still hold: a writer
// behind them then checks the older entries of its snapshot (Exists, or
// one listing) before it takes the lock. TryRLock loses while any writer
// holds or waits, and wins while readers alone hold.
//
// A reader's fencing token is its node's czxid like any other: readers
// holding together have distinct tokens that are not ordered among
// themselves for exclusivity. A writer's token exceeds every earlier
// reader's and writer's, so a fence that admits writers' tokens refuses any
// writer or reader older than the newest writer it admitted. Readers must
// not record their tokens in a writers' fence (one reader's token would
// refuse the older readers beside it); see RWMutex.
//
// # Election
//
// Election's candidates are ephemeral sequential nodes of their own kind,
// "@e-<guid>-<seq>" ("@e-<guid>-p<priority>-<seq>" for a priority other
// than 0), whose data is the candidate's value. The term record is the
// data of the election's directory itself: the leading candidate's node
// name. The leader's token is the directory's mzxid, the zxid of the
// write that began its term. A candidate leads once the record names its
// node; when the named node is gone the term is vacant, and the next in
// line (the highest priority, then the oldest) claims it with one multi:
// a set-data of the directory at the version it read and a check of its
// own node, so no two terms overlap and no candidate leads whose node is
// gone. Resign and HandOff delete the leader's node and set the record to
// the successor's in one multi guarded the same way, so the successor's
// term begins at the zxid the leader's ends. Campaign leaves no node
// behind when it fails. Lock queues ignore election entries and
// elections ignore lock entries, even in a directory of the same name
// (Inspect lists both; give them different names).
//
// Proclaim is a SetData on the leader's node guarded by its version (the
// node gone, or not this session's: distlock.ErrNotLeader); it does not
// hand leadership over. A second Resign, or one after leadership was
// lost, returns an error wrapping distlock.ErrNotLeader.
//
// Leader syncs, reads the record and lists and reads the candidates.
// Observe keeps a child watch on the directory (an existence watch while
// it does not exist) and data watches on it and on the leader's node,
// re-arms what fired, and sends the leader after every change, "no
// leader" (the zero distlock.LeaderInfo) included, in order; terms that
// follow each other faster than a watch is re-armed are coalesced. It
// needs only the connection, so it carries on across reconnects, server
// failures and session expiries.
//
// # Other clients' locks
//
// Curator, kazoo and go-zookeeper's zk.Lock keep their lock and election
// queues the same way, as ephemeral sequential children of one znode;
// when one of them uses the same path as a distlock lock (P + "/" + N),
// the sequence numbers of all the children come from that directory's one
// counter, so the entries of both are ordered exactly. distlock never
// grants a lock, a read lock or leadership while such a foreign entry is
// ahead, and needs nothing for it to be switched on. It recognises
// Curator's InterProcessMutex and LeaderSelector ("lock-"),
// InterProcessReadWriteLock ("__WRIT__", "__READ__") and LeaderLatch
// ("latch-"), kazoo's Lock, WriteLock and Election ("<hex>__lock__") and
// ReadLock ("__rlock__"), and zk.Lock ("_c_<hex>-lock-"). A lock waits for
// the foreign writers and mutexes ahead of it, and a writer for the foreign
// readers too, watching only the nearest one as it does its own; a
// candidate does not lead while an older foreign candidate exists (a
// LeaderSelector's or a kazoo Election's nodes are mutex nodes, and count
// as candidates as well). Foreign clients mark no release, so a foreign
// entry's deletion counts as a session's end (WithLockDelay applies), and
// a change of its data means nothing. A foreign entry whose ACL refuses
// this session reading it is still waited for: the servers send no event
// of such a node, so its waiter follows the directory's children instead
// (a wake on every change of the directory while it waits). Inspect and WatchQueue list foreign
// entries with their Client, kind, position and token (the node's czxid and
// session, as distlock would give them); a child with a sequence suffix
// that no known recipe makes (or a name no lock could have) is listed as
// distlock.ClientUnknown and is not waited for; the first enqueue that
// sees one logs a warning, once per lock name and session. Children
// without a sequence suffix that are valid lock-name segments are
// sub-locks' directories (Curator's semaphore keeps "locks" and "leases"
// there), and semaphores do not look at foreign entries at all. The other
// direction is the foreign client's: without a compatibility mode (see
// below) the foreign clients do not wait for distlock's entries, and
// zk.Lock fails on a name it cannot parse, such as distlock's plain
// entries. docs/interop.md has each client's naming rule and what it does
// with distlock's entries.
//
// # Compatibility modes
//
// With a compatibility mode (distlock.WithCompat for a Mutex or an
// RWMutex, distlock.WithElectionCompat for an Election) a lock's entries
// are named so that the foreign recipe takes them for its own kind of
// entry and waits for them too: exclusion holds both ways. The names keep
// distlock's head "@<kind>-<guid>", so distlock still knows them as its
// own (Inspect lists them with Client ""), and put the foreign recipe's
// marker before the sequence suffix:
//
//	mode                 recipe    entries
//	CompatCurator        Mutex     @w-<guid>-lock-<seq>       (InterProcessMutex)
//	CompatCurator        RWMutex   @w-<guid>-__WRIT__<seq>, @r-<guid>-__READ__<seq>
//	                               (InterProcessReadWriteLock)
//	CompatCurator        Election  @e-<guid>-lock-<seq>       (LeaderSelector)
//	CompatCuratorLatch   Election  @e-<guid>-latch-<seq>      (LeaderLatch)
//	CompatKazoo          Mutex     @w-<guid>__lock__<seq>     (Lock)
//	CompatKazoo          RWMutex   @w-<guid>__lock__<seq>, @r-<guid>__rlock__<seq>
//	                               (WriteLock, ReadLock)
//	CompatKazoo          Election  @e-<guid>__lock__<seq>     (Election)
//	CompatGoZookeeper    Mutex     @w-<guid>-lock-<seq>       (zk.Lock)
//
// Curator sorts a lock's children by what follows the last "lock-"
// ("latch-", "__WRIT__" or "__READ__"), kazoo takes every child that ends
// in "__lock__" or "__rlock__" and ten digits for a contender, and
// zk.Lock reads the number after "lock-": each finds distlock's entry at
// its place in the directory's one sequence.
//
// zk.Lock fails (it does not wait) on any child of its directory whose
// sequence number it cannot read, distlock's plain entries among them.
// Every distlock acquisition of a lock that zk.Lock shares must therefore
// use CompatGoZookeeper (or CompatCurator, the same names), in every
// process; one Mutex without the mode makes zk.Lock fail while that
// Mutex's entry exists. The same goes for every mode: all of a lock's
// distlock users name it alike.
//
// What a mode cannot offer is refused with an error wrapping
// errors.ErrUnsupported: by the constructor, a mode for a recipe the
// foreign client has no counterpart of (CompatCuratorLatch or
// CompatGoZookeeper for an RWMutex, CompatCuratorLatch for a Mutex,
// CompatGoZookeeper for an Election) or one of etcd's modes; and, since
// the foreign elections' rule is that the oldest candidate leads, a
// Campaign with a priority and a HandOff in an Election with a mode.
// Resign leaves the term to the oldest candidate, of either client.
// Semaphores and multi-locks take no mode. A release stays distlock's
// set-data and delete in one multi: the foreign recipes watch their
// predecessor's node and list the directory again on any of its events.
//
// # Lock-delay
//
// Every release marks itself with a set-data in the multi that deletes
// the node (one request, as a plain delete would be), whether or not the
// session has recipe.WithLockDelay; a deletion without the mark is what
// counts as not released, readers' as writers'. So a delay costs no
// request more. An entry that gave up as the head counts as not released,
// and so does one found gone when the waiter sets its watch (a round trip
// after its enqueue): a holder that releases just as a waiter enqueues
// behind it costs that waiter a needless delay (one too many, never one
// too few).
//
// # Failures
//
// Every failed Lock or TryLock deletes its node before returning (within a
// second, then in the background for as long as the connection keeps the
// ZooKeeper session, even past the end of the Session: a Session that
// ended on its client-side deadline may leave a connection that kept the
// ZooKeeper session, and its nodes, alive). A
// create cut off by a connection loss is looked up by its GUID after a
// Sync. The node's own watch reports its deletion; since the deletions of
// an expired or closed session's ephemeral nodes can reach the client
// before the news that the session is gone, a deletion is blamed on
// someone else (distlock.ErrEntryGone) only after a Sync answered on the
// same session proves the session outlived it, and on the session
// (distlock.ErrSessionExpired) otherwise. Unlock deletes the node by its
// exact path and the version read when it was created (for a holder that
// waited, in the set-data + delete transaction above); a second
// Unlock returns distlock.ErrReleased.
//
// # Session state
//
// go-zookeeper delivers session events either on the channel returned by
// zk.Connect or to a callback set at Connect time. NewSession takes neither:
// it must not take the caller's channel away, and a callback can only be
// set when dialing. Instead a Session observes the connection:
//
//   - every 50 ms it reads conn.SessionID() and conn.State(); a different
//     session ID (the client library starts a new session by itself after
//     an expiry) or zk.StateExpired ends the Session with
//     distlock.ErrSessionExpired. Watches report the expiry at once too
//     (zk.EventNotWatching with zk.ErrSessionExpired).
//   - every half tick (within a twentieth and a sixth of the session
//     timeout) it has a Sync sent, which is answered only after it went
//     through the leader. The Sessions of one connection share these
//     Syncs (one in flight at a time; an answer confirms them all, since
//     they rest on the same ZooKeeper session), so a thousand Sessions on
//     one *zk.Conn cost what one does. The client-side deadline is the send time of the
//     last answered Sync plus the session timeout less a margin: half a
//     tick, the Sync interval and a fiftieth of the timeout, at least an
//     eighth of it (7/8 of the timeout with the tick at most an eighth of
//     it). The tick is what the server answers to "conf", or
//     what WithTickTime says, or else DefaultTickTime (2 s, ZooKeeper's
//     default). The server expires a session a full timeout after
//     the leader last learned that the client was heard, and the client
//     cannot know when that was more precisely than "after I sent a
//     request that was answered"; the remaining eighth covers followers
//     reporting session activity to the leader only every half tick (so a
//     follower that fails may never report the last request), and the
//     clocks' rate difference. With the tick at most an eighth of the timeout
//     it is also late enough for one frozen or cut-off server not to cost the session:
//     go-zookeeper gives up on a silent server two thirds of the timeout
//     after it last heard from it and connects to another, and the next
//     Sync, answered there, moves the deadline on before it passes.
//     When the deadline passes, the Session ends with ErrSessionExpired and
//     its nodes are deleted best effort, so a partitioned holder is told
//     before the server can hand the lock on.
//
// A reconnect within the session (a dropped TCP connection, a server
// restart) is not a loss: the session, its ephemeral nodes and its watches
// survive, and held locks stay held.
//
// The session timeout the deadline is computed from is the one the
// connection negotiated. go-zookeeper v1.0.4 does not export it; pass it
// with WithSessionTimeout, or NewSession reads it from the connection
// (reflection on the unexported field, failing clearly if it is absent).
package zklock
