package etcdq

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Following the session's own entries (qlock.Driver's Follow).
//
// An entry must be followed from its put to its release: if anyone else
// deletes it, a waiter must not go on to hold and a holder must learn that
// it lost the lock. A watch per entry would cost every acquisition a watch
// create and a cancel (two requests of the four it needs at best) and two
// goroutines per waiter. Instead one range watch follows all of a
// session's entries of one kind in one queue — the keys dir + mark +
// lease + "_" + n, a prefix of their own — and stays open while the
// session uses the queue, and for followIdle after: a session that takes
// the same lock again and again creates one watch, not one per
// acquisition. It carries deletions only (puts are filtered out), so it
// costs an event only when one of the session's entries goes: its own
// releases included, which it ignores.
//
// And the watch starts only once an entry has lived followDelay: a Lock
// that is granted at once and released within that time — the
// uncontended case, and the common one with many independent locks —
// costs its two writes and nothing else. The watch starts from history,
// at the entry's own revision, so a deletion in the meantime is not
// missed, only heard later: a foreign delete of an entry (an operator's,
// or a forced revoke) is noticed within followDelay plus etcd's catch-up
// loop for watches that start in the past (at most 100 ms). Deletion by
// the session's lease expiring needs no watch: the session's
// conservative deadline ends it first.
//
// What makes it complete: an entry's key is registered (expect) before
// its put is sent, so a deletion that the running watch delivers before
// Follow is called is kept and reported then; and a watch always covers
// the revisions after the put of every entry that asked for it (ensure),
// starting again further back when a newer entry started it first. After
// a compaction it reads what is left of its entries. This file registers
// the entries with their follower; follow_watch.go runs its watch.

// followDelay is how long an entry lives before its follower's watch must
// run.
const followDelay = 100 * time.Millisecond

// followIdle is how long a follower with no entry keeps its watch open.
const followIdle = 30 * time.Second

// follower is the range watch over one prefix of the session's entries,
// and the entries registered with it.
type follower struct {
	s      *Session
	prefix string

	mu      sync.Mutex
	entries map[string]*followed
	running bool          // run is watching
	from    int64         // while running: the first revision the watch covers
	rewind  int64         // not 0: run must watch again from this revision
	changed chan struct{} // a signal: entries went empty or non-empty, or rewind was set
}

// followed is one entry registered with a follower.
type followed struct {
	gone func(error) // nil until Follow
	// seq is the entry's create revision, once Follow knows it. A
	// semaphore's slot keys are reused by one holder after another, so a
	// deletion of the key at or before seq was an earlier holder's.
	seq int64
	// deletedAt is the revision of the newest deletion seen before Follow.
	deletedAt int64
	// since, if not 0, is a revision from which on the watch must cover
	// the entry: it was read present just before (see followSince).
	since int64
	// unsure: a resync read found no key, but the put may not have been
	// applied yet; Follow looks again.
	unsure bool
}

// followPrefix is the prefix of key that its follower watches: the key
// without its counter.
func followPrefix(key string) string { return key[:strings.LastIndexByte(key, '_')+1] }

// expect registers key, whose put is about to be sent, with the follower
// of its prefix. forget undoes it when the put failed or was undone.
func (s *Session) expect(key string) (forget func()) {
	prefix := followPrefix(key)
	s.followMu.Lock()
	defer s.followMu.Unlock()
	f := s.followers[prefix]
	if f == nil {
		f = &follower{s: s, prefix: prefix, entries: map[string]*followed{}, changed: make(chan struct{}, 1)}
		if s.followers == nil {
			s.followers = map[string]*follower{}
		}
		s.followers[prefix] = f
	}
	f.mu.Lock()
	f.entries[key] = &followed{}
	f.mu.Unlock()
	f.signal()
	return func() { f.forget(key) }
}

// Follow has n's follower call gone when n's entry is deleted by anyone
// but its owner, until n.Alive() ends (qlock.Driver). It returns at once.
func (s *Session) Follow(n *qlock.Node, gone func(error)) {
	s.followMu.Lock()
	f := s.followers[followPrefix(n.Key)]
	s.followMu.Unlock()
	if f == nil {
		return // the session ended before the follower could start
	}
	f.mu.Lock()
	e := f.entries[n.Key]
	if e == nil {
		f.mu.Unlock()
		return
	}
	e.seq = n.Seq
	e.gone = func(err error) {
		if n.Alive().Err() == nil {
			gone(err)
		}
	}
	deleted, unsure := e.deletedAt > n.Seq, e.unsure
	f.mu.Unlock()
	t := time.AfterFunc(followDelay, func() {
		if n.Alive().Err() == nil {
			f.ensure(f.since(n.Key, n.Seq+1))
		}
	})
	context.AfterFunc(n.Alive(), func() {
		t.Stop()
		f.forget(n.Key)
	})
	switch {
	case deleted:
		e.gone(s.entryGone(n.Key))
	case unsure:
		s.Go(func(context.Context) {
			ctx, cancel := context.WithTimeout(n.Alive(), s.ttl)
			defer cancel()
			resp, err := s.client.Get(ctx, n.Key, clientv3.WithKeysOnly())
			if err == nil && (len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != n.Seq) {
				e.gone(s.entryGone(n.Key))
			}
		})
	}
}

// followSince has n's follower watch from revision rev on, now: n's entry
// was read present at rev-1 (Confirm), so nothing before rev need be
// watched. A waiter that just took the lock over is followed at once, by
// a watch that starts at the current revision, which etcd serves as soon
// as a deletion is committed: had it started from history (n's own
// revision), etcd's catch-up loop would deliver a deletion up to 100 ms
// later, after followDelay.
func (s *Session) followSince(n *qlock.Node, rev int64) {
	s.followMu.Lock()
	f := s.followers[followPrefix(n.Key)]
	s.followMu.Unlock()
	if f == nil {
		return
	}
	f.mu.Lock()
	e := f.entries[n.Key]
	if e != nil {
		e.since = max(e.since, rev)
	}
	f.mu.Unlock()
	if e != nil && n.Alive().Err() == nil {
		f.ensure(rev)
	}
}

// since returns the revision from which key's entry must be watched:
// rev, or later if it was read present since.
func (f *follower) since(key string, rev int64) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e := f.entries[key]; e != nil {
		return max(rev, e.since)
	}
	return rev
}

// entryGone is the cause reported for an entry deleted by someone else.
// Past the session's deadline, the lease expiring is the likely cause (the
// process may just have woken from a pause), and the one to report,
// whichever of the two news came first.
func (s *Session) entryGone(key string) error {
	if !time.Now().Before(s.Deadline()) {
		return fmt.Errorf("%w: lease %x past its client-side deadline; key %s deleted", distlock.ErrSessionExpired, int64(s.id), key)
	}
	return fmt.Errorf("%w: key %s", distlock.ErrEntryGone, key)
}

func (f *follower) signal() {
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

func (f *follower) forget(key string) {
	f.s.followMu.Lock()
	defer f.s.followMu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.entries[key]; !ok {
		return
	}
	delete(f.entries, key)
	if len(f.entries) > 0 {
		return
	}
	if !f.running {
		f.drop()
		return
	}
	f.signal() // run starts counting followIdle
}

// ensure makes the follower's watch cover every revision from rev on,
// starting it if it is not running, or making it go back if it started
// later.
func (f *follower) ensure(rev int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case len(f.entries) == 0:
		// Its entries went meanwhile (and with them, maybe, the
		// follower from its session).
	case !f.running:
		f.running, f.from = true, rev
		// If the session has ended, no watch runs; its entries end with
		// it (Alive derives from the session).
		f.s.Go(func(ctx context.Context) { f.run(ctx, rev) })
	case rev < f.from:
		f.from = rev
		f.rewind = rev
		f.signal()
	}
}

// deleted records that key was deleted at revision rev, and reports it if
// followed and newer than the entry.
func (f *follower) deleted(key string, rev int64) {
	f.mu.Lock()
	e := f.entries[key]
	var gone func(error)
	switch {
	case e == nil:
	case e.gone == nil:
		e.deletedAt = max(e.deletedAt, rev)
	case rev > e.seq:
		gone = e.gone
	}
	f.mu.Unlock()
	if gone != nil {
		gone(f.s.entryGone(key))
	}
}

func (f *follower) idle() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.entries) == 0
}

// retire removes the follower from the session if it still has no entry;
// expect makes a new one for the next entry.
func (f *follower) retire() bool {
	f.s.followMu.Lock()
	defer f.s.followMu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.entries) > 0 {
		return false
	}
	f.running = false
	f.drop()
	return true
}

// drop removes the follower from its session, the session's followMu and
// f.mu held.
func (f *follower) drop() {
	if f.s.followers[f.prefix] == f {
		delete(f.s.followers, f.prefix)
	}
}
