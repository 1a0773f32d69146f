package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/cmd/internal/backend"
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
OWNER. On etcd the other locks are found from the entry alone (the
inspection does it: etcdlock Admin.Inspect's QueueEntry.Multi), by one
more request (a Txn of one read per exclusive entry, 64 entries to a
Txn): each reads the keys under the prefix created at the entry's
revision by its lease; the server filters them, so only the
acquisition's own keys come back (it scans the prefix's keys to do so).
The same happens after each change with --watch. ZooKeeper cannot find a node by its czxid
without listing every lock's directory, which status does not do: there,
give the names you suspect, "distlock status a b c", and the entries
found in more than one of these queues with the same czxid and session
are marked, with the names among those given ("it may take more locks").

A queue shared with other clients (Apache Curator, kazoo, go-zookeeper's
zk.Lock on ZooKeeper; etcd's own lock and election, etcdctl lock, etcd's
recipes' RWMutex on etcd) lists their entries in their places, with a
CLIENT column ("distlock" for its own; the column shows only when some
entry is another client's) and the token distlock gives their holder.
A child of the lock's queue that no client distlock knows made has
POS "-", ROLE "unknown" and no token: it is listed, not waited for, and a
line under the table counts such children. See docs/interop.md.

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
    "free":    false,               true when no entry holds or waits
    "holders": 1,                   entries with role "holder"
    "waiters": 2,                   entries with role "waiting"
    "unknown": 1,                   only when some: entries with role "unknown"
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
        "place":       1,           1-based place in its own queue: the lock's, a semaphore's
                                    or the election's (a name's candidates count from 1 again)
        "role":        "holder",    "holder" or "waiting" (an election's leader: "holder");
                                    "unknown" for a child no known client made (kind "", token "")
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
        "client":      "curator",   only for another client's entry: curator, kazoo, go-zookeeper,
                                    etcd, etcd-recipes, or unknown
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
		sts, queues = append(sts, st), append(queues, q)
	}
	if b.Kind() != backend.Etcd {
		// ZooKeeper's entries name no multi-lock: compare the queues read.
		multi := backend.SharedEntries(names, queues)
		for _, st := range sts {
			st.markMulti(multi)
		}
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

// markMulti sets the Multi of the entries that multi has (by key), as
// found among the locks given (backend.SharedEntries): maybe not all of
// the acquisition's.
func (st *lockStatus) markMulti(multi map[string][]string) {
	for i := range st.Entries {
		if locks, ok := multi[st.Entries[i].Key]; ok && st.Entries[i].Multi == nil {
			st.Entries[i].Multi = &entryMulti{Locks: locks, Complete: false}
		}
	}
}
