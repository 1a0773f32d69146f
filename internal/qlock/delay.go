package qlock

import (
	"context"
	"encoding/json"
	"path"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/ctxwait"
)

// DelayRecord is what a waiter serving a lock-delay records in its
// session (see DelayMarker), for the distlock status command: which
// acquisition is held back, after which entry went, until when. The
// record is the waiter's alone (an etcd key bound to its lease, a
// ZooKeeper ephemeral node), never a queue entry's data: a lock's waiters
// read a data change on an entry as its release.
type DelayRecord struct {
	Lock   string    `json:"lock"`
	Token  string    `json:"token"`
	Holder string    `json:"holder,omitempty"`
	Gone   string    `json:"gone"`
	Until  time.Time `json:"until"`
}

// DelayRecordName is the name of n's record under its lock's delay
// records (the drivers' DelayDir): its entry's own last path segment,
// which starts with '@' and so is no lock-name segment.
func DelayRecordName(n *Node) string { return path.Base(n.Key) }

// DelayRecordData is the data of n's delay record (DelayRecord, as JSON)
// on session st, serving a delay until until after entry gone went: for
// the drivers' MarkDelay.
func (st *State) DelayRecordData(n *Node, gone string, until time.Time) []byte {
	r := DelayRecord{
		Lock:   n.Name,
		Token:  distlock.Token{Name: n.Name, Seq: n.Token, Owner: st.owner}.String(),
		Holder: st.holder,
		Gone:   gone,
		Until:  until.UTC(),
	}
	b, _ := json.Marshal(r)
	return b
}

// ParseDelayRecord reads a delay record's data.
func ParseDelayRecord(data []byte) (DelayRecord, error) {
	var r DelayRecord
	err := json.Unmarshal(data, &r)
	return r, err
}

// Lock-delay (etcdlock and zklock WithLockDelay): a waiter that becomes
// the head because the entry ahead of it went without its holder's
// release (its session ended on the store, or someone deleted it) waits
// the session's delay more before it holds, for work of the old holder's
// that no fence can stop and that may still run. A clean release hands
// over at once. The delay counts from when the waiter saw the entry go,
// which is no earlier than it went; the waiter keeps following its own
// entry meanwhile (a loss fails the acquisition, a cancel returns at
// once).
//
// Which going counts is the one of an entry that held when it went. In a
// queue of exclusive entries that is the last one the waiter waited on:
// one that went while an older entry was still there (the waiter waits on
// that one next) was only waiting. A writer behind several readers holding
// together owes the delay if any of them went without a release, unless
// an older writer turned up afterwards (then they were waiting for it).
// owedDelay keeps that account as the wait goes from entry to entry,
// newest to oldest.
type owedDelay struct {
	due   bool      // an entry that may have held went without a release
	since time.Time // when the waiter saw the last such entry go
	key   string    // that entry
	excl  bool      // it was exclusive
}

// waitOn is the start of a wait on w, an entry older than every entry
// gone so far, still there after they went: an exclusive w conflicts with
// each of them, so none of them held; any w, with an exclusive one.
func (o *owedDelay) waitOn(w Entry) {
	if o.due && (w.Kind == Exclusive || o.excl) {
		*o = owedDelay{}
	}
}

// went records how p went, seen at.
func (o *owedDelay) went(p Entry, released bool, at time.Time) {
	switch {
	case !released:
		*o = owedDelay{due: true, since: at, key: p.Key, excl: p.Kind == Exclusive}
	case p.Kind == Exclusive:
		// It held, so the entries that went before it (newer) did not.
		*o = owedDelay{}
	}
}

// serveDelay holds n back until delay d after the going o records, or
// until ctx ends (n's own end ends it too). n.lockDelay says how long it
// waited, n.delayUntil until when it was to (for giveUp).
func (e *Engine) serveDelay(ctx context.Context, n *Node, o owedDelay, d time.Duration) error {
	until := o.since.Add(d)
	start := time.Now()
	if !start.Before(until) {
		return nil // served already (a slow read on the way)
	}
	n.delayUntil = until
	e.st.log.Info(e.st.backend.Pkg+": lock-delay: the entry ahead went without a release", "lock", n.Name, "key", n.Key, "gone", o.key, "delay", d, "until", until)
	clear := e.markDelay(n, o, until)
	defer clear()
	err := ctxwait.Sleep(ctx, time.Until(until))
	n.lockDelay = time.Since(start)
	return err
}

// giveUp is abandon (step 7) for a waiter whose wait failed. One that gave
// up (its ctx ended) while it served a lock-delay, on a store whose
// waiters cannot tell giving up from a release (Driver.ReleaseMarked),
// returns at once but keeps its entry, held by nobody, until the delay's
// end: the waiter behind it, taking its going for a release, would
// otherwise hold before the delay is over. The entry is removed then,
// or goes with the session if it ends first; never left behind.
func (e *Engine) giveUp(n *Node, cause error) {
	until := n.delayUntil
	if until.IsZero() || e.d.ReleaseMarked() || n.alive.Err() != nil || !time.Now().Before(until) {
		e.abandon(n, cause)
		return
	}
	n.kill(cause)
	e.st.log.Debug(e.st.backend.Pkg+": lock-delay: giving up; the entry stays until the delay's end", "lock", n.Name, "key", n.Key, "until", until)
	e.st.Go(func(ctx context.Context) {
		if ctxwait.Sleep(ctx, time.Until(until)) == nil {
			e.d.Abandon(n)
		}
	})
}

// DelayMarker is a store's record of the lock-delays its waiters serve,
// for the distlock status command: a driver that has one implements it.
type DelayMarker interface {
	// MarkDelay records, in the background, that n serves a lock-delay
	// until until, after entry gone went without a release, in a record
	// of n's session (gone with it); it returns at once. clear removes
	// the record, in the background too, once the delay is over.
	MarkDelay(n *Node, gone string, until time.Time) (clear func())
}

// markDelay has the store record n's lock-delay (see DelayMarker), if it
// can; clear ends the record.
func (e *Engine) markDelay(n *Node, o owedDelay, until time.Time) (clear func()) {
	m, ok := e.d.(DelayMarker)
	if !ok {
		return func() {}
	}
	return m.MarkDelay(n, o.key, until)
}
