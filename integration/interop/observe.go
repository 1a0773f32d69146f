package interop

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Observer watches the entries of one lock's queue, whoever wrote them:
// the children of a znode directory, or the keys under an etcd prefix.
// The suite uses it to see a contender's request arrive and a holder's
// entry go, on watches rather than by polling.
type Observer interface {
	// Entries lists the queue's entries now.
	Entries(ctx context.Context) (map[string]bool, error)
	// WaitNew waits until the queue has an entry that old lacks.
	WaitNew(ctx context.Context, old map[string]bool) error
	// WatchGone returns, once its watch is set, a channel that receives
	// when the first of entries was seen gone.
	WatchGone(ctx context.Context, entries map[string]bool) (<-chan time.Time, error)
}

// ZKObserver observes the children of the znode dir.
func ZKObserver(conn *zk.Conn, dir string) Observer { return &zkObserver{conn: conn, dir: dir} }

type zkObserver struct {
	conn *zk.Conn
	dir  string
}

func (o *zkObserver) children() ([]string, <-chan zk.Event, error) {
	for {
		children, _, ch, err := o.conn.ChildrenW(o.dir)
		if !errors.Is(err, zk.ErrNoNode) {
			return children, ch, err
		}
		ok, _, ch, err := o.conn.ExistsW(o.dir)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			return nil, ch, nil
		}
	}
}

func (o *zkObserver) Entries(ctx context.Context) (map[string]bool, error) {
	children, _, err := o.children()
	if err != nil {
		return nil, fmt.Errorf("interop: children of %s: %w", o.dir, err)
	}
	return set(children), nil
}

func (o *zkObserver) WaitNew(ctx context.Context, old map[string]bool) error {
	for {
		children, ch, err := o.children()
		if err != nil {
			return fmt.Errorf("interop: children of %s: %w", o.dir, err)
		}
		for _, c := range children {
			if !old[c] {
				return nil
			}
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("interop: no new entry in %s: %w", o.dir, ctx.Err())
		}
	}
}

func (o *zkObserver) WatchGone(ctx context.Context, entries map[string]bool) (<-chan time.Time, error) {
	gone := func(children []string) bool {
		now := set(children)
		for e := range entries {
			if !now[e] {
				return true
			}
		}
		return false
	}
	children, ch, err := o.children()
	if err != nil {
		return nil, fmt.Errorf("interop: children of %s: %w", o.dir, err)
	}
	out := make(chan time.Time, 1)
	if gone(children) {
		out <- time.Now()
		return out, nil
	}
	go func() {
		for {
			select {
			case <-ch:
			case <-ctx.Done():
				return
			}
			at := time.Now()
			var children []string
			var err error
			if children, ch, err = o.children(); err != nil {
				return
			}
			if gone(children) {
				out <- at
				return
			}
		}
	}()
	return out, nil
}

// EtcdObserver observes the keys under the etcd prefix pfx.
func EtcdObserver(cli *clientv3.Client, pfx string) Observer {
	return &etcdObserver{cli: cli, pfx: pfx}
}

type etcdObserver struct {
	cli *clientv3.Client
	pfx string
}

func (o *etcdObserver) get(ctx context.Context) (map[string]bool, int64, error) {
	resp, err := o.cli.Get(ctx, o.pfx, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, 0, fmt.Errorf("interop: keys under %s: %w", o.pfx, err)
	}
	keys := map[string]bool{}
	for _, kv := range resp.Kvs {
		keys[string(kv.Key)] = true
	}
	return keys, resp.Header.Revision, nil
}

func (o *etcdObserver) Entries(ctx context.Context) (map[string]bool, error) {
	keys, _, err := o.get(ctx)
	return keys, err
}

func (o *etcdObserver) WaitNew(ctx context.Context, old map[string]bool) error {
	keys, rev, err := o.get(ctx)
	if err != nil {
		return err
	}
	for k := range keys {
		if !old[k] {
			return nil
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for resp := range o.cli.Watch(ctx, o.pfx, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
		if err := resp.Err(); err != nil {
			return fmt.Errorf("interop: watch %s: %w", o.pfx, err)
		}
		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypePut && !old[string(ev.Kv.Key)] {
				return nil
			}
		}
	}
	return fmt.Errorf("interop: no new key under %s: %w", o.pfx, ctx.Err())
}

func (o *etcdObserver) WatchGone(ctx context.Context, entries map[string]bool) (<-chan time.Time, error) {
	keys, rev, err := o.get(ctx)
	if err != nil {
		return nil, err
	}
	out := make(chan time.Time, 1)
	for e := range entries {
		if !keys[e] {
			out <- time.Now()
			return out, nil
		}
	}
	wch := o.cli.Watch(ctx, o.pfx, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	go func() {
		for resp := range wch {
			at := time.Now()
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypeDelete && entries[string(ev.Kv.Key)] {
					out <- at
					return
				}
			}
		}
	}()
	return out, nil
}

func set(names []string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// Diff returns the entries of now that before lacks: a holder's own.
func Diff(now, before map[string]bool) map[string]bool {
	out := map[string]bool{}
	for k := range now {
		if !before[k] {
			out[k] = true
		}
	}
	return out
}
