package backend

import (
	"context"
	"slices"
	"time"

	"github.com/distlock/distlock/internal/qlock"
	"github.com/distlock/distlock/internal/qlock/etcdq"
	"github.com/distlock/distlock/internal/qlock/zkq"
)

// LockDelays returns the lock-delays that lock name's waiters serve at
// now (etcdlock/zklock WithLockDelay), soonest over first: the records
// each waiter keeps in its own session, whose delay has not ended by now
// (a record's delete can come a moment after its delay, or not at all
// until its session ends). Records that do not parse, or are another
// lock's, are left out.
func (c *Client) LockDelays(ctx context.Context, name string, now time.Time) ([]qlock.DelayRecord, error) {
	var (
		data [][]byte
		err  error
	)
	switch {
	case c.etcd != nil:
		data, err = etcdq.ReadDelays(ctx, c.etcd, c.prefix, name)
	case c.zk != nil:
		data, err = zkq.ReadDelays(ctx, c.zk, c.prefix, name)
	}
	if err != nil {
		return nil, err
	}
	var out []qlock.DelayRecord
	for _, d := range data {
		r, err := qlock.ParseDelayRecord(d)
		if err == nil && r.Lock == name && now.Before(r.Until) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b qlock.DelayRecord) int { return a.Until.Compare(b.Until) })
	return out, nil
}

// CandidateEntry reports whether key (a revocation record's, say) is an
// entry of a candidate of election name on the client's prefix, as the
// store's own key or znode name says: a record outlives its entry, so
// the queue may no longer show it.
func (c *Client) CandidateEntry(name, key string) bool {
	if c.etcd != nil {
		return etcdq.CandidateKey(c.prefix, name, key)
	}
	return zkq.CandidateNode(c.prefix, name, key)
}
