package zklock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/distlock/distlock"
	"github.com/go-zookeeper/zk"
)

// Inspect returns the queue of the lock called name under the znode prefix
// prefix (DefaultPrefix if empty), without joining it: the holder first,
// then the waiters in the order they will hold (for exclusive entries, the
// first entry holds; see distlock.Holding for shared ones). It syncs the
// lock's directory with the leader, lists it, and reads every entry (the
// reads go out together); entries deleted between the listing and their
// read are left out, and children that are not lock entries are ignored.
// An empty result means nobody holds or waits. An Election's candidates
// ("@e-…" nodes) are listed the same way, as exclusive entries whose
// Holder is the candidate's value; give a lock and an election different
// names, or their entries are listed together.
//
// Each entry's Token is the node's czxid (the fencing token it has or will
// have), Owner its ephemeral owner's session ID in hex, Holder its data,
// and Created its ctime.
func Inspect(ctx context.Context, conn *zk.Conn, prefix, name string) ([]distlock.QueueEntry, error) {
	if conn == nil {
		return nil, fmt.Errorf("zklock: inspect %q: %w: *zk.Conn is nil", name, distlock.ErrNilClient)
	}
	if err := distlock.ValidateName(name); err != nil {
		return nil, fmt.Errorf("zklock: inspect: %w", err)
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if err := checkPrefix(prefix); err != nil {
		return nil, fmt.Errorf("zklock: inspect %q: %w", name, err)
	}
	dir := prefix + "/" + name
	fail := func(op string, err error) error {
		return fmt.Errorf("zklock: inspect %q: %s %s: %w", name, op, dir, err)
	}
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
		kind distlock.Kind
		seq  int64
	}
	var nodes []node
	for _, c := range children {
		if k, _, seq, ok := parseEntry(c); ok {
			nodes = append(nodes, node{dir + "/" + c, k, seq})
		} else if _, seq, ok := parseElectionEntry(c); ok {
			// An Election's candidates, listed as exclusive entries: the
			// first one leads, Holder is its value.
			nodes = append(nodes, node{dir + "/" + c, distlock.Exclusive, seq})
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
		out = append(out, distlock.QueueEntry{
			Key:     n.path,
			Kind:    n.kind,
			Token:   distlock.Token{Name: name, Seq: r.stat.Czxid, Owner: uint64(r.stat.EphemeralOwner)},
			Owner:   strconv.FormatInt(r.stat.EphemeralOwner, 16),
			Holder:  string(r.data),
			Created: time.UnixMilli(r.stat.Ctime),
		})
	}
	if firstErr != nil {
		return nil, firstErr
	}
	return out, nil
}
