package zkfence

import (
	"context"
	"errors"
	"fmt"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
	"github.com/go-zookeeper/zk"
)

// maxAttempts bounds WriteAll's multis: each one that fails a version
// check (or a creation) lost to another writer of one of the fence nodes,
// which made progress.
const maxAttempts = 64

// WriteAll admits one token per fence and applies ops in one ZooKeeper
// multi: the write of a holder of several locks at once (one acquisition
// of several names carries one token per name, all with one Seq and
// Owner). Each fence takes the token of tokens whose Name is its lock and
// decides by Write's rule on its node as read; if every fence admits, one
// multi sets every fence node's data under the version read (or creates
// the node, where none exists), followed by ops, and the result has one
// zk.MultiResponse per op, in order (the fences' own sets and creates are
// left out). Otherwise nothing is written, and the error is the refusing
// fence's *fencing.StaleError or *fencing.ForkError, naming its path and
// the newer token (a *fencing.RefusalsError of each when several refuse,
// on one line; errors.Is and errors.As find each). Tokens and fences that do not pair up one to one
// by lock name are refused with fencing.ErrUnmatched, an invalid token as
// Write refuses it, before ZooKeeper is asked.
//
// The fences must share one *zk.Conn, which the multi goes through, and
// have distinct paths; ops are as Write's, and none may be on a fence's
// path. If one of the ops fails, nothing is applied, no token is recorded,
// and the error wraps the op's ZooKeeper error.
//
// As with Write, a concurrent writer of any of the fence nodes makes the
// multi fail its version check (or its creation): WriteAll then syncs,
// reads every node again and decides again, until it commits, is refused,
// ctx ends, or 64 multis in a row have lost such a race. Only a multi that
// the leader applies with every version unchanged lets the write through,
// so the decision holds as if the reads were linearizable.
func WriteAll(ctx context.Context, tokens []distlock.Token, fences []*Fence, ops ...any) ([]zk.MultiResponse, error) {
	paired, err := checkAll(ctx, tokens, fences, ops)
	if err != nil {
		return nil, err
	}
	rs, errs, err := writeAll(ctx, paired, fences, ops)
	switch {
	case err == nil:
		for i, f := range fences {
			f.obs.Record(ctx, paired[i], nil)
		}
	case errs != nil:
		for i, f := range fences {
			if errs[i] != nil {
				f.obs.Record(ctx, paired[i], errs[i])
			}
		}
	}
	return rs, err
}

// checkAll pairs the fences with their tokens and checks what WriteAll
// can check before asking ZooKeeper.
func checkAll(ctx context.Context, tokens []distlock.Token, fences []*Fence, ops []any) ([]distlock.Token, error) {
	locks := make([]string, len(fences))
	paths := make(map[string]int, len(fences))
	for i, f := range fences {
		if f == nil {
			return nil, fmt.Errorf("zkfence: write all: %w: fence %d is nil", fencing.ErrInvalidArgument, i)
		}
		if f.conn != fences[0].conn {
			return nil, fmt.Errorf("zkfence: write all: %w: %s and %s use different connections; the multi goes through one, so the fences must share it", fencing.ErrInvalidArgument, fences[0].resource(), f.resource())
		}
		if j, dup := paths[f.path]; dup {
			return nil, fmt.Errorf("zkfence: write all: %w: fences %d and %d both have path %q", fencing.ErrInvalidArgument, j, i, f.path)
		}
		paths[f.path], locks[i] = i, f.lock
	}
	paired, err := fencing.Match(locks, tokens)
	if err != nil {
		return nil, err
	}
	for i, f := range fences {
		if err := fencing.Check(f.resource(), f.lock, paired[i]); err != nil {
			f.obs.Record(ctx, paired[i], err)
			return nil, err
		}
	}
	for i, op := range ops {
		p, err := opPath(op)
		if err != nil {
			return nil, fmt.Errorf("zkfence: write all: op %d %w", i, err)
		}
		if j, ok := paths[p]; ok {
			return nil, fmt.Errorf("zkfence: write all: %w: op %d (%T) is on the node of %s", fencing.ErrInvalidArgument, i, op, fences[j].resource())
		}
	}
	return paired, nil
}

// writeAll is WriteAll's reads, decisions and multis. On refusal it
// returns each fence's decision in errs (nil for those that would admit).
func writeAll(ctx context.Context, paired []distlock.Token, fences []*Fence, ops []any) ([]zk.MultiResponse, []error, error) {
	n := len(fences)
	conn := fences[0].conn
	storeErr := func(op string, err error) error {
		return fmt.Errorf("zkfence: write all %v: %s: %w", paired, op, err)
	}
	for conflicts := 0; ; conflicts++ {
		if conflicts == maxAttempts {
			return nil, nil, fmt.Errorf("zkfence: write all %v: the fence nodes changed between every read and multi, %d times; given up", paired, conflicts)
		}
		if conflicts > 0 {
			// Make the server catch up with the leader before reading
			// again (a sync covers the whole server, whatever its path).
			if _, err := call(ctx, func() (string, error) { return conn.Sync(fences[0].path) }); err != nil && !errors.Is(err, zk.ErrNoNode) {
				return nil, nil, storeErr("sync", err)
			}
		}
		multi := make([]any, 0, n+len(ops))
		errs := make([]error, n)
		stats := make([]*zk.Stat, n)
		for i, f := range fences {
			newest, stat, err := f.read(ctx)
			if err != nil {
				return nil, nil, f.storeErr(paired[i], "read", err)
			}
			errs[i], stats[i] = fencing.Compare(f.resource(), paired[i], newest), stat
			data := encode(paired[i])
			if stat == nil {
				multi = append(multi, &zk.CreateRequest{Path: f.path, Data: data, Acl: f.acl})
			} else {
				multi = append(multi, &zk.SetDataRequest{Path: f.path, Data: data, Version: stat.Version})
			}
		}
		if err := fencing.Refusals(errs); err != nil {
			return nil, errs, err
		}
		multi = append(multi, ops...)
		rs, err := call(ctx, func() ([]zk.MultiResponse, error) { return conn.Multi(multi...) })
		i, cause := multiErr(rs, err)
		switch {
		case cause == nil:
			return rs[n:], nil, nil
		case i >= 0 && i < n && (errors.Is(cause, zk.ErrBadVersion) || errors.Is(cause, zk.ErrNodeExists)):
			continue // another writer got there first
		case i >= 0 && i < n && errors.Is(cause, zk.ErrNoNode) && stats[i] != nil:
			continue // the node was deleted since we read it
		case i >= 0 && i < n && errors.Is(cause, zk.ErrNoNode):
			if err := fences[i].createParents(ctx); err != nil {
				return nil, nil, fences[i].storeErr(paired[i], "create parents", err)
			}
			continue
		case i >= n:
			return nil, nil, fmt.Errorf("zkfence: write all %v: op %d (%T): %w", paired, i-n, ops[i-n], cause)
		}
		return nil, nil, storeErr("multi", cause)
	}
}
