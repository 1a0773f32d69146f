// Package recipegen writes the methods of etcdlock's and zklock's recipe,
// session and admin types (recipes_gen.go in each package) from one template:
// each method is a one-line forwarder to the engine's type
// (internal/qlock), under a doc comment in the store's own words.
//
// Why declared types and not aliases: the recipes are written once, in
// internal/qlock, and etcdlock.Mutex used to be an alias of qlock.Mutex
// (and etcdlock.Session embedded qlock.Session). Neither go doc nor
// pkg.go.dev shows methods through an alias, nor the promoted methods of
// an embedded field whose type is not exported from a public package:
// "go doc etcdlock Mutex.Lock" answered "no method or field", and the
// user could not read what Lock does on etcd. So each backend declares
// its own types over the one engine, and documents every method there.
// Writing those forwarders twice by hand would let the two packages drift
// apart; writing them here keeps one list of methods, with the words that
// differ between etcd and ZooKeeper side by side.
//
// Run it with go generate in etcdlock and zklock (see their doc.go);
// internal/parity's TestGenerated fails when a checked-in file differs
// from what Source writes.
package recipegen

import (
	"bytes"
	"fmt"
	"go/format"
	"strings"
	"text/template"
	"unicode/utf8"
)

// Store is a backend package the recipes are generated for, with the
// words its documentation uses.
type Store struct {
	// Pkg is the package's name: "etcdlock" or "zklock".
	Pkg string
	// Etcd is true for etcdlock, false for zklock.
	Etcd bool
	// Entry names one queue entry: "key" or "node".
	Entry string
	// Client names what a session is made on: "client" or "connection".
	Client string
	// Other is the other backend's package name.
	Other string
}

// Stores are the backends, by the name the generator's -store flag takes.
var Stores = map[string]Store{
	"etcd": {Pkg: "etcdlock", Etcd: true, Entry: "key", Client: "client", Other: "zklock"},
	"zk":   {Pkg: "zklock", Etcd: false, Entry: "node", Client: "connection", Other: "etcdlock"},
}

// method is one forwarder: func (Recv *Type) Name(Params) Results { return
// Recv.q.Name(Args) }, with Doc a text/template on the Store.
type method struct {
	Type    string
	Name    string
	Params  string
	Args    string
	Results string
	Doc     string
	// Wraps, if set, is the declared type whose value the method returns
	// around the engine's (a *qlock.Marks in a *Marks), with an error.
	Wraps string
}

// The engine's value is the field q of every declared type (a
// *qlock.Mutex, *qlock.MultiMutex, *qlock.RWMutex, *qlock.Election, *qlock.Semaphore,
// *qlock.Admin, *qlock.Marks, or the qlock.Session value of a Session).
var methods = []method{
	// Mutex.
	{Type: "Mutex", Name: "Lock", Params: "ctx context.Context", Args: "ctx", Results: "(*distlock.Lease, error)", Doc: `
Lock takes the lock, waiting in FIFO order behind every earlier
acquisition. {{if .Etcd}}It enqueues with one Txn that puts a key under
Dir, bound to the session's lease, and reads the entries ahead of it;
then it watches only the key just ahead, from the current revision, until
every earlier key is gone.{{else}}It creates an ephemeral sequential node
in the lock's directory (Dir), then lists the directory and reads its
node's Stat, sent together; then it waits with one data watch on the
node just ahead until every earlier node is gone.{{end}} The returned
Lease's fencing token is {{template "token" .}}.

{{template "fails" .}} Each call enqueues its own {{.Entry}}: calls
sharing one Mutex or one Session exclude each other exactly like
separate processes do. {{template "reentrant" .}}`},
	{Type: "Mutex", Name: "TryLock", Params: "ctx context.Context", Args: "ctx", Results: "(*distlock.Lease, error)", Doc: `
TryLock takes the lock only if no entry at all is queued; otherwise it
returns an error wrapping distlock.ErrLocked that names the {{.Entry}}
ahead, and leaves nothing behind. {{template "trylock" .}}`},
	{Type: "Mutex", Name: "Name", Results: "string", Doc: `
Name returns the lock's name, as given to NewMutex.`},
	{Type: "Mutex", Name: "Dir", Results: "string", Doc: `{{template "dir" .}}`},

	// MultiMutex.
	{Type: "MultiMutex", Name: "Lock", Params: "ctx context.Context", Args: "ctx", Results: "(*distlock.Lease, error)", Doc: `
Lock takes every one of the lock's names, waiting in FIFO order behind
the earlier acquisitions of each. {{if .Etcd}}It enqueues with one Txn
that puts one key per name (bound to the session's lease, all at one
revision) and reads each name's entries ahead; then it waits in every
name's queue at once, watching only the key just ahead in each.{{else}}It
creates one ephemeral sequential node per name with one multi (all at one
zxid), then lists each directory; then it waits in every directory at
once, with one data watch on the node just ahead in each.{{end}} Its entries are a Mutex's: a Mutex of one of
the names waits for it, and it for the Mutex, in one queue.

Waiting cannot deadlock, whatever order callers list the names in:
entries made in one write share one position in the store's global
order, so every acquisition waits only on strictly older ones.

The returned Lease holds one token per name (Lease.Tokens, sorted by
name), all with the sequence number {{template "token" .}}, and is lost
as a whole: when any entry is lost, Done closes with the cause and the
name. Unlock deletes every entry. {{template "fails" .}} Every entry is
removed when it fails. {{template "reentrant" .}}`},
	{Type: "MultiMutex", Name: "TryLock", Params: "ctx context.Context", Args: "ctx", Results: "(*distlock.Lease, error)", Doc: `
TryLock takes the lock only if no name has an entry queued; otherwise it
returns an error wrapping distlock.ErrLocked that names the {{.Entry}}
ahead, and leaves nothing behind. {{if .Etcd}}It is one Txn that compares
every name's queue and puts the keys only if all are empty: a loss writes
nothing.{{else}}ZooKeeper cannot compare children and create in one
operation, so TryLock first syncs and lists each directory (a loss to a
visible entry writes nothing), then creates its nodes and lists again; if
an entry created meanwhile is ahead in any directory, it deletes all its
nodes before returning.{{end}}`},
	{Type: "MultiMutex", Name: "Names", Results: "[]string", Doc: `
Names returns the lock's names, sorted.`},
	{Type: "MultiMutex", Name: "Dirs", Results: "[]string", Doc: `
Dirs returns where its entries are kept, one place per name in Names'
order: {{if .Etcd}}the key prefixes Session.Prefix() + name + "/@"{{else}}the
directory znodes Session.Prefix() + "/" + name{{end}}, as Mutex.Dir.`},

	// RWMutex.
	{Type: "RWMutex", Name: "RLock", Params: "ctx context.Context", Args: "ctx", Results: "(*distlock.Lease, error)", Doc: `
RLock takes the lock shared, as a reader: it enqueues a reader
({{if .Etcd}}a key Dir() + "r…" bound to the session's lease{{else}}an
ephemeral sequential node "@r-…" in Dir(){{end}}) and waits until no
writer is ahead of it, watching only the nearest writer ahead. Readers
between two writers hold together; a reader that comes while a writer
waits queues behind that writer, so readers cannot starve writers.

The returned Lease's fencing token is {{template "token" .}}: it is
ordered against writers' tokens only, not against the other readers'
(see "Readers and writers" in the package documentation before fencing
with it). {{template "fails" .}}

Read locks are not reentrant either: a second RLock by a reader shares
the lock with its first only while no writer waits; once a writer has
queued between them, the second waits behind the writer, which waits
for the first, so a goroutine that read-locks twice can wait for itself
(as with sync.RWMutex). A Lock by a holder of a read lock waits for that
read lock's Unlock: a reader cannot upgrade in place.`},
	{Type: "RWMutex", Name: "TryRLock", Params: "ctx context.Context", Args: "ctx", Results: "(*distlock.Lease, error)", Doc: `
TryRLock takes the lock shared only if no writer holds or waits: it wins
while readers alone hold. Otherwise it returns an error wrapping
distlock.ErrLocked that names the writer's {{.Entry}}, leaving nothing
behind. {{if .Etcd}}It is one Txn that compares the writers' keys only,
and writes nothing when it loses.{{else}}As Mutex.TryLock, it syncs and
lists the directory first, then creates its node and lists again,
deleting its node if a writer came in between.{{end}}`},
	{Type: "RWMutex", Name: "Lock", Params: "ctx context.Context", Args: "ctx", Results: "(*distlock.Lease, error)", Doc: `
Lock takes the lock exclusively, as a writer: it enqueues a writer
({{if .Etcd}}a key Dir() + "w…" bound to the session's lease, the kind a
Mutex of the same name puts{{else}}an ephemeral sequential node "@w-…"
in Dir(), the kind a Mutex of the same name creates{{end}}) and waits,
watching only its immediate predecessor, until every earlier entry,
reader or writer, is gone. Its fencing token, {{template "token" .}},
exceeds every earlier reader's and writer's. {{template "fails" .}}
{{template "reentrant" .}} An RLock by a holder of the write lock waits
for it too: a writer cannot downgrade in place.`},
	{Type: "RWMutex", Name: "TryLock", Params: "ctx context.Context", Args: "ctx", Results: "(*distlock.Lease, error)", Doc: `
TryLock takes the lock exclusively only if no entry at all, reader or
writer, is queued; otherwise it returns an error wrapping
distlock.ErrLocked that names the {{.Entry}} ahead, leaving nothing
behind. {{template "trylock" .}}`},
	{Type: "RWMutex", Name: "RLocker", Results: "distlock.Locker", Doc: `
RLocker returns a distlock.Locker whose Lock and TryLock are m's RLock
and TryRLock, for code that takes a Locker (distlock.Do among it).`},
	{Type: "RWMutex", Name: "Name", Results: "string", Doc: `
Name returns the lock's name, as given to NewRWMutex.`},
	{Type: "RWMutex", Name: "Dir", Results: "string", Doc: `{{template "dir" .}}`},

	// Election.
	{Type: "Election", Name: "Campaign", Params: "ctx context.Context, value string, opts ...distlock.CampaignOption", Args: "ctx, value, opts...", Results: "(distlock.Leadership, error)", Doc: `
Campaign enqueues a candidate whose value is value and waits until it
leads: {{if .Etcd}}it puts one key Dir() + "e" + lease + "_" + counter
(with "p" + priority + "." before the lease for a priority other than
0), bound to the session's lease, and follows the election with one
watch on its candidates and term record{{else}}it creates one ephemeral
sequential node "@e-<guid>-<seq>" in Dir() (with "p<priority>-" before
the sequence for a priority other than 0), whose data is value, and
follows the election with a child watch on Dir() and data watches on
Dir() (the term record) and on the leader's node{{end}}.

A candidate leads while the election's term record names its
{{.Entry}}: the record is {{if .Etcd}}the key Dir() + "l", whose value is
the leader's key, bound to the leader's lease{{else}}the data of Dir()
itself, the leader's node name{{end}}, and the term's fencing token is
{{if .Etcd}}the record's mod revision{{else}}Dir()'s mzxid{{end}}: the
revision of the write that began the term, so every term's token is
larger than all before it. A handoff (Resign, HandOff) writes the record
naming the successor in the write that deletes the leader's
{{.Entry}}. When the leader's {{.Entry}} goes otherwise (its session
ended, it was deleted), the term is vacant until the next in line (the
highest priority, then the oldest; see distlock.WithPriority) claims it
with a compare-and-set of the record guarded by its own {{.Entry}}, so
there is never a phantom leader nor two terms at once. A waiting
candidate of a higher priority than the leader's asks it to step down
through a revocation record (see Admin.Revoke), and after the Election's
preempt grace (distlock.WithPreemptGrace) deletes its {{.Entry}}.
Candidates are a queue of their own: an Election and a Mutex of the same
name never wait for each other. Every candidate follows the whole
election, so a change wakes each of them: elections are meant for tens
of candidates, not thousands.

An uncontended Campaign is {{if .Etcd}}the enqueue Txn and the claim
Txn{{else}}the create, a listing and the claim's multi{{end}}. It fails,
leaving no {{.Entry}} behind, when ctx ends (the error wraps ctx's
cause), when the session ends (distlock.ErrSessionExpired,
distlock.ErrSessionClosed; once it has ended every Campaign fails:
campaign again on a new Session; also ErrSessionExpired when its
client-side Deadline had passed by the time it could return) or when its
{{.Entry}} is deleted by someone else (distlock.ErrEntryGone). Every
call is a candidate of its own, even on one Session.

The returned Leadership ends (Done, Context) when the {{.Entry}} goes,
the session ends, or Resign or HandOff is called (before their write is
sent: see distlock.Leadership, "Stepping down"); its Err then says why.
Its Proclaim {{if .Etcd}}is a Put guarded by the key's create revision{{else}}is
a SetData guarded by the node's version{{end}} (the {{.Entry}} gone:
distlock.ErrNotLeader) and does not hand leadership over. Its HandOff is
one {{if .Etcd}}Txn{{else}}multi{{end}}, the successor picked from the
election's state as the leader's watch last saw it (a read first only
when that state names no such candidate, or the write found it stale);
Resign is a HandOff to the next in line, or, with nobody waiting, the
guarded delete. A second Resign, or one after leadership was lost, wraps
distlock.ErrNotLeader.`},
	{Type: "Election", Name: "Leader", Params: "ctx context.Context", Args: "ctx", Results: "(distlock.LeaderInfo, error)", Doc: `
Leader returns the current leader's value, token and priority, read
fresh from {{if .Etcd}}etcd: one linearizable range read of the
candidates and the term record{{else}}ZooKeeper: it syncs, reads Dir()'s
data and lists and reads the candidates{{end}}, so the answer is at
least as new as every write acknowledged before the call. With no leader
(no candidate, or a vacant term not yet claimed) the error wraps
distlock.ErrNoLeader.`},
	{Type: "Election", Name: "Observe", Params: "ctx context.Context", Args: "ctx", Results: "<-chan distlock.LeaderInfo", Doc: `
Observe streams the election's leader: first the current one (the zero
distlock.LeaderInfo if none), then every change in the order it
happened: a new leader (new token), a Proclaim (same token, new value),
and "no leader" while a term is vacant or when the last candidate goes.
Consecutive equal values are sent once; tokens only grow. {{if .Etcd}}It
reads the election, then follows it with one watch from the next
revision, so it sees every term; after compaction, a member's failure or
a reconnect it reads again, and a term that began and ended within such
a gap is missed.{{else}}It keeps a child watch on the election's
directory and data watches on it and on the leader's node, re-arming the
one that fired; terms that follow each other faster than a watch is
re-armed are coalesced (an intermediate leader may be skipped). It
needs only the connection, so it carries on across reconnects and after
the Session ended.{{end}}

The channel is closed when ctx ends or the session's {{.Client}} is
closed. Receivers must keep up: Observe waits for each value to be
taken.`},
	{Type: "Election", Name: "Name", Results: "string", Doc: `
Name returns the election's name, as given to NewElection.`},
	{Type: "Election", Name: "Dir", Results: "string", Doc: `{{template "dir" .}}`},

	// Semaphore.
	{Type: "Semaphore", Name: "Acquire", Params: "ctx context.Context", Args: "ctx", Results: "(*distlock.Permit, error)", Doc: `
Acquire waits until it holds a permit: at once when a slot is free and
nobody waits, else after every earlier waiter, in FIFO order.
{{if .Etcd}}The direct claim is one Txn that puts the slot's key
(Dir() + "p" + slot + "_", bound to the session's lease) only if the
slot is free and the line is empty. A waiter puts a line key
(Dir() + "c…") and watches only the key ahead of it until it is the
head; the head alone watches the slots and claims a freed one in one Txn
that also deletes its line key.{{else}}The direct claim creates a free
slot's ephemeral znode Dir() + "/@permits/<slot>-of-<N>" after listing
the line and the slots, and gives the slot back if a line entry appeared
meanwhile (ZooKeeper cannot compare children within a write). A waiter
creates a line node ("@c-…" in Dir()) and watches only the node ahead
of it until it is the head; the head alone watches the slots (a child
watch on @permits) and claims a freed one with one multi that creates
the slot and deletes its line node.{{end}}

The permit's fencing token is {{if .Etcd}}its slot key's create
revision{{else}}its slot znode's czxid{{end}}, so each slot's successive
holders have growing tokens (see distlock.Permit). Acquire fails,
leaving nothing behind, as Mutex.Lock does, and with an error wrapping
distlock.ErrPermitsMismatch when the semaphore is in use with another
permit count. Every call takes its own permit, even on one Session.`},
	{Type: "Semaphore", Name: "TryAcquire", Params: "ctx context.Context", Args: "ctx", Results: "(*distlock.Permit, error)", Doc: `
TryAcquire takes a permit only if a slot is free and nobody waits;
otherwise it returns an error wrapping distlock.ErrLocked, leaving
nothing behind. {{if .Etcd}}It is one Txn that claims the slot only if it
is free and the line is empty.{{else}}It lists the line and the slots,
creates the free slot's znode, and gives it back if a line node appeared
meanwhile.{{end}} The permit's token is as Acquire's.`},
	{Type: "Semaphore", Name: "Permits", Results: "int", Doc: `
Permits returns the semaphore's permit count, N, as given to
NewSemaphore.`},
	{Type: "Semaphore", Name: "Name", Results: "string", Doc: `
Name returns the semaphore's name, as given to NewSemaphore.`},
	{Type: "Semaphore", Name: "Dir", Results: "string", Doc: `{{template "dir" .}}`},

	// Admin.
	{Type: "Admin", Name: "Inspect", Params: "ctx context.Context, name string", Args: "ctx, name", Results: "([]distlock.QueueEntry, error)", Doc: `
Inspect returns the queue of the lock called name, without joining it:
the holder first, then the waiters in the order they will hold
(QueueEntry.Holding says which hold). {{if .Etcd}}It is one linearizable
range read sorted by create revision, so the entries are a consistent
snapshot. An Election's candidates of the same name ("@e" keys, a queue
of their own) are listed too, as exclusive entries, the leader (the one
the term record names) alone Holding, with its term's token; other keys
under the lock's queue are ignored.{{else}}It syncs the lock's directory with the
leader, lists it, and reads every entry (the reads go out together);
entries deleted between the listing and their read are left out, and
children that are not lock entries are ignored. An Election's candidates
("@e-…" nodes) are listed the same way, as exclusive entries whose
Holder is the candidate's value, the leader (the one the term record
names) alone Holding, with its term's token; give a lock and an election
different names, or their entries are listed together.{{end}} An empty result means
nobody holds or waits.

Each entry's Token is {{template "token" .}} (the fencing token it has or
will have), Owner {{if .Etcd}}the lease ID in hex, Holder the key's
value; Created is zero, since etcd keeps no creation time (the distlock
command puts one in the value){{else}}its ephemeral owner's session ID in
hex, Holder its data, and Created its ctime{{end}}.`},
	{Type: "Admin", Name: "WatchQueue", Params: "ctx context.Context, name string, f func([]distlock.QueueEntry) error", Args: "ctx, name, f", Results: "error", Doc: `
WatchQueue calls f with the queue of the lock called name (as Inspect
reads it) now and again after every change, until ctx ends (it returns
ctx's cause), f returns an error (it returns that) or {{if .Etcd}}the
watch fails. It is driven by one etcd watch on the lock's queue, set
before each read, so no change is missed; changes that come while f runs
are read once, together. The watch requires a leader: a member cut off
from the others ends it with an error rather than going silent.{{else}}the
connection fails. It is driven by a child watch on the lock's directory
(an exists watch while there is none), set before each read, so no
change is missed.{{end}}`},
	{Type: "Admin", Name: "Revoke", Params: "ctx context.Context, name string, r distlock.RevokeRequest", Args: "ctx, name, r", Results: "([]distlock.Revocation, error)", Doc: `
Revoke asks the holders of the lock called name (a Mutex's or writer's
holder, every reader holding, every permit of a semaphore, and the leader
of the Election of that name) to let go: it records a revocation per holder (see
Admin), which revocable holders (WithRevocable) see as their Lease's Done
closing with a *distlock.RevokedError, and waits until they release or
r.Grace is over; then, with r.Force, deletes the {{.Entry}}s of those
still there, each only if it is still that holder's
({{template "token" .}}). A forced holder sees distlock.ErrEntryGone.

It returns each holder's record with its outcome; none when the lock is
free. A holder revoked already is not asked again (its record has Again
set), and is forced (r.Force) once its first grace period or r.Grace is
over, whichever ends first. The newest 100 records per lock are kept as
the audit trail. Errors are *distlock.LockError values (Op
distlock.OpRevoke; OpValidate for a bad name).`},
	{Type: "Admin", Name: "Revocations", Params: "ctx context.Context, name string", Args: "ctx, name", Results: "([]distlock.Revocation, error)", Doc: `
Revocations returns the revocation records of the lock called name, in
the order they were requested: pending ones and past ones. A pending
record whose holder is gone, its revoker having stopped before it
recorded the outcome, says distlock.RevokeEnded.`},

	{Type: "Admin", Name: "Marks", Params: "name string", Args: "name", Results: "(*Marks, error)", Wraps: "Marks", Doc: `
Marks returns the done-markers of the lock called name (for
distlock.Once){{if not .Etcd}}, written with the Admin's ACL{{end}}; an
invalid name is an error wrapping distlock.ErrInvalidName.`},

	// Marks.
	{Type: "Marks", Name: "Name", Results: "string", Doc: `
Name returns the lock's name.`},
	{Type: "Marks", Name: "Marker", Params: "ctx context.Context, slot string", Args: "ctx, slot", Results: "(*distlock.SlotMarker, error)", Doc: `
Marker returns slot's marker, or nil if it has none. {{if .Etcd}}The read
is linearizable.{{else}}The read follows a sync, so it sees every marker
written before it started.{{end}} Its errors are *distlock.LockError
values of Op distlock.OpCheck.`},
	{Type: "Marks", Name: "Mark", Params: "ctx context.Context, lease *distlock.Lease, mk distlock.SlotMarker", Args: "ctx, lease, mk", Results: "error", Doc: `
Mark writes mk as the marker of slot mk.Slot, as distlock.SlotMarks says,
in one {{if .Etcd}}Txn through the fence that also requires lease's lock
key, create revision and lease{{else}}multi through the fence that also
checks that lease's lock node exists{{end}}. An empty mk.Holder becomes
the session's holder value (NewMarks), or else the host name and process
ID. Errors other than a *distlock.SlotDoneError are *distlock.LockError
values of Op distlock.OpMark.`},
	{Type: "Marks", Name: "Markers", Params: "ctx context.Context, n int", Args: "ctx, n", Results: "(total int, newest []distlock.SlotMarker, err error)", Doc: `
Markers returns how many done-markers the lock has, and the newest n of
them by slot name, newest first (slots named by time sort by time): what
distlock status shows. {{if .Etcd}}It reads, in one linearizable Txn,
the markers' count and at most n values.{{else}}It syncs, lists the
markers and reads n of them.{{end}}`},
	{Type: "Marks", Name: "Prune", Params: "ctx context.Context, before string", Args: "ctx, before", Results: "(int, error)", Doc: `
Prune deletes the markers of the slots that sort before slot before (for
slots named by time: the older ones), {{if .Etcd}}in one
request{{else}}a hundred per multi{{end}}, and returns how many it
deleted. Markers are never deleted otherwise; a job that runs every
second leaves 86,400 a day (gocronlock prunes them).`},

	// Session.
	{Type: "Session", Name: "Done", Results: "<-chan struct{}", Doc: `
Done returns a channel that is closed when the session ends: on Close,
when {{if .Etcd}}the server reports the lease gone{{else}}the ZooKeeper
session expires, or the connection has a new one{{end}}, or when its
client-side deadline (see Deadline) passes. The session's held locks
are lost with it.`},
	{Type: "Session", Name: "Err", Results: "error", Doc: `
Err returns nil while the session lives, then why it ended: an error
wrapping distlock.ErrSessionClosed (Close) or distlock.ErrSessionExpired
({{if .Etcd}}the lease is gone{{else}}the ZooKeeper session expired or
the connection has a new one{{end}}, or the client-side deadline
passed){{if .Etcd}}, or distlock.ErrHistoryRewound (an enqueue found the
cluster's revision gone back, as after a restore from a snapshot without
--bump-revision){{end}}.`},
	{Type: "Session", Name: "Deadline", Results: "time.Time", Doc: `
Deadline returns the session's client-side expiry, before which
{{if .Etcd}}etcd cannot have expired the lease: the send time of the
last acknowledged keepalive plus the TTL the server granted, less a
fifth of the TTL{{else}}ZooKeeper cannot have expired the session: the
send time of the last answered Sync plus the session timeout, less a
margin of at least an eighth of it (see WithTickTime){{end}}. Past it,
the session ends as expired, so a holder cut off from the
{{if .Etcd}}cluster{{else}}ensemble{{end}} is told it lost its locks
before the server can hand them on. On Linux it is moved earlier by the
time the system spent suspended since then (Go's clocks stop during a
suspend, the servers' do not), and a session that a resume finds past it
ends at once.`},
	{Type: "Session", Name: "Holder", Results: "string", Doc: `
Holder returns the value stored in the session's lock
{{.Entry}}s{{if not .Etcd}} as their data{{end}} (see WithHolder): what
tools listing a lock's queue (Inspect) show as who holds or waits.`},
	{Type: "Session", Name: "Prefix", Results: "string", Doc: `
Prefix returns {{if .Etcd}}the key prefix under which the session's
locks keep their queues{{else}}the znode under which the session's
locks keep their directories{{end}} (see WithPrefix; DefaultPrefix
without it).`},
	{Type: "Session", Name: "TTL", Results: "time.Duration", Doc: `
TTL returns how long the store keeps the session's entries after the
last sign of life: {{if .Etcd}}the lease's TTL as the server granted it
(WithTTL rounded up to whole seconds, or more if the server raised
it){{else}}the ZooKeeper session timeout the connection negotiated (or
the one WithSessionTimeout gave){{end}}.`},
	{Type: "Session", Name: "Close", Params: "ctx context.Context", Args: "ctx", Results: "error", Doc: `
Close ends the session: its held locks report distlock.ErrSessionClosed
and {{if .Etcd}}its lease is revoked, which deletes all its lock keys
at once{{else}}its lock nodes are deleted (the ZooKeeper session itself,
which belongs to the connection, stays open){{end}}. It waits for the
session's background work{{if not .Etcd}}, but not for the cleanups of
failed Locks, which outlive the Session until they succeed or the
connection loses the ZooKeeper session{{end}}. The {{.Client}} stays the
caller's: Close does not close it. Calling Close again is a no-op.`},
}

// templates are the passages that several methods share.
const templates = `
{{define "token"}}{{if .Etcd}}its key's create revision{{else}}its node's czxid{{end}}{{end}}
{{define "reentrant"}}The lock is not reentrant: a second Lock by a holder, on the
same or another handle, waits for the first Lease's Unlock like any
other caller's, so a goroutine that calls Lock again without unlocking
waits for itself until ctx or the session ends.{{end}}
{{define "fails"}}It fails, leaving no {{.Entry}} behind, when ctx ends (the
error wraps ctx's cause), when the session ends
(distlock.ErrSessionExpired or distlock.ErrSessionClosed; also when its
client-side Deadline had passed by the time it could return, its process
stopped while it waited) or when its {{.Entry}} is deleted by someone
else (distlock.ErrEntryGone).{{end}}
{{define "trylock"}}{{if .Etcd}}It is one Txn that compares the lock's
queue and puts the key only if the queue is empty: a loss writes
nothing.{{else}}ZooKeeper cannot compare the children and create in one
operation, so TryLock first syncs and lists the directory (a loss to a
visible entry writes nothing, and a release that completed before the
call is always seen), then creates its node and lists again; if an entry
created meanwhile is ahead, it deletes its node before returning.{{end}}{{end}}
{{define "dir"}}Dir returns where its entries are kept: {{if .Etcd}}the
key prefix Session.Prefix() + name + "/@", under which they are keys
bound to their sessions' leases.{{else}}the directory znode
Session.Prefix() + "/" + name, under which they are ephemeral
nodes.{{end}}{{end}}
`

// types are the declared types, in the order their methods are written,
// with the interfaces they satisfy.
var types = []struct{ name, implements string }{
	{"Session", ""},
	{"Mutex", "distlock.Locker"},
	{"MultiMutex", "distlock.Locker"},
	{"RWMutex", "distlock.Locker"},
	{"Election", "distlock.Elector"},
	{"Semaphore", ""},
	{"Admin", ""},
	{"Marks", "distlock.SlotMarks"},
}

// recv is the receiver's name of each type.
var recv = map[string]string{"Session": "s", "Mutex": "m", "MultiMutex": "m", "RWMutex": "m", "Election": "e", "Semaphore": "s", "Admin": "a", "Marks": "m"}

// Source returns the gofmt'ed recipes_gen.go of store st.
func Source(st Store) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated by go run ../internal/cmd/genrecipes; DO NOT EDIT.\n\n")
	fmt.Fprintf(&b, "// The methods of %s's Session, recipe and admin types: forwarders to the\n", st.Pkg)
	fmt.Fprintf(&b, "// engine (internal/qlock), documented here. The template is\n")
	fmt.Fprintf(&b, "// internal/recipegen; go generate writes this file.\n\n")
	fmt.Fprintf(&b, "package %s\n\n", st.Pkg)
	b.WriteString("import (\n\t\"context\"\n\t\"time\"\n\n\t\"github.com/distlock/distlock\"\n)\n\n")
	b.WriteString("var (\n")
	for _, t := range types {
		if t.implements != "" {
			fmt.Fprintf(&b, "\t_ %s = (*%s)(nil)\n", t.implements, t.name)
		}
	}
	b.WriteString(")\n")
	for _, t := range types {
		for _, m := range methods {
			if m.Type != t.name {
				continue
			}
			doc, err := expand(m.Type+"."+m.Name, m.Doc, st)
			if err != nil {
				return nil, err
			}
			if !strings.HasPrefix(doc, m.Name+" ") {
				return nil, fmt.Errorf("recipegen: the doc of %s.%s does not start with its name", m.Type, m.Name)
			}
			b.WriteString("\n")
			b.WriteString(comment(doc))
			r := recv[m.Type]
			if m.Wraps != "" {
				fmt.Fprintf(&b, "func (%s *%s) %s(%s) %s {\n\tq, err := %s.q.%s(%s)\n\tif err != nil {\n\t\treturn nil, err\n\t}\n\treturn &%s{q}, nil\n}\n",
					r, m.Type, m.Name, m.Params, m.Results, r, m.Name, m.Args, m.Wraps)
				continue
			}
			fmt.Fprintf(&b, "func (%s *%s) %s(%s) %s { return %s.q.%s(%s) }\n", r, m.Type, m.Name, m.Params, m.Results, r, m.Name, m.Args)
		}
	}
	out, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("recipegen: %s: %w\n%s", st.Pkg, err, b.Bytes())
	}
	return out, nil
}

// expand executes doc, a template on st, and returns its paragraphs with
// each one's lines joined.
func expand(name, doc string, st Store) (string, error) {
	t, err := template.New(name).Parse(templates)
	if err == nil {
		t, err = t.Parse(doc)
	}
	if err != nil {
		return "", fmt.Errorf("recipegen: %s: %w", name, err)
	}
	var b strings.Builder
	if err := t.Execute(&b, st); err != nil {
		return "", fmt.Errorf("recipegen: %s: %w", name, err)
	}
	var paras []string
	for _, p := range strings.Split(strings.TrimSpace(b.String()), "\n\n") {
		paras = append(paras, strings.Join(strings.Fields(p), " "))
	}
	return strings.Join(paras, "\n\n"), nil
}

// width is the longest a comment line's text may be, "// " excluded.
const width = 72

// comment returns doc as a // comment, each paragraph filled to width.
func comment(doc string) string {
	var b strings.Builder
	for i, p := range strings.Split(doc, "\n\n") {
		if i > 0 {
			b.WriteString("//\n")
		}
		line := ""
		for _, w := range words(p) {
			if line != "" && utf8.RuneCountInString(line)+1+utf8.RuneCountInString(w) > width {
				b.WriteString("// " + line + "\n")
				line = ""
			}
			if line != "" {
				line += " "
			}
			line += w
		}
		b.WriteString("// " + line + "\n")
	}
	return b.String()
}

// words splits a paragraph into the words a line may break between,
// keeping an expression such as Session.Prefix() + name + "/@" on one
// line.
func words(p string) []string {
	var out []string
	glue := false
	for _, w := range strings.Fields(p) {
		switch {
		case w == "+" && len(out) > 0:
			out[len(out)-1] += " +"
			glue = true
		case glue:
			out[len(out)-1] += " " + w
			glue = false
		default:
			out = append(out, w)
		}
	}
	return out
}
