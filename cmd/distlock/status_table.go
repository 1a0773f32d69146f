package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/cmd/internal/backend"
)

// lockStatus is the --json document (see statusUsage); its field names are
// a stable interface.
type lockStatus struct {
	Lock    string `json:"lock"`
	Backend string `json:"backend"`
	Free    bool   `json:"free"`
	Holders int    `json:"holders"`
	Waiters int    `json:"waiters"`
	// Unknown counts the children of the lock's queue that no client
	// distlock knows made (client "unknown"): listed, not waited for.
	Unknown int `json:"unknown,omitempty"`
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

// statusEntry is one entry of the --json document's entries (see
// statusUsage): a distlock.QueueEntry as status shows it.
type statusEntry struct {
	Position int `json:"position"`
	// Place is the entry's place in its own queue (the lock's, a
	// semaphore's or the election's), where Position counts the rows.
	Place  int    `json:"place"`
	Role   string `json:"role"`
	Kind   string `json:"kind"`
	Key    string `json:"key"`
	Token  string `json:"token"`
	Seq    int64  `json:"seq"`
	Owner  string `json:"owner"`
	Holder string `json:"holder"`
	// Client is the other client whose recipe made the entry
	// (distlock.ClientCurator, ...; "unknown" for a child no known
	// client made), absent for distlock's own.
	Client     string     `json:"client,omitempty"`
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

// newStatus returns the status of lock name, of a store of kind, whose
// queue q is as Inspect returns it (each queue in order, candidates
// last), at now.
func newStatus(name string, kind backend.Kind, q []distlock.QueueEntry, now time.Time) *lockStatus {
	st := &lockStatus{Lock: name, Backend: "etcd", Entries: []statusEntry{}}
	ownerKind := "lease"
	if kind != backend.Etcd {
		st.Backend, ownerKind = "zookeeper", "session"
	}
	for _, e := range q {
		se := statusEntry{
			Role:      "waiting",
			Kind:      e.Kind.String(),
			Key:       e.Key,
			Token:     e.Token.String(),
			Seq:       e.Token.Seq,
			Owner:     e.Owner,
			Holder:    e.Holder,
			Client:    e.Client,
			Place:     e.Position,
			ownerKind: ownerKind,
		}
		if e.Permits > 0 {
			st.Permits = e.Permits
			slot := e.Slot
			se.Slot = &slot
			se.Kind = fmt.Sprintf("slot %d", slot)
		}
		if e.Kind == distlock.Candidate {
			prio := e.Priority
			se.Priority = &prio
			if !e.Holding {
				// A waiting candidate has no token yet: its term's,
				// when it leads, is the revision of the write that
				// begins the term, not its entry's position.
				se.Token, se.Seq = "", 0
			}
		}
		switch {
		case e.Client == distlock.ClientUnknown:
			// Not in the queue's order: its kind and token are
			// nobody's guess, and no entry waits for it.
			se.Role, se.Kind, se.Token, se.Seq = roleUnknown, "", "", 0
			st.Unknown++
		case e.Holding:
			se.Role = "holder"
			st.Holders++
		default:
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
		if e.Multi != nil { // etcd's: all of the acquisition's locks
			se.Multi = &entryMulti{Locks: e.Multi, Complete: true}
		}
		se.Position = len(st.Entries) + 1
		st.Entries = append(st.Entries, se)
	}
	st.Free = st.Holders+st.Waiters == 0
	return st
}

// roleUnknown is the role of a child of the lock's queue that no client
// distlock knows made.
const roleUnknown = "unknown"

// clientName is the client an entry of status names: "distlock" for its
// own.
func clientName(c string) string {
	if c == "" {
		return "distlock"
	}
	return c
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
		if st.Unknown == 0 {
			return
		}
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
		case e.Role == roleUnknown:
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
	// CLIENT only when another client's entry is in the queue: a queue
	// of distlock's own reads as it always did.
	mixed := false
	for _, e := range st.Entries {
		mixed = mixed || e.Client != ""
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if mixed {
		fmt.Fprintln(tw, "POS\tROLE\tKIND\tCLIENT\tTOKEN\tOWNER\tAGE\tHOLDER")
	} else {
		fmt.Fprintln(tw, "POS\tROLE\tKIND\tTOKEN\tOWNER\tAGE\tHOLDER")
	}
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
		pos := strconv.Itoa(e.Position)
		if e.Role == roleUnknown {
			pos, kind = "-", "-"
		}
		owner := e.ownerKind + " " + e.Owner
		if e.Owner == "" {
			owner = "-"
		}
		client := ""
		if mixed {
			client = clientName(e.Client) + "\t"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s%s\t%s\t%s\t%s\n", pos, role, kind, client, token, owner, age, oneLine(holder))
	}
	tw.Flush()
	if st.Unknown > 0 {
		fmt.Fprintf(w, "unknown: %d %s of the lock's queue that no client distlock knows made: listed, not waited for (see docs/interop.md)\n",
			st.Unknown, plural(st.Unknown, "child", "children"))
	}
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
