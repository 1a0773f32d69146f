package zklock

import (
	"context"
	"fmt"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock/zkq"
	"github.com/go-zookeeper/zk"
)

// Inspect returns the queue of the lock called name under the znode prefix
// prefix (DefaultPrefix if empty), without joining it: the holder first,
// then the waiters in the order they will hold (QueueEntry.Holding says
// which hold). It syncs the lock's directory with the leader, lists it,
// and reads every entry (the reads go out together); entries deleted
// between the listing and their read are left out, and children that are
// not lock entries are ignored. An Election's candidates ("@e-…" nodes)
// are listed the same way, as exclusive entries whose Holder is the
// candidate's value; give a lock and an election different names, or
// their entries are listed together.
//
// Each entry's Token is the node's czxid (the fencing token it has or will
// have), Owner its ephemeral owner's session ID in hex, Holder its data,
// and Created its ctime.
func Inspect(ctx context.Context, conn *zk.Conn, prefix, name string) ([]distlock.QueueEntry, error) {
	if conn == nil {
		return nil, fmt.Errorf("zklock: inspect %q: %w: *zk.Conn is nil", name, distlock.ErrNilClient)
	}
	if err := zkq.Backend.ValidateName(name); err != nil {
		return nil, err
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if err := zkq.CheckPrefix(prefix); err != nil {
		return nil, fmt.Errorf("zklock: inspect %q: %w", name, err)
	}
	q, err := zkq.Inspect(ctx, conn, prefix, name)
	if err != nil {
		return nil, fmt.Errorf("zklock: inspect %q: %w", name, err)
	}
	return q, nil
}

// WatchQueue calls f with the queue of the lock called name (as Inspect
// reads it) now and again after every change of its entries, until ctx
// ends (it returns ctx's cause), f returns an error (it returns that) or
// the connection fails. It is driven by a child watch on the lock's
// directory (an exists watch while there is none), set before each read,
// so no change is missed.
func WatchQueue(ctx context.Context, conn *zk.Conn, prefix, name string, f func([]distlock.QueueEntry) error) error {
	if conn == nil {
		return fmt.Errorf("zklock: watch queue %q: %w: *zk.Conn is nil", name, distlock.ErrNilClient)
	}
	if err := zkq.Backend.ValidateName(name); err != nil {
		return err
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if err := zkq.CheckPrefix(prefix); err != nil {
		return fmt.Errorf("zklock: watch queue %q: %w", name, err)
	}
	if err := zkq.WatchQueue(ctx, conn, prefix, name, f); err != nil {
		return fmt.Errorf("zklock: watch queue %q: %w", name, err)
	}
	return nil
}
