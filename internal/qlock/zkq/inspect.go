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

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
	"github.com/go-zookeeper/zk"
	"golang.org/x/sync/errgroup"
)

// ReadQueue reads the queue of lock name (qlock.ClientStore): it syncs the lock's directory with the leader, lists it, and reads every
// entry (the reads go out together); entries deleted between the listing
// and their read are left out, and children that are not entries are
// ignored.
func (s ClientStore) ReadQueue(ctx context.Context, name string) ([]distlock.QueueEntry, error) {
	conn, dir := s.Conn, s.Prefix+"/"+name
	fail := func(op string, err error) error { return fmt.Errorf("%s %s: %w", op, dir, err) }
	children, err := syncedChildren(ctx, conn, dir)
	if err != nil {
		return nil, fail("list", err)
	}
	// An Election's candidates are listed too, Holder being the value;
	// which one leads, the Admin marks from the term record.
	nodes := qlock.Ahead(qlock.Entry{Seq: math.MaxInt64}, append(entries(dir, qlock.Exclusive, children), entries(dir, qlock.Candidate, children)...))
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
	var g errgroup.Group
	for i, n := range nodes {
		g.Go(func() error {
			r, err := retry(ctx, func() (read, error) {
				data, st, err := conn.Get(n.Key)
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
		kinds       []qlock.Kind
		semOut, out []distlock.QueueEntry
	)
	for i, n := range nodes {
		r := reads[i]
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
		}
		switch {
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
	return append(semOut, out...), nil
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
