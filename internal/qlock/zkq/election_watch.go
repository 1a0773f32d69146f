package zkq

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/distlock/distlock/internal/ctxwait"
	"github.com/distlock/distlock/internal/qlock"
	"github.com/distlock/distlock/internal/zkctx"
	"github.com/go-zookeeper/zk"
	"golang.org/x/sync/errgroup"
)

// WatchElection follows election name's state (qlock.Elections). It keeps
// three watches: a data watch on the directory (the term record; an exists
// watch while there is no directory), a child watch on it (the
// candidates), and a data watch on the leader's node (its value), and
// re-reads only what a watch fired for. A state is sent only when no
// watch has fired since its reads were answered: the client delivers a
// watch's event before the answers that follow it, so every part of the
// state is then still as read, and the state is the election's at the
// last answer. States therefore never go back, and no state is sent that
// the election never was (such as a vacancy between a handoff's delete
// and its record, which happen in one write). The one exception says so:
// a state of the term record alone (Partial, see handedTo), sent when an
// event that may come with a handoff shows the record naming a candidate
// already listed, before the rest is read. A candidate's position and
// owner never change: each candidate's Stat is read once. Foreign
// candidates (foreign.go) are read once each too, for ElectionState's
// Foreign: they need no watch of their own, since the child watch is set
// again and the directory listed after every change of its children,
// so a foreign candidate's deletion brings a new full state (one that
// frees the distlock candidates it held back). It goes on
// across reconnects and session expiries (it only reads: it needs the
// connection, not the session), until ctx ends or the connection is
// closed.
func (s *Session) WatchElection(ctx context.Context, name string, ch chan<- qlock.ElectionState) {
	defer close(ch)
	w := &electionWatch{conn: s.conn, dir: s.Dir(name), stats: map[string]*zk.Stat{}, values: map[string]string{}}
	// pause is the wait after a failure; false when ctx ended or the
	// connection is closed.
	pause := func(err error) bool {
		if errors.Is(err, zk.ErrClosing) {
			s.Log().Debug("zklock: election watch: connection closed", "election", name)
			return false
		}
		return ctxwait.Sleep(ctx, qlock.RetryDelay) == nil
	}
	var (
		last qlock.ElectionState
		sent bool
	)
	for ctx.Err() == nil {
		if st, ok := w.handedTo(ctx, sent, last); ok {
			select {
			case ch <- st:
				last = st
			case <-ctx.Done():
				return
			}
		}
		if err := w.read(ctx); err != nil {
			if !pause(err) {
				return
			}
			continue
		}
		if fired, err := w.fired(); fired || !w.complete() {
			// Part of what was read has changed since, or could not be
			// read: read it again before anything is sent. A part that
			// could not be read went with a change whose event is on its
			// way: wait for it, for a pause at most.
			switch {
			case err != nil:
				if !pause(err) {
					return
				}
			case !fired:
				t := time.NewTimer(qlock.RetryDelay)
				_, ok := w.next(ctx, t.C)
				t.Stop()
				if !ok {
					return
				}
			}
			continue
		}
		if st := w.state(); !sent || !sameState(st, last) {
			select {
			case ch <- st:
				last, sent = st, true
			case <-ctx.Done():
				return
			}
		}
		ev, ok := w.next(ctx, nil)
		if !ok || ev.Type == zk.EventNotWatching && !pause(ev.Err) {
			return
		}
	}
}

// handedTo reads the term record first when a watch that fired may have
// come with a write of it: its own, or the leader's node's on its
// deletion, which a handoff makes in the same write as the record (the
// deletion's events come first, and the client may hand any of them over
// first: the others already delivered are taken here too). If the record
// now names another candidate this watch has listed, it returns the
// state of the record alone (qlock.ElectionState.Partial): the successor
// a handoff named leads on it, one read after the handoff's events, and
// the watches that are left (the listing, new candidates' Stats, its own
// value) are set after, by the read that follows, while it already
// leads. The record is read with its watch, so that read starts from it.
// Anything else (no write of the record seen, a leader it has not
// listed, a failure) leaves it all to that read.
func (w *electionWatch) handedTo(ctx context.Context, sent bool, last qlock.ElectionState) (qlock.ElectionState, bool) {
	if !sent {
		return qlock.ElectionState{}, false // the first state is a full one
	}
	if _, err := w.fired(); err != nil || w.rstat == nil || w.dirW != nil && !w.leaderGone {
		return qlock.ElectionState{}, false
	}
	// The record's watch may still be set (the leader's node's event came
	// first): the new one replaces it. The read's answer comes after every
	// event the client was sent before it, the old watch's included, so it
	// is at least as new as anything that watch would report.
	x, err := zkctx.Call(ctx, func() (watched, error) {
		d, st, ch, err := w.conn.GetW(w.dir)
		return watched{ch, d, st}, err
	})
	if err != nil {
		return qlock.ElectionState{}, false
	}
	w.dirW, w.record, w.rstat, w.leaderGone = x.ch, x.data, x.stat, false
	key := w.leaderKey()
	cs := w.stats[key]
	if cs == nil || key == last.Leader {
		return qlock.ElectionState{}, false
	}
	st := termState(w.dir, w.record, w.rstat)
	st.Partial = true
	for _, c := range candidates(w.dir, []string{string(w.record)}) {
		c.Seq, c.Owner, c.Value = cs.Czxid, uint64(cs.EphemeralOwner), w.values[key]
		st.Contenders = append(st.Contenders, c)
	}
	return st, true
}

// WatchReads says that WatchElection reads after every event (the
// events carry no data): a leader ends its watch before a handoff's
// write (qlock's step-down), so that it does not read while the
// successor does.
func (s *Session) WatchReads() bool { return true }

// next waits until one of w's watches fires, and returns its event: what
// it watched is to be read again (everything, after EventNotWatching). A
// timeout that fires first (nil: none) returns the zero Event; ok is false
// when ctx ended.
func (w *electionWatch) next(ctx context.Context, timeout <-chan time.Time) (ev zk.Event, ok bool) {
	select {
	case <-ctx.Done():
		return ev, false
	case <-timeout:
		return ev, true
	case ev = <-w.dirW:
		w.dirW = nil
	case ev = <-w.childW:
		w.childW = nil
	case ev = <-w.leaderW:
		w.leaderW = nil
		w.leaderGone = ev.Type == zk.EventNodeDeleted
	}
	if ev.Type == zk.EventNotWatching {
		w.reset()
	}
	return ev, true
}

// read is a node's data and Stat.
type read struct {
	data []byte
	stat *zk.Stat
}

// electionWatch is what WatchElection has read, each part valid while its
// watch has not fired (a nil watch: read it again).
type electionWatch struct {
	conn *zk.Conn
	dir  string

	dirW   <-chan zk.Event
	record []byte   // the directory's data
	rstat  *zk.Stat // nil while there is no directory

	childW   <-chan zk.Event
	children []string
	statsDue bool // the listing's new candidates' Stats are still to be read

	leaderW <-chan zk.Event
	leader  string // the node the leader's value was read from
	value   []byte
	// leaderGone says that the leader's node's watch fired with its
	// deletion since the record was last read: a handoff's write may have
	// moved the record too (handedTo).
	leaderGone bool

	stats map[string]*zk.Stat // the listed candidates' Stats
	// values are the listed candidates' values as read once: a waiting
	// candidate's never changes (only a leader Proclaims).
	values map[string]string
}

// reset forgets every watch: the client has dropped them all (session
// expiry), so everything is read again.
func (w *electionWatch) reset() {
	w.dirW, w.childW, w.leaderW = nil, nil, nil
	w.statsDue, w.leaderGone = false, false
}

// fired takes the events of the watches that fired since they were set:
// what they watched is read again. err is the cause when the client has
// dropped every watch.
func (w *electionWatch) fired() (fired bool, err error) {
	for _, wch := range []*<-chan zk.Event{&w.dirW, &w.childW, &w.leaderW} {
		if *wch == nil || len(*wch) == 0 {
			continue
		}
		ev := <-*wch
		*wch, fired = nil, true
		if wch == &w.leaderW && ev.Type == zk.EventNodeDeleted {
			w.leaderGone = true
		}
		if ev.Type == zk.EventNotWatching {
			err = cmp.Or(ev.Err, zk.ErrSessionExpired)
		}
	}
	if err != nil {
		w.reset()
	}
	return fired, err
}

// complete reports whether every part of the state is read and watched.
// A part that could not be read because its node was deleted meanwhile
// is left unwatched, and then another watch has fired.
func (w *electionWatch) complete() bool {
	switch {
	case w.dirW == nil:
		return false
	case w.rstat == nil: // no directory
		return true
	case w.childW == nil || w.statsDue:
		return false
	}
	_, listed := w.stats[w.leaderKey()]
	return !listed || w.leaderW != nil && w.leader == w.leaderKey()
}

// leaderKey is the node the term record names, "" for none.
func (w *electionWatch) leaderKey() string {
	if w.rstat == nil || len(w.record) == 0 {
		return ""
	}
	return w.dir + "/" + string(w.record)
}

// read reads, with a watch, what is not known: the term record, the
// candidates, each new candidate's Stat, and the leader's value.
func (w *electionWatch) read(ctx context.Context) error {
	type listing struct {
		children []string
		ch       <-chan zk.Event
		err      error
	}
	list := func() listing {
		l, err := zkctx.Call(ctx, func() (listing, error) {
			c, _, ch, err := w.conn.ChildrenW(w.dir)
			return listing{children: c, ch: ch}, err
		})
		l.err = err
		return l
	}
	// When both the record and the candidates changed (a handoff, a
	// claim after a leader left), both are read at once: the state is
	// sent only if no watch fired after both answers, so the two need
	// no order.
	var listed chan listing
	if w.dirW == nil && w.childW == nil {
		listed = make(chan listing, 1)
		go func() { listed <- list() }()
	}
	for w.dirW == nil {
		x, err := zkctx.Call(ctx, func() (watched, error) {
			d, st, ch, err := w.conn.GetW(w.dir)
			return watched{ch, d, st}, err
		})
		if err == nil {
			w.dirW, w.record, w.rstat, w.leaderGone = x.ch, x.data, x.stat, false
			break
		}
		if !errors.Is(err, zk.ErrNoNode) {
			return err
		}
		type exists struct {
			ok bool
			ch <-chan zk.Event
		}
		e, err := zkctx.Call(ctx, func() (exists, error) {
			ok, _, ch, err := w.conn.ExistsW(w.dir)
			return exists{ok, ch}, err
		})
		if err != nil {
			return err
		}
		if e.ok {
			continue // created since the read
		}
		w.dirW, w.record, w.rstat = e.ch, nil, nil
		w.childW, w.children, w.statsDue = nil, nil, false
		w.leaderW, w.leader, w.value = nil, "", nil
		clear(w.stats)
		clear(w.values)
		return nil
	}
	if w.rstat == nil {
		return nil
	}
	if w.childW == nil {
		var l listing
		if listed != nil {
			l = <-listed
		} else {
			l = list()
		}
		if errors.Is(l.err, zk.ErrNoNode) {
			return nil // deleted since the record's read: its watch has fired
		}
		if l.err != nil {
			return l.err
		}
		w.childW, w.children, w.statsDue = l.ch, l.children, true
	}
	if w.statsDue {
		if err := w.readStats(ctx); err != nil {
			return err
		}
		w.statsDue = false
	}
	key := w.leaderKey()
	if _, ok := w.stats[key]; !ok {
		// Vacant: no leader's value to follow. The old leader's watch, if
		// one is left, fires once, at its node's deletion.
		w.leaderW, w.leader, w.value = nil, "", nil
		return nil
	}
	if w.leaderW == nil || w.leader != key {
		x, err := zkctx.Call(ctx, func() (watched, error) {
			d, st, ch, err := w.conn.GetW(key)
			return watched{ch, d, st}, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			// Deleted since the listing: the child watch has fired.
			w.leaderW, w.leader, w.value = nil, "", nil
			return nil
		}
		if err != nil {
			return err
		}
		w.leaderW, w.leader, w.value = x.ch, key, x.data
	}
	return nil
}

// readStats reads the Stat of every listed candidate not read before, and
// forgets those not listed any more. A candidate deleted since the listing
// has no Stat: the child watch has fired.
func (w *electionWatch) readStats(ctx context.Context) error {
	listed := map[string]bool{}
	var todo []string
	own := contenderKeys(candidates(w.dir, w.children))
	foreign := map[string]bool{}
	for _, k := range foreignKeys(foreignCandidates(w.dir, w.children)) {
		foreign[k] = true
	}
	for _, k := range append(own, slices.Collect(maps.Keys(foreign))...) {
		listed[k] = true
		if w.stats[k] == nil {
			todo = append(todo, k)
		}
	}
	maps.DeleteFunc(w.stats, func(k string, _ *zk.Stat) bool { return !listed[k] })
	maps.DeleteFunc(w.values, func(k string, _ string) bool { return !listed[k] })
	reads := make([]read, len(todo))
	var g errgroup.Group
	for i, p := range todo {
		g.Go(func() error {
			x, err := zkctx.Call(ctx, func() (read, error) {
				if foreign[p] {
					// Its Stat alone: an Exists, which no ACL refuses.
					ok, st, err := w.conn.Exists(p)
					if err == nil && !ok {
						err = zk.ErrNoNode
					}
					return read{stat: st}, err
				}
				d, st, err := w.conn.Get(p)
				return read{d, st}, err
			})
			if errors.Is(err, zk.ErrNoNode) {
				return nil
			}
			reads[i] = x
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for i, p := range todo {
		if reads[i].stat != nil {
			w.stats[p], w.values[p] = reads[i].stat, string(reads[i].data)
		}
	}
	return nil
}

// state is the election's state as read.
func (w *electionWatch) state() qlock.ElectionState {
	st := termState(w.dir, w.record, w.rstat)
	if w.rstat == nil {
		return st
	}
	for _, c := range candidates(w.dir, w.children) {
		cs := w.stats[c.Key]
		if cs == nil {
			continue
		}
		c.Seq, c.Owner, c.Value = cs.Czxid, uint64(cs.EphemeralOwner), w.values[c.Key]
		if c.Key == w.leader {
			c.Value = string(w.value) // a leader's Proclaims change it
		}
		st.Contenders = append(st.Contenders, c)
	}
	sortContenders(st.Contenders)
	for _, f := range foreignCandidates(w.dir, w.children) {
		if fs := w.stats[f.Key]; fs != nil {
			f.Seq = fs.Czxid
			st.Foreign = append(st.Foreign, f)
		}
	}
	sortForeign(st.Foreign)
	return st
}

func sameState(a, b qlock.ElectionState) bool {
	return a.Term == b.Term && a.Leader == b.Leader && a.Version == b.Version && a.Partial == b.Partial && slices.Equal(a.Contenders, b.Contenders) && slices.Equal(a.Foreign, b.Foreign)
}
