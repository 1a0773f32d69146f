package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/cmd/internal/backend"
	"github.com/distlock/distlock/internal/qlock"
	"github.com/distlock/distlock/internal/qlock/etcdq"
	"github.com/distlock/distlock/internal/qlock/zkq"
	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func init() {
	register(command{name: "status", summary: "show a lock's holder and waiters (an election's candidates too)", run: statusCmd})
}

const statusUsage = `Usage:
  distlock status [--etcd ENDPOINTS | --zk SERVERS] [--prefix P] [--json]
                  [--fence KEY] [--watch [--changes N]] NAME [NAME...]

Shows the queue of the lock NAME without joining it: the holder first, then
the waiters in the order they will get the lock. For each entry: its kind
(exclusive; shared for a reader; for a semaphore, "slot K" for the holder
of permit K and "counted" for a waiter), its fencing token (NAME@SEQ.OWNER,
what its holder's DISTLOCK_TOKEN says; a waiter's is the one it will
have), its owner (the etcd lease or the ZooKeeper session, in hex), how
long it has been in the queue, and what the entry says about its holder
(distlock's own entries: "HOST pid PID WHAT since TIME"). The age comes
from the store where it keeps one (ZooKeeper), else from the "since
TIME" in the entry; "-" when neither is known. A lock nobody holds
prints "lock NAME: free (no holder, no waiters)".

An election of that name (etcdlock or zklock NewElection) shows too,
after the lock's entries if there are any, under a line of its own
("election NAME: led (1 leader, 2 waiting)", or "no leader" while a
term is vacant, until the next in line claims it). Its candidates have
kind "candidate" ("candidate pP" in the table for a priority P other than
0, see WithPriority): first the leader, the candidate the election's term
record names, with role "leader" in the table ("holder" in JSON) and its
term's token (the revision of the write that began its term, what it
fences with; not its entry's position); then the waiting candidates in
the order they would lead next: the highest priority first, the oldest
among equals. A waiting candidate has no token yet ("-"): its term's
is made when it leads. HOLDER is a candidate's value (Campaign, Proclaim).

An entry of a multi-lock (distlock run with several --lock, or a
MultiMutex: one acquisition of several locks, all or none) is marked
under the table: "multi: entry 1 holds a+b+c together: ..." (or "waits
for"), naming every lock of that acquisition. Its entries, one in each
lock's queue, were made in one write, so their tokens share SEQ and
OWNER. On etcd the other locks are found from the entry alone, by one
more request (a Txn of one read per exclusive entry, 64 entries to a
Txn): each reads the keys under the prefix created at the entry's
revision by its lease; the server filters them, so only the
acquisition's own keys come back (it scans the prefix's keys to do so).
The same happens after each change with --watch. ZooKeeper cannot find a node by its czxid
without listing every lock's directory, which status does not do: there,
give the names you suspect, "distlock status a b c", and the entries
found in more than one of these queues with the same czxid and session
are marked, with the names among those given ("it may take more locks").

With several NAMEs (up to 32), status shows each lock's queue in turn, a
blank line between them (--json: an array of the objects below, in the
order given). --watch and --fence take one NAME.

A lock that has been revoked (distlock revoke) also shows its revocation
records: each pending one, whose holder still holds the lock, prominently
under the first line ("REVOKED: token TOKEN asked to let go by WHO at TIME:
REASON; grace G, ends TIME", or "still holds after its grace period
ended" when it was not forced; for an election's leader, revoked or
preempted by a candidate of a higher priority, "REVOKED: leader token
TOKEN asked to step down ..." or "still leads ..."); then, at the end,
how many are recorded and the newest three past ones with their outcome
(released, forced, still-held, or ended: the holder went but its revoker
did not record how). Records outlive their holders, so a free lock shows
them too.

A waiter that serves a lock-delay (etcdlock/zklock WithLockDelay: the
entry ahead of it went without its holder's release, its session ended
or it was deleted) shows under the first line: "lock-delay: granted to
TOKEN after the previous holder's entry KEY went without a release
(session ended, or deleted), not before TIME". The waiter records it in
its own session (etcd: a key bound to its lease under PREFIX@delay/NAME/;
ZooKeeper: an ephemeral node under PREFIX/@delay/NAME) for the delay's
length.

The read is one consistent snapshot (etcd: one range read; ZooKeeper: a
sync, the listing, then each entry; entries gone meanwhile are left out).

With --fence KEY (an etcd key, or a znode path on ZooKeeper: where an
etcdfence or zkfence of this lock keeps its newest token) it also shows
the newest token the fence has admitted beside the holder's: "current"
when they are the same acquisition (the holder's writes reach the
resource), "behind" when the fence's is older (the holder has written
nothing through the fence yet, or writes without it), "ahead" when it is
newer than the holder's (a token from outside this queue: a restored or
rebuilt cluster?), "none" when the fence has admitted nothing, and "free"
when nobody holds the lock. The holder is the lock's, else the
election's leader, with its term's token.

With --watch the command stays and shows the queue again after every
change of it (an entry joined, left, or became the holder). It is driven
by the store's own notifications (etcd: a watch on the lock's keys;
ZooKeeper: a child watch on its directory), never by polling the store.
On a terminal it redraws the table in place (and the ages every second);
otherwise it prints each new table after a line "--- TIME"; with --json
it prints one compact object per line, the first for the queue as it is,
then one per change. It runs until interrupted (exit 0) or, with
--changes N, until it has shown N changes.

Examples:
  distlock status --etcd 10.0.0.1:2379 reports/daily
  distlock status --etcd 10.0.0.1:2379 --watch reports/daily
  distlock status --zk zk1:2181 --watch --json --changes 1 backup   # wait for the next change
  ETCDCTL_ENDPOINTS=10.0.0.1:2379 distlock status backup
  distlock status --zk zk1:2181 --json backup | jq -r '.entries[0].holder'
  distlock status --zk zk1:2181 acct/42 acct/7      # which entries are one multi-lock's

Text output:
  lock backup: held (1 holder, 2 waiting)
  POS  ROLE     KIND       TOKEN                         OWNER                   AGE  HOLDER
  1    holder   exclusive  backup@1042.694d9b1c2a3f4e01  lease 694d9b1c2a3f4e01  3s   web1 pid 4711 distlock run since 2026-11-30T10:00:00Z
  2    waiting  exclusive  backup@1050.694d9b1c2a3f4e0b  lease 694d9b1c2a3f4e0b  1s   web2 pid 4712 distlock run since 2026-11-30T10:00:02Z
  ...
  multi: entry 2 waits for backup+db together: one acquisition of 2 locks, all or none (the same SEQ and OWNER in each lock's token)

  election scheduler: led (1 leader, 2 waiting)
  POS  ROLE     KIND          TOKEN                            OWNER                   AGE  HOLDER
  1    leader   candidate p5  scheduler@2210.694d9b1c2a3f4e10  lease 694d9b1c2a3f4e10  -    sched-host1
  2    waiting  candidate p3  -                                lease 694d9b1c2a3f4e17  -    sched-host3
  3    waiting  candidate     -                                lease 694d9b1c2a3f4e12  -    sched-host2

JSON output (--json), one object; fields are never removed or renamed:
  {
    "lock":    "backup",            the lock's name
    "backend": "etcd",              "etcd" or "zookeeper"
    "free":    false,               true when entries is empty
    "holders": 1,                   entries with role "holder"
    "waiters": 2,                   entries with role "waiting"
    "fence": {                      only with --fence
      "key":    "/fences/backup",   the fence's key or path
      "newest": "backup@1042.694d9b1c2a3f4e01",  the newest token admitted, "" if none
      "state":  "current"           current, behind, ahead, none or free (see above)
    },
    "revocations": {                only when the lock has revocation records (distlock revoke)
      "total":   3,                 records kept (the newest 100)
      "pending": [ REVOCATION ],    requests whose holder still holds the lock: outcome
                                    "pending" (grace running) or "still-held" (over, not forced); oldest first
      "past":    [ REVOCATION ]     the newest 3 others, newest first
    },
    "lock_delays": [                only while a waiter serves a lock-delay
      {"token": "backup@1050.694d9b1c2a3f4e0b", "holder": "web2 ...",
       "gone": "/distlock/backup/@w694d9b1c2a3f4e01_1",  the entry that went without a release
       "until": "2026-11-30T10:00:07Z"}                 when the waiter holds
    ],
    "entries": [                    holder(s) first, then waiters in queue order; [] when free;
                                    an election's candidates after them, leader first, then
                                    in the order they would lead (see above)
      {
        "position":    1,           1-based place in the queue (in entries)
        "role":        "holder",    "holder" or "waiting" (an election's leader: "holder")
        "kind":        "exclusive", "exclusive", "shared", "counted" (a semaphore's waiter),
                                    "slot K" (the holder of a semaphore's permit K)
                                    or "candidate" (an election's, leader or waiting)
        "key":         "/distlock/backup/@w694d9b1c2a3f4e01_1",  etcd key or znode path
        "token":       "backup@1042.694d9b1c2a3f4e01",  the fencing token (DISTLOCK_TOKEN of its holder;
                                    a leader's: its term's); "" for a waiting candidate
        "seq":         1042,        the token's number (0 for a waiting candidate)
        "priority":    5,           only for a candidate: its priority (WithPriority; 0 by default)
        "owner":       "694d9b1c2a3f4e01",  etcd lease / ZooKeeper session id, hex
        "holder":      "web1 pid 4711 distlock run since 2026-11-30T10:00:00Z",
        "created":     "2026-11-30T10:00:00Z",  RFC 3339, or null when unknown
        "age_seconds": 3,           whole seconds since created, or null
        "multi": {                  only for a multi-lock's entry
          "locks":    ["backup", "db"],  the locks of its acquisition, this one included, sorted
          "complete": true          true: all of them (etcd); false: those among the NAMEs given (ZooKeeper)
        }
      }
    ]
  }
  REVOCATION is the record as stored, plus two fields:
  {"lock", "key", "token", "holder": the revoked holder's entry;
   "by", "reason", "grace" (nanoseconds), "force": the request;
   "requested": RFC 3339; "outcome": pending, released, forced, still-held
   or ended; "ended": RFC 3339, absent while pending;
   "grace_ends": RFC 3339; "holding": whether that holder still holds the lock}

Environment read (the cluster flags' defaults): ETCDCTL_ENDPOINTS,
ETCDCTL_CACERT, ETCDCTL_CERT, ETCDCTL_KEY, ETCDCTL_USER, ETCDCTL_PASSWORD
(as etcdctl), DISTLOCK_ZK, DISTLOCK_ZK_AUTH, DISTLOCK_ZK_CHROOT.
`

func statusCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var (
		conn    connFlags
		asJSON  bool
		watch   bool
		changes int
		fence   string
	)
	conn.register(fs)
	fs.BoolVar(&asJSON, "json", false, "print one JSON object (schema above) instead of the table")
	fs.BoolVar(&watch, "watch", false, "stay, and show the queue again after every change")
	fs.StringVar(&fence, "fence", "", "also show the newest token admitted by the fence at this etcd key or znode path")
	fs.IntVar(&changes, "changes", 0, "with --watch: exit after showing this many changes (0: until interrupted)")
	parse := func(args []string) error {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				printHelp(stdout, "status", statusUsage, fs)
				return err
			}
			return usageErr("%v; see 'distlock status --help'", err)
		}
		return nil
	}
	// Flags may come before or after NAME.
	var names []string
	for rest := args; ; {
		if err := parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil
			}
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		names = append(names, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	conn.noteSet(fs)
	if len(names) == 0 {
		return usageErr("no lock name; e.g. distlock status --etcd host:2379 backup")
	}
	seen := map[string]bool{}
	for _, name := range names {
		if err := distlock.ValidateName(name); err != nil {
			return usageErr("lock %q: %s; use segments of letters, digits, '-', '_' and '.' separated by '/'", name, lockCause(err))
		}
		if seen[name] {
			return usageErr("lock %q given twice", name)
		}
		seen[name] = true
	}
	switch {
	case len(names) > distlock.MaxMultiNames:
		return usageErr("%d lock names: at most %d at once", len(names), distlock.MaxMultiNames)
	case len(names) > 1 && watch:
		return usageErr("--watch follows one lock; got %d names", len(names))
	case len(names) > 1 && fence != "":
		return usageErr("--fence audits one lock's fence; got %d names", len(names))
	}

	if changes < 0 || changes > 0 && !watch {
		return usageErr("--changes %d: wants --watch and a count of 1 or more", changes)
	}
	if watch {
		return watchStatus(&conn, names[0], fence, asJSON, changes, stdout)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*conn.timeout)
	defer cancel()
	b, err := conn.open(ctx)
	if err != nil {
		return err
	}
	defer b.Close()
	qctx, qcancel := context.WithTimeout(ctx, conn.timeout)
	defer qcancel()
	var (
		sts    []*lockStatus
		queues [][]distlock.QueueEntry
		all    []distlock.QueueEntry
	)
	for _, name := range names {
		q, err := b.Inspect(qctx, name)
		if err != nil {
			return exit(exitUnreachable, fmt.Errorf("status of lock %q: %w%s", name, err, b.AuthHint(err)))
		}
		st := newStatus(name, b.Kind(), q, time.Now())
		if err := st.readSlots(qctx, b); err != nil {
			return exit(exitUnreachable, fmt.Errorf("status of lock %q: done-markers: %w%s", name, err, b.AuthHint(err)))
		}
		if err := st.readRevocations(qctx, b, q); err != nil {
			return exit(exitUnreachable, fmt.Errorf("status of lock %q: revocations: %w%s", name, err, b.AuthHint(err)))
		}
		if err := st.readDelays(qctx, b, time.Now()); err != nil {
			return exit(exitUnreachable, fmt.Errorf("status of lock %q: lock-delays: %w%s", name, err, b.AuthHint(err)))
		}
		if fence != "" {
			if err := st.readFence(qctx, b, fence); errors.Is(err, backend.ErrFenceKey) {
				return usageErr("--fence %q: %s", fence, causeAfter(err, backend.ErrFenceKey))
			} else if err != nil {
				return exit(exitUnreachable, fmt.Errorf("status of lock %q: fence %s: %w%s", name, fence, err, b.AuthHint(err)))
			}
		}
		sts, queues, all = append(sts, st), append(queues, q), append(all, q...)
	}
	if err := markMulti(qctx, b, sts, names, queues, all); err != nil {
		return exit(exitUnreachable, fmt.Errorf("status of lock %q: multi-lock entries: %w%s", strings.Join(names, " "), err, b.AuthHint(err)))
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if len(sts) == 1 {
			return enc.Encode(sts[0])
		}
		return enc.Encode(sts)
	}
	for i, st := range sts {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		st.writeText(stdout)
	}
	return nil
}

// markMulti marks the entries of sts (the statuses of names, whose queues
// are queues, all of them in all) that are a multi-lock's, with the locks
// their acquisition takes: on etcd all of them, found by the entries'
// create revision (backend.Client.MultiLocks); on ZooKeeper those among
// names whose queues have an entry of the same czxid and owner.
func markMulti(ctx context.Context, b *backend.Client, sts []*lockStatus, names []string, queues [][]distlock.QueueEntry, all []distlock.QueueEntry) error {
	multi, complete, err := b.MultiLocks(ctx, all)
	if err != nil {
		return err
	}
	if !complete {
		multi = backend.SharedEntries(names, queues)
	}
	for _, st := range sts {
		st.markMulti(multi, complete)
	}
	return nil
}

// markMulti sets the Multi of the entries that multi has (by key).
func (st *lockStatus) markMulti(multi map[string][]string, complete bool) {
	for i := range st.Entries {
		if locks, ok := multi[st.Entries[i].Key]; ok {
			st.Entries[i].Multi = &entryMulti{Locks: locks, Complete: complete}
		}
	}
}

// lockStatus is the --json document (see statusUsage); its field names are
// a stable interface.
type lockStatus struct {
	Lock    string `json:"lock"`
	Backend string `json:"backend"`
	Free    bool   `json:"free"`
	Holders int    `json:"holders"`
	Waiters int    `json:"waiters"`
	// Permits is N for a semaphore that has holders (run --permits), 0
	// for a lock.
	Permits int          `json:"permits,omitempty"`
	Fence   *fenceStatus `json:"fence,omitempty"`
	// Slots are the lock's done-markers (distlock once, distlock.Once,
	// gocronlock), when it has any.
	Slots *slotsStatus `json:"slots,omitempty"`
	// Revocations are the lock's revocation records (distlock revoke),
	// when it has any.
	Revocations *revocationsStatus `json:"revocations,omitempty"`
	// LockDelays are the lock-delays waiters serve now (the stores'
	// WithLockDelay), when any does.
	LockDelays []delayStatus `json:"lock_delays,omitempty"`
	Entries    []statusEntry `json:"entries"`
}

// delayStatus is a lock-delay a waiter serves: it is the head of the
// queue, its predecessor's entry (Gone) having gone without its holder's
// release, and it holds once the delay ends (Until). As its record
// (qlock.DelayRecord) says it.
type delayStatus struct {
	Token  string    `json:"token"`
	Holder string    `json:"holder,omitempty"`
	Gone   string    `json:"gone"`
	Until  time.Time `json:"until"`
}

// readDelays reads the lock-delay records of the lock's waiters (a key of
// each waiter's lease under PREFIX@delay/NAME/ on etcd, an ephemeral node
// of its session under PREFIX/@delay/NAME on ZooKeeper) and keeps those
// whose delay has not ended by now: a record's delete can come a moment
// after its delay, or not at all until its session ends.
func (st *lockStatus) readDelays(ctx context.Context, b *backend.Client, now time.Time) error {
	var data [][]byte
	switch {
	case b.Etcd() != nil:
		resp, err := b.Etcd().Get(ctx, etcdq.DelayDir(b.Prefix(), st.Lock), clientv3.WithPrefix())
		if err != nil {
			return err
		}
		for _, kv := range resp.Kvs {
			if !strings.Contains(strings.TrimPrefix(string(kv.Key), etcdq.DelayDir(b.Prefix(), st.Lock)), "/") {
				data = append(data, kv.Value)
			}
		}
	case b.ZK() != nil:
		dir := zkq.DelayDir(b.Prefix(), st.Lock)
		kids, _, err := b.ZK().Children(dir)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, k := range kids {
			if !strings.HasPrefix(k, "@") {
				continue // a longer lock name's directory
			}
			d, _, err := b.ZK().Get(dir + "/" + k)
			if errors.Is(err, zk.ErrNoNode) {
				continue // its delay ended meanwhile
			}
			if err != nil {
				return err
			}
			data = append(data, d)
		}
	}
	for _, d := range data {
		r, err := qlock.ParseDelayRecord(d)
		if err != nil || r.Lock != st.Lock || !now.Before(r.Until) {
			continue
		}
		st.LockDelays = append(st.LockDelays, delayStatus{Token: r.Token, Holder: r.Holder, Gone: r.Gone, Until: r.Until})
	}
	slices.SortFunc(st.LockDelays, func(a, b delayStatus) int { return a.Until.Compare(b.Until) })
	return nil
}

// writeText writes a line per lock-delay served, still running at now.
func (d delayStatus) writeText(w io.Writer, now time.Time) {
	if !now.Before(d.Until) {
		return
	}
	fmt.Fprintf(w, "lock-delay: granted to %s after the previous holder's entry %s went without a release (session ended, or deleted), not before %s (in %v)\n",
		d.Token, d.Gone, d.Until.Format(time.RFC3339Nano), d.Until.Sub(now).Round(100*time.Millisecond))
}

// revocationsStatus is what status shows of a lock's revocation records.
type revocationsStatus struct {
	Total int `json:"total"`
	// Pending are the requests whose holder still holds the lock: asked,
	// its grace period running ("pending"), or over and not forced
	// ("still-held"); oldest first.
	Pending []statusRevocation `json:"pending"`
	// Past are the newest revocationsShown others, newest first.
	Past []statusRevocation `json:"past"`

	now time.Time
}

// statusRevocation is a revocation record as stored (distlock.Revocation:
// lock, key, token, holder, by, reason, grace in nanoseconds, force,
// requested, outcome, ended), and what status adds.
type statusRevocation struct {
	distlock.Revocation
	// GraceEnds is when the holder's grace period ends (or ended).
	GraceEnds time.Time `json:"grace_ends"`
	// Holding says whether the revoked holder still holds the lock.
	Holding bool `json:"holding"`
}

// leader reports whether the revoked holder is an election's leader
// (asked to step down by distlock revoke, or by a candidate of a higher
// priority: a preemption).
func (r statusRevocation) leader() bool { return electionKey(r.Key) }

// electionKey reports whether key is an election candidate's entry (etcd
// ".../@e...", ZooKeeper ".../@e-..."); lock entries, readers, a
// semaphore's line and slots have other marks.
func electionKey(key string) bool {
	return strings.HasPrefix(path.Base(key), "@e")
}

// revocationsShown is how many past revocations status shows.
const revocationsShown = 3

// readRevocations reads the lock's revocation records, if it has any,
// and sorts them into pending and past by the queue q.
func (st *lockStatus) readRevocations(ctx context.Context, b *backend.Client, q []distlock.QueueEntry) error {
	recs, err := b.Revocations(ctx, st.Lock)
	if err != nil || len(recs) == 0 {
		return err
	}
	holding := map[string]bool{}
	for _, e := range q {
		if e.Holding {
			holding[e.Token.String()] = true
		}
	}
	rs := &revocationsStatus{Total: len(recs), Pending: []statusRevocation{}, Past: []statusRevocation{}, now: time.Now()}
	for _, r := range recs {
		sr := statusRevocation{Revocation: r, GraceEnds: r.GraceEnds().UTC(), Holding: holding[r.Token]}
		if sr.Holding && (r.Outcome == distlock.RevokePending || r.Outcome == distlock.RevokeStillHeld) {
			rs.Pending = append(rs.Pending, sr)
		}
	}
	// Records come oldest first: the past ones newest first.
	for i := len(recs) - 1; i >= 0 && len(rs.Past) < revocationsShown; i-- {
		r := recs[i]
		if holding[r.Token] && (r.Outcome == distlock.RevokePending || r.Outcome == distlock.RevokeStillHeld) {
			continue
		}
		rs.Past = append(rs.Past, statusRevocation{Revocation: r, GraceEnds: r.GraceEnds().UTC(), Holding: holding[r.Token]})
	}
	st.Revocations = rs
	return nil
}

// writePending writes a line per pending revocation, for the top of the
// text output.
func (rs *revocationsStatus) writePending(w io.Writer) {
	for _, r := range rs.Pending {
		asked := fmt.Sprintf("by %s at %s: %q", r.By, rfc3339UTC(r.Requested), r.Reason)
		what, holds, letGo, takes := "token", "holds", "let go", "takes it"
		if r.leader() {
			what, holds, letGo, takes = "leader token", "leads", "step down", "deposes it"
		}
		if r.Outcome == distlock.RevokeStillHeld || !rs.now.Before(r.GraceEnds) {
			fmt.Fprintf(w, "REVOKED: %s %s still %s after its grace period ended at %s (%s ago); asked %s; 'distlock revoke --force' %s\n",
				what, r.Token, holds, rfc3339UTC(r.GraceEnds), rs.now.Sub(r.GraceEnds).Round(time.Second), asked, takes)
			continue
		}
		fmt.Fprintf(w, "REVOKED: %s %s asked to %s %s; grace %v, ends %s (in %v)\n",
			what, r.Token, letGo, asked, r.Grace, rfc3339UTC(r.GraceEnds), r.GraceEnds.Sub(rs.now).Round(time.Second))
	}
}

// writePast writes the past revocations' lines.
func (rs *revocationsStatus) writePast(w io.Writer) {
	if len(rs.Past) == 0 {
		return
	}
	fmt.Fprintf(w, "revocations: %d recorded (distlock revoke); newest past:\n", rs.Total)
	for _, r := range rs.Past {
		outcome := string(r.Outcome)
		switch {
		case r.Outcome == distlock.RevokeStillHeld && !r.Holding:
			outcome += " after the grace period, released since"
		case r.Outcome == distlock.RevokeEnded:
			outcome += " (the holder is gone; no revoker recorded how)"
		case r.ForcedBy != "":
			outcome += fmt.Sprintf(" by %s (%q)", r.ForcedBy, r.ForceReason)
		}
		if !r.Ended.IsZero() {
			outcome += " at " + rfc3339UTC(r.Ended)
		}
		force := ""
		if r.Force {
			force = ", force"
		}
		what := "token"
		if r.leader() {
			what = "leader token"
		}
		fmt.Fprintf(w, "  %s %s: %s; asked by %s at %s: %q, grace %v%s\n", what, r.Token, outcome, r.By, rfc3339UTC(r.Requested), r.Reason, r.Grace, force)
	}
}

// slotsStatus is what status shows of a lock's done-markers.
type slotsStatus struct {
	Done   int                   `json:"done"`
	Newest []distlock.SlotMarker `json:"newest"`
}

// slotsShown is how many of the newest markers status shows.
const slotsShown = 3

// readSlots reads the lock's done-markers, if it has any.
func (st *lockStatus) readSlots(ctx context.Context, b *backend.Client) error {
	total, newest, err := b.SlotMarkers(ctx, st.Lock, slotsShown)
	if err != nil || total == 0 {
		return err
	}
	st.Slots = &slotsStatus{Done: total, Newest: newest}
	return nil
}

// writeText writes the markers' lines.
func (ss *slotsStatus) writeText(w io.Writer) {
	fmt.Fprintf(w, "slots done: %d (distlock once / distlock.Once markers); newest:\n", ss.Done)
	for _, m := range ss.Newest {
		fmt.Fprintf(w, "  %s by %s\n", m.Slot, m)
	}
}

// fenceStatus is the fence audit of status --fence.
type fenceStatus struct {
	Key    string `json:"key"`
	Newest string `json:"newest"`
	State  string `json:"state"`

	newest, holder distlock.Token
}

// readFence reads the fence at key and compares its newest token with the
// holder's.
func (st *lockStatus) readFence(ctx context.Context, b *backend.Client, key string) error {
	newest, err := b.FenceNewest(ctx, key, st.Lock)
	if err != nil {
		return err
	}
	fs := &fenceStatus{Key: key, newest: newest}
	if !newest.IsZero() {
		fs.Newest = newest.String()
	}
	var holder distlock.Token
	for _, e := range st.Entries {
		if e.Role == "holder" {
			holder, _ = distlock.ParseToken(e.Token)
			break
		}
	}
	fs.holder = holder
	switch {
	case holder.IsZero():
		fs.State = "free"
	case newest.IsZero():
		fs.State = "none"
	case newest.Seq == holder.Seq && newest.Owner == holder.Owner:
		fs.State = "current"
	case newest.Seq < holder.Seq:
		fs.State = "behind"
	default:
		fs.State = "ahead"
	}
	st.Fence = fs
	return nil
}

// writeText says what the fence audit found, in one line.
func (fs *fenceStatus) writeText(w io.Writer) {
	newest := "has admitted no token yet"
	if !fs.newest.IsZero() {
		newest = "newest admitted token " + fs.Newest
	}
	var what string
	switch fs.State {
	case "free":
		what = "nobody holds the lock"
	case "none":
		what = fmt.Sprintf("the holder (token %s) has written nothing through it yet", fs.holder)
	case "current":
		what = "the current holder's: its writes reach the resource"
	case "behind":
		what = fmt.Sprintf("older than the holder's %s: the holder has written nothing through the fence yet, or writes without it", fs.holder)
	case "ahead":
		what = fmt.Sprintf("NEWER than the holder's %s: a token from outside this queue (a restored or rebuilt cluster?)", fs.holder)
	}
	fmt.Fprintf(w, "fence %s: %s; %s\n", fs.Key, newest, what)
}

type statusEntry struct {
	Position   int        `json:"position"`
	Role       string     `json:"role"`
	Kind       string     `json:"kind"`
	Key        string     `json:"key"`
	Token      string     `json:"token"`
	Seq        int64      `json:"seq"`
	Owner      string     `json:"owner"`
	Holder     string     `json:"holder"`
	Slot       *int       `json:"slot,omitempty"`
	Priority   *int       `json:"priority,omitempty"` // an election candidate's (WithPriority); only candidates have one
	Created    *time.Time `json:"created"`
	AgeSeconds *int64     `json:"age_seconds"`
	// Multi is set for an entry of a multi-lock (run with several
	// --lock): one acquisition of several locks.
	Multi *entryMulti `json:"multi,omitempty"`

	ownerKind string // "lease" or "session", for the table
}

// entryMulti is what status knows of a multi-lock's entry.
type entryMulti struct {
	// Locks are the locks the acquisition takes, this one included,
	// sorted.
	Locks []string `json:"locks"`
	// Complete says Locks are all of them (etcd); on ZooKeeper they are
	// those among the locks given to status only.
	Complete bool `json:"complete"`
}

func newStatus(name string, kind backend.Kind, q []distlock.QueueEntry, now time.Time) *lockStatus {
	st := &lockStatus{Lock: name, Backend: "etcd", Free: len(q) == 0, Entries: []statusEntry{}}
	ownerKind := "lease"
	if kind != backend.Etcd {
		st.Backend, ownerKind = "zookeeper", "session"
	}
	for _, e := range electionOrder(q) {
		se := statusEntry{
			Role:      "waiting",
			Kind:      e.Kind.String(),
			Key:       e.Key,
			Token:     e.Token.String(),
			Seq:       e.Token.Seq,
			Owner:     e.Owner,
			Holder:    e.Holder,
			ownerKind: ownerKind,
		}
		if e.Permits > 0 {
			st.Permits = e.Permits
			slot := e.Slot
			se.Slot = &slot
			se.Kind = fmt.Sprintf("slot %d", slot)
		}
		if e.Kind == distlock.Candidate {
			prio := candidatePriority(e.Key)
			se.Priority = &prio
			if !e.Holding {
				// A waiting candidate has no token yet: its term's,
				// when it leads, is the revision of the write that
				// begins the term, not its entry's position.
				se.Token, se.Seq = "", 0
			}
		}
		if e.Holding {
			se.Role = "holder"
			st.Holders++
		} else {
			st.Waiters++
		}
		created := e.Created
		if created.IsZero() {
			created = sinceIn(e.Holder)
		}
		if !created.IsZero() {
			c := created.UTC().Truncate(time.Second)
			se.Created = &c
			age := int64(max(now.Sub(created), 0) / time.Second)
			se.AgeSeconds = &age
		}
		se.Position = len(st.Entries) + 1
		st.Entries = append(st.Entries, se)
	}
	return st
}

// electionOrder returns q (a queue as Inspect reads it) with the
// election's candidates, if any, after the lock's entries (which keep
// their order) and in the order they lead: the leader first, then the
// waiting candidates in the order the next terms would go to them, the
// highest priority first, the oldest among equals (q lists them oldest
// first).
func electionOrder(q []distlock.QueueEntry) []distlock.QueueEntry {
	out := make([]distlock.QueueEntry, 0, len(q))
	var cands []distlock.QueueEntry
	for _, e := range q {
		if e.Kind == distlock.Candidate {
			cands = append(cands, e)
		} else {
			out = append(out, e)
		}
	}
	slices.SortStableFunc(cands, func(a, b distlock.QueueEntry) int {
		if a.Holding != b.Holding {
			if a.Holding {
				return -1
			}
			return 1
		}
		return cmp.Compare(candidatePriority(b.Key), candidatePriority(a.Key))
	})
	return append(out, cands...)
}

// candidatePriority returns the priority (distlock.WithPriority) of the
// election candidate whose entry is key, as the key says it: etcd
// "PREFIX/NAME/@ep<PRIO>.<lease>_<n>", ZooKeeper
// "PREFIX/NAME/@e-<guid>-p<PRIO>-<seq>"; a candidate of priority 0 has
// none in its key ("@e<lease>_<n>", "@e-<guid>-<seq>"). Both are the
// stores' own formats (internal/qlock/etcdq/keys.go, zkq/names.go), which
// every candidate reads to know whom it waits for, so they do not change
// lightly; QueueEntry has no priority of its own.
func candidatePriority(key string) int {
	rest, ok := strings.CutPrefix(path.Base(key), "@e")
	if !ok {
		return 0
	}
	var num string
	switch {
	case strings.HasPrefix(rest, "p"): // etcd: "p<PRIO>." before the lease
		num, _, ok = strings.Cut(rest[1:], ".")
	case strings.HasPrefix(rest, "-"): // ZooKeeper: "-<guid>-p<PRIO>-<seq>"
		_, tail, found := strings.Cut(rest[1:], "-")
		tail, ok = strings.CutPrefix(tail, "p")
		if !found || !ok {
			return 0
		}
		i := strings.LastIndex(tail, "-") // before the sequence number
		if i < 0 {
			return 0
		}
		num = tail[:i]
	}
	p, err := strconv.Atoi(num)
	if !ok || err != nil {
		return 0
	}
	return p
}

// candidateKind is an election candidate's kind in status.
var candidateKind = distlock.Candidate.String()

// sinceIn returns the time in the "since RFC3339" that distlock's own
// entries carry (see holderValue), or the zero time.
func sinceIn(holder string) time.Time {
	f := strings.Fields(holder)
	for i := len(f) - 2; i >= 0; i-- {
		if f[i] == "since" {
			if t, err := time.Parse(time.RFC3339, f[i+1]); err == nil {
				return t
			}
		}
	}
	return time.Time{}
}

func (st *lockStatus) writeText(w io.Writer) {
	if st.Fence != nil {
		defer st.Fence.writeText(w)
	}
	if st.Revocations != nil {
		defer st.Revocations.writePast(w)
	}
	if st.Slots != nil {
		defer st.Slots.writeText(w)
	}
	if st.Free {
		fmt.Fprintf(w, "lock %s: free (no holder, no waiters)\n", st.Lock)
		return
	}
	// The lock's entries and the election's candidates of the name, each
	// with a line of its own (an election and a lock of one name do not
	// interfere).
	var holders, waiters, leaders, candidates int
	for _, e := range st.Entries {
		switch {
		case e.Kind == candidateKind && e.Role == "holder":
			leaders++
		case e.Kind == candidateKind:
			candidates++
		case e.Role == "holder":
			holders++
		default:
			waiters++
		}
	}
	switch {
	case st.Permits > 0:
		fmt.Fprintf(w, "semaphore %s: %d of %d permits held, %d waiting\n", st.Lock, holders, st.Permits, waiters)
	case holders+waiters > 0:
		state := "held"
		if holders == 0 { // cannot happen with a non-empty queue; be plain
			state = "not held"
		}
		fmt.Fprintf(w, "lock %s: %s (%d %s, %d waiting)\n", st.Lock, state, holders, plural(holders, "holder", "holders"), waiters)
	}
	switch {
	case leaders > 0:
		fmt.Fprintf(w, "election %s: led (%d %s, %d waiting)\n", st.Lock, leaders, plural(leaders, "leader", "leaders"), candidates)
	case candidates > 0:
		fmt.Fprintf(w, "election %s: no leader (%d waiting; the next in line claims the term)\n", st.Lock, candidates)
	}
	if st.Revocations != nil {
		st.Revocations.writePending(w)
	}
	now := time.Now()
	for _, d := range st.LockDelays {
		d.writeText(w, now)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "POS\tROLE\tKIND\tTOKEN\tOWNER\tAGE\tHOLDER")
	for _, e := range st.Entries {
		age := "-"
		if e.AgeSeconds != nil {
			age = (time.Duration(*e.AgeSeconds) * time.Second).String()
		}
		holder := e.Holder
		if holder == "" {
			holder = "-"
		}
		role, kind, token := e.Role, e.Kind, e.Token
		if e.Kind == candidateKind {
			if e.Role == "holder" {
				role = "leader"
			}
			if *e.Priority != 0 {
				kind += fmt.Sprintf(" p%d", *e.Priority)
			}
		}
		if token == "" {
			token = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s %s\t%s\t%s\n", e.Position, role, kind, token, e.ownerKind, e.Owner, age, oneLine(holder))
	}
	tw.Flush()
	for _, e := range st.Entries {
		if e.Multi != nil {
			fmt.Fprintln(w, e.Multi.line(e))
		}
	}
}

// line says, under the table, that entry e is a multi-lock's.
func (m *entryMulti) line(e statusEntry) string {
	verb := "waits for"
	if e.Role == "holder" {
		verb = "holds"
	}
	line := fmt.Sprintf("multi: entry %d %s %s together: one acquisition of %d locks, all or none (the same SEQ and OWNER in each lock's token)", e.Position, verb, strings.Join(m.Locks, "+"), len(m.Locks))
	if !m.Complete {
		line = fmt.Sprintf("multi: entry %d %s %s together: one acquisition, all or none (the same SEQ and OWNER in each lock's token); it may take more locks: ZooKeeper shows only those among the locks given to status", e.Position, verb, strings.Join(m.Locks, "+"))
	}
	return line
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// errEnough ends a watch that has shown the changes it was asked for.
var errEnough = errors.New("enough changes shown")

// watchStatus is status --watch: the queue now, then after every change,
// until interrupted or changes have been shown (0: no limit).
func watchStatus(conn *connFlags, name, fence string, asJSON bool, changes int, stdout io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	octx, ocancel := context.WithTimeout(ctx, 2*conn.timeout)
	b, err := conn.open(octx)
	ocancel()
	if err != nil {
		return err
	}
	defer b.Close()

	tty := isTerminal(stdout)
	var (
		mu     sync.Mutex
		last   []distlock.QueueEntry
		audit  *fenceStatus        // the fence as read at the last change
		delays []delayStatus       // the lock-delays as read at the last change
		shown  = -1                // changes shown; the first snapshot is not one
		multi  map[string][]string // the multi-lock entries at the last change (etcd)
		redraw = func(q []distlock.QueueEntry) {
			st := newStatus(name, b.Kind(), q, time.Now())
			st.Fence = audit
			st.LockDelays = delays
			st.markMulti(multi, true)
			switch {
			case asJSON:
				json.NewEncoder(stdout).Encode(st) // one line per snapshot
			case tty:
				fmt.Fprint(stdout, "\x1b[H\x1b[2J") // home, clear
				st.writeText(stdout)
				fmt.Fprintf(stdout, "\nwatching lock %s on %s (updated %s); Ctrl-C to stop\n", name, st.Backend, time.Now().Format(time.TimeOnly))
			default:
				fmt.Fprintf(stdout, "--- %s\n", time.Now().UTC().Format(time.RFC3339))
				st.writeText(stdout)
			}
		}
	)
	if tty && !asJSON {
		// Ages move on between changes: redraw them from the last
		// snapshot every second (the store is not read again).
		go everySecond(ctx, func() {
			mu.Lock()
			if shown >= 0 {
				redraw(last)
			}
			mu.Unlock()
		})
	}
	err = b.WatchQueue(ctx, name, func(q []distlock.QueueEntry) error {
		mu.Lock()
		defer mu.Unlock()
		if shown >= 0 && sameQueue(last, q) {
			return nil // a notification that changed nothing shown (a directory made or removed)
		}
		last = q
		m, complete, err := b.MultiLocks(ctx, q)
		if err != nil {
			return fmt.Errorf("multi-lock entries: %w", err)
		}
		if complete {
			multi = m
		}
		// A lock-delay starts when an entry goes: a change of the queue.
		ds := newStatus(name, b.Kind(), q, time.Now())
		if err := ds.readDelays(ctx, b, time.Now()); err != nil {
			return fmt.Errorf("lock-delays: %w", err)
		}
		delays = ds.LockDelays
		if fence != "" {
			st := newStatus(name, b.Kind(), q, time.Now())
			if err := st.readFence(ctx, b, fence); err != nil {
				return fmt.Errorf("fence %s: %w", fence, err)
			}
			audit = st.Fence
		}
		redraw(q)
		shown++
		if changes > 0 && shown >= changes {
			return errEnough
		}
		return nil
	})
	switch {
	case errors.Is(err, errEnough), ctx.Err() != nil:
		return nil
	case errors.Is(err, backend.ErrFenceKey):
		return usageErr("--fence %q: %s", fence, causeAfter(err, backend.ErrFenceKey))
	case err != nil:
		return exit(exitUnreachable, fmt.Errorf("status --watch of lock %q: %w%s", name, err, b.AuthHint(err)))
	}
	return nil
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// sameQueue reports whether a and b list the same entries in the same
// roles.
func sameQueue(a, b []distlock.QueueEntry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || a[i].Holding != b[i].Holding || a[i].Holder != b[i].Holder || a[i].Token != b[i].Token {
			return false
		}
	}
	return true
}
