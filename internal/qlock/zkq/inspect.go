package zkq

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
	"github.com/go-zookeeper/zk"
)

// Inspect reads the queue of lock name under znode prefix prefix: it
// syncs the lock's directory with the leader, lists it, and reads every
// entry (the reads go out together); entries deleted between the listing
// and their read are left out, and children that are not entries are
// ignored.
func Inspect(ctx context.Context, conn *zk.Conn, prefix, name string) ([]distlock.QueueEntry, error) {
	dir := prefix + "/" + name
	fail := func(op string, err error) error { return fmt.Errorf("%s %s: %w", op, dir, err) }
	if _, err := retry(ctx, func() (string, error) { return conn.Sync(dir) }); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return nil, fail("sync", err)
	}
	children, err := retry(ctx, func() ([]string, error) {
		c, _, err := conn.Children(dir)
		return c, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, fail("list", err)
	}
	type node struct {
		path string
		kind qlock.Kind
		seq  int64
	}
	var nodes []node
	for _, c := range children {
		// An Election's candidates are listed too, as exclusive entries:
		// the first one leads, Holder is its value.
		if k, _, seq, ok := parseAny(c); ok {
			nodes = append(nodes, node{dir + "/" + c, k, seq})
		}
	}
	slices.SortFunc(nodes, func(a, b node) int { return cmp.Compare(a.seq, b.seq) })

	type read struct {
		data []byte
		stat *zk.Stat
		err  error
	}
	reads := make([]chan read, len(nodes))
	for i, n := range nodes {
		reads[i] = make(chan read, 1)
		go func() {
			r, err := retry(ctx, func() (read, error) {
				data, st, err := conn.Get(n.path)
				return read{data: data, stat: st}, err
			})
			r.err = err
			reads[i] <- r
		}()
	}
	out := make([]distlock.QueueEntry, 0, len(nodes))
	var kinds []qlock.Kind
	var firstErr error
	for i, n := range nodes {
		r := <-reads[i]
		switch {
		case errors.Is(r.err, zk.ErrNoNode):
			continue // gone since the listing
		case r.err != nil:
			if firstErr == nil {
				firstErr = fail("read", fmt.Errorf("%s: %w", n.path, r.err))
			}
			continue
		}
		kinds = append(kinds, n.kind)
		out = append(out, distlock.QueueEntry{
			Key:     n.path,
			Kind:    n.kind.View(),
			Token:   distlock.Token{Name: name, Seq: r.stat.Czxid, Owner: uint64(r.stat.EphemeralOwner)},
			Owner:   strconv.FormatInt(r.stat.EphemeralOwner, 16),
			Holder:  string(r.data),
			Created: time.UnixMilli(r.stat.Ctime),
		})
	}
	if firstErr != nil {
		return nil, firstErr
	}
	for i, h := range qlock.Holding(kinds) {
		out[i].Holding = h
	}
	return out, nil
}
