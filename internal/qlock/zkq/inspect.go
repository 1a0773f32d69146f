package zkq

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
	"github.com/go-zookeeper/zk"
	"golang.org/x/sync/errgroup"
)

// ReadQueue reads the queue of lock name (qlock.ClientStore): it syncs the lock's directory with the leader, lists it, and reads every
// entry (the reads go out together); entries deleted between the listing
// and their read are left out. Foreign entries are read like distlock's
// (with their Client), and the children no recipe the library knows made
// are listed last (ClientUnknown; see foreign.go); sub-locks' directories
// are no entries.
func (s ClientStore) ReadQueue(ctx context.Context, name string) ([]distlock.QueueEntry, error) {
	conn, dir := s.Conn, s.Prefix+"/"+name
	fail := func(op string, err error) error { return fmt.Errorf("%s %s: %w", op, dir, err) }
	children, err := syncedChildren(ctx, conn, dir)
	if err != nil {
		return nil, fail("list", err)
	}
	// An Election's candidates are listed too, Holder being the value;
	// which one leads, the Admin marks from the term record. Foreign
	// entries are among both (see lockAndElection), and the children of
	// unknown clients follow, in the order of their names.
	nodes := qlock.Ahead(qlock.Entry{Seq: math.MaxInt64}, lockAndElection(entries(dir, qlock.Exclusive, children), entries(dir, qlock.Candidate, children)))
	var unknown []qlock.Entry
	for _, c := range children {
		if unknownChild(c) {
			unknown = append(unknown, qlock.Entry{Key: dir + "/" + c, Client: distlock.ClientUnknown})
		}
	}
	slices.SortFunc(unknown, func(a, b qlock.Entry) int { return strings.Compare(a.Key, b.Key) })
	nodes = append(nodes, unknown...)
	// A semaphore's permits (the children of @permits, as holders, in
	// slot order) and its line, oldest first.
	line := qlock.Ahead(qlock.Entry{Seq: math.MaxInt64}, entries(dir, qlock.Counted, children))
	var slots []string
	if slices.Contains(children, permitsChild) {
		if slots, err = listChildren(ctx, conn, dir+"/"+permitsChild); err != nil {
			return nil, fail("list", err)
		}
		slices.SortFunc(slots, func(a, b string) int {
			i, _, _ := parseSlotName(a)
			j, _, _ := parseSlotName(b)
			return i - j
		})
	}
	sem := make([]qlock.Entry, 0, len(slots)+len(line))
	for _, c := range slots {
		if _, _, ok := parseSlotName(c); ok {
			sem = append(sem, qlock.Entry{Key: dir + "/" + permitsChild + "/" + c, Kind: qlock.Counted, Seq: -1})
		}
	}
	nodes = append(append(sem, line...), nodes...)
	type read struct {
		data []byte
		stat *zk.Stat
	}
	reads := make([]read, len(nodes))
	first := make(map[string]int, len(nodes)) // a foreign entry may be listed in both queues
	var g errgroup.Group
	for i, n := range nodes {
		if _, dup := first[n.Key]; dup {
			continue
		}
		first[n.Key] = i
		g.Go(func() error {
			r, err := retry(ctx, func() (read, error) {
				data, st, err := conn.Get(n.Key)
				if errors.Is(err, zk.ErrNoAuth) && n.Client != "" {
					// A foreign client's ACL: its Stat alone (an
					// Exists, which no ACL refuses), no Holder.
					var ok bool
					if ok, st, err = conn.Exists(n.Key); err == nil && !ok {
						err = zk.ErrNoNode
					}
				}
				return read{data, st}, err
			})
			if errors.Is(err, zk.ErrNoNode) {
				return nil // gone since the listing
			}
			reads[i] = r
			if err != nil {
				return fail("read", fmt.Errorf("%s: %w", n.Key, err))
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var (
		kinds                []qlock.Kind
		semOut, out, unknOut []distlock.QueueEntry
	)
	for _, n := range nodes {
		r := reads[first[n.Key]]
		if r.stat == nil {
			continue
		}
		e := distlock.QueueEntry{
			Key:     n.Key,
			Kind:    n.Kind.View(),
			Token:   distlock.Token{Name: name, Seq: r.stat.Czxid, Owner: uint64(r.stat.EphemeralOwner)},
			Owner:   strconv.FormatInt(r.stat.EphemeralOwner, 16),
			Holder:  string(r.data),
			Created: time.UnixMilli(r.stat.Ctime),
			Client:  n.Client,
		}
		if n.Client != "" && !utf8.Valid(r.data) {
			e.Holder = "" // a foreign client's data need not be text
		}
		switch {
		case n.Client == distlock.ClientUnknown:
			unknOut = append(unknOut, e)
		case n.Seq < 0: // a permit
			i, m, _ := parseSlotName(path.Base(n.Key))
			e.Holding, e.Slot, e.Permits = true, i, m
			e.Token.Name = distlock.SlotName(name, i)
			semOut = append(semOut, e)
		case n.Kind == qlock.Counted:
			semOut = append(semOut, e)
		default:
			if n.Kind == qlock.Candidate {
				_, e.Priority, _, _ = parseElectionEntry(path.Base(n.Key))
			}
			kinds, out = append(kinds, n.Kind), append(out, e)
		}
	}
	for i, h := range qlock.Holding(kinds) {
		out[i].Holding = h
	}
	return append(append(semOut, out...), unknOut...), nil
}

// lockAndElection returns the lock entries and the candidates of one
// directory, as an inspection lists them. A foreign entry that is both
// (Curator's InterProcessMutex and LeaderSelector, kazoo's Lock and
// Election, zk.Lock make the same names) is in both queues for the
// engine; the inspection shows it as a candidate only where the
// directory holds an election (a candidate that is no lock entry), and
// as a lock entry unless the directory holds an election and no entry
// that is a lock's alone.
func lockAndElection(locks, cands []qlock.Entry) []qlock.Entry {
	inLock := make(map[string]bool, len(locks))
	for _, e := range locks {
		inLock[e.Key] = true
	}
	both := map[string]bool{}
	election := false
	for _, e := range cands {
		if inLock[e.Key] {
			both[e.Key] = true
		} else {
			election = true
		}
	}
	if len(both) == 0 {
		return append(locks, cands...)
	}
	lock := false
	for _, e := range locks {
		lock = lock || !both[e.Key]
	}
	out := make([]qlock.Entry, 0, len(locks)+len(cands))
	if lock || !election {
		out = append(out, locks...)
	} else {
		out = append(out, slices.DeleteFunc(locks, func(e qlock.Entry) bool { return both[e.Key] })...)
	}
	if election {
		out = append(out, cands...)
	} else {
		out = append(out, slices.DeleteFunc(cands, func(e qlock.Entry) bool { return both[e.Key] })...)
	}
	return out
}

// FindMulti leaves q as it is (qlock.AdminStore): the entries of one
// multi-lock acquisition share a czxid, a session and the GUID in their
// names, but ZooKeeper finds a znode by none of them without listing
// every lock's directory, which an inspection of one lock does not do.
func (AdminStore) FindMulti(context.Context, string, []distlock.QueueEntry) error { return nil }

// ReadDelays returns the lock-delay records (qlock.DelayRecord, as
// stored) that lock name's waiters keep under prefix: the ephemeral
// "@..." children of DelayDir (its other children are longer lock names'
// directories). Records deleted while they are read are left out.
func ReadDelays(ctx context.Context, conn *zk.Conn, prefix, name string) ([][]byte, error) {
	dir := DelayDir(prefix, name)
	kids, err := listChildren(ctx, conn, dir) // none for no directory
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for _, k := range kids {
		if !strings.HasPrefix(k, "@") {
			continue
		}
		d, err := retry(ctx, func() ([]byte, error) {
			d, _, err := conn.Get(dir + "/" + k)
			return d, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue // its delay ended meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// WatchQueue calls f with lock name's queue (as ReadQueue reads it) now and
// after every change of its entries, until ctx ends, f fails or the
// connection does. A child watch on the lock's directory (an exists watch
// while there is none), and on a semaphore's @permits where there is one,
// is set before each read, so no change is missed (@permits's own
// creation is a change of the directory).
func (s AdminStore) WatchQueue(ctx context.Context, name string, f func([]distlock.QueueEntry) error) error {
	conn, dir := s.Conn, s.Prefix+"/"+name
	for {
		ch, err := retry(ctx, func() (<-chan zk.Event, error) {
			_, _, ch, err := conn.ChildrenW(dir)
			if errors.Is(err, zk.ErrNoNode) {
				_, _, ch, err = conn.ExistsW(dir)
			}
			return ch, err
		})
		if err != nil {
			return fmt.Errorf("watch %s: %w", dir, err)
		}
		// A semaphore's slots change below the directory, in @permits.
		pch, err := retry(ctx, func() (<-chan zk.Event, error) {
			_, _, ch, err := conn.ChildrenW(dir + "/" + permitsChild)
			if errors.Is(err, zk.ErrNoNode) {
				return nil, nil
			}
			return ch, err
		})
		if err != nil {
			return fmt.Errorf("watch %s/%s: %w", dir, permitsChild, err)
		}
		// An election's term record is the directory's data: a claim
		// changes only that.
		dch, err := retry(ctx, func() (<-chan zk.Event, error) {
			_, _, ch, err := conn.GetW(dir)
			if errors.Is(err, zk.ErrNoNode) {
				return nil, nil
			}
			return ch, err
		})
		if err != nil {
			return fmt.Errorf("watch %s: %w", dir, err)
		}
		q, err := s.ReadQueue(ctx, name)
		if err != nil {
			return err
		}
		if err := f(q); err != nil {
			return err
		}
		select {
		case ev := <-dch:
			if ev.Type == zk.EventNotWatching {
				return fmt.Errorf("watch %s: %w", dir, ev.Err)
			}
		case ev := <-ch:
			if ev.Type == zk.EventNotWatching {
				return fmt.Errorf("watch %s: %w", dir, ev.Err)
			}
		case ev := <-pch:
			if ev.Type == zk.EventNotWatching {
				return fmt.Errorf("watch %s/%s: %w", dir, permitsChild, ev.Err)
			}
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}
