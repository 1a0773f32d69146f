package etcdfence

import (
	"context"
	"errors"
	"fmt"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// maxAttempts bounds WriteAll's commits: each one that fails its guard
// lost to another writer of one of the keys, which made progress.
const maxAttempts = 64

// WriteAll admits one token per fence and applies ops in one etcd Txn: the
// write of a holder of several locks at once (one acquisition of several
// names carries one token per name, all with one Seq and Owner). Each
// fence takes the token of tokens whose Name is its lock, and admits it by
// Write's rule (no token stored, an older one, or exactly this one);
// the fences' new tokens and ops are committed only if every fence admits,
// and then the response has one entry in Responses per op, in order (the
// fences' own puts are left out). Otherwise nothing is written, and the
// error is the refusing fence's *fencing.StaleError or *fencing.ForkError,
// naming its key and the newer token read (a *fencing.RefusalsError of
// each, on one line, when several refuse; errors.Is and errors.As find
// each). Tokens and fences that do not pair up one to one by lock name are refused with
// fencing.ErrUnmatched, an invalid token as Write refuses it, before etcd
// is asked.
//
// The fences must share one *clientv3.Client, which the Txn goes through,
// and have distinct keys; the ops must not write or delete any fence's
// key, and the fences' puts and the ops together must stay within the
// server's limit on operations per Txn (--max-txn-ops, default 128).
//
// The check cannot be If/Else chains as in Write, which grow with every
// fence, so WriteAll commits optimistically: one Txn puts the new tokens
// and ops if every fence key still has the mod revision it was decided on
// (at first: none, as if no token were stored anywhere), and otherwise
// reads all the keys back in the same Txn. The decision is then made again
// on that read, taken at one revision, and committed under the new
// revisions; a fresh set of fences costs one round trip, a used one two,
// and a writer that loses a race to another writer of the keys reads and
// decides again (up to 64 times). The commit and the decision it rests
// on see the same keys at the same revisions, so the check and the ops
// are one linearizable step, as with Write.
func WriteAll(ctx context.Context, tokens []distlock.Token, fences []*Fence, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	paired, err := checkAll(ctx, tokens, fences, ops)
	if err != nil {
		return nil, err
	}
	resp, errs, err := writeAll(ctx, paired, fences, ops)
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
	return resp, err
}

// checkAll pairs the fences with their tokens and checks what WriteAll
// can check before asking etcd.
func checkAll(ctx context.Context, tokens []distlock.Token, fences []*Fence, ops []clientv3.Op) ([]distlock.Token, error) {
	locks := make([]string, len(fences))
	keys := make(map[string]int, len(fences))
	for i, f := range fences {
		if f == nil {
			return nil, fmt.Errorf("etcdfence: write all: %w: fence %d is nil", fencing.ErrInvalidArgument, i)
		}
		if f.client != fences[0].client {
			return nil, fmt.Errorf("etcdfence: write all: %w: %s and %s use different clients; the Txn goes through one, so the fences must share it", fencing.ErrInvalidArgument, fences[0].resource(), f.resource())
		}
		if j, dup := keys[f.key]; dup {
			return nil, fmt.Errorf("etcdfence: write all: %w: fences %d and %d both have key %q", fencing.ErrInvalidArgument, j, i, f.key)
		}
		keys[f.key], locks[i] = i, f.lock
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
		if op.IsPut() || op.IsDelete() {
			if j, ok := keys[string(op.KeyBytes())]; ok {
				return nil, fmt.Errorf("etcdfence: write all: %w: op %d writes the key of %s", fencing.ErrInvalidArgument, i, fences[j].resource())
			}
		}
	}
	return paired, nil
}

// writeAll is WriteAll's decisions and Txns. On refusal it returns each
// fence's decision in errs (nil for those that would admit).
func writeAll(ctx context.Context, paired []distlock.Token, fences []*Fence, ops []clientv3.Op) (*clientv3.TxnResponse, []error, error) {
	n := len(fences)
	commit := make([]clientv3.Op, 0, n+len(ops))
	reads := make([]clientv3.Op, n)
	for i, f := range fences {
		commit = append(commit, clientv3.OpPut(f.key, encode(paired[i])))
		reads[i] = clientv3.OpGet(f.key)
	}
	commit = append(commit, ops...)
	stored := make([]distlock.Token, n) // zero: none
	revs := make([]int64, n)            // 0: the key does not exist
	for attempt := 1; ; attempt++ {
		errs := make([]error, n)
		for i, f := range fences {
			errs[i] = fencing.Compare(f.resource(), paired[i], stored[i])
		}
		if err := fencing.Refusals(errs); err != nil {
			return nil, errs, err
		}
		guard := make([]clientv3.Cmp, n)
		for i, f := range fences {
			// A missing key's mod revision compares as 0.
			guard[i] = clientv3.Compare(clientv3.ModRevision(f.key), "=", revs[i])
		}
		resp, err := fences[0].client.Txn(ctx).If(guard...).Then(commit...).Else(reads...).Commit()
		if errors.Is(err, rpctypes.ErrTooManyOps) {
			return nil, nil, fmt.Errorf("etcdfence: write all %v: %d fences' puts and %d ops: %w (the server's --max-txn-ops, default 128)", paired, n, len(ops), err)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("etcdfence: write all %v: %w", paired, err)
		}
		if resp.Succeeded {
			return &clientv3.TxnResponse{Header: resp.Header, Succeeded: true, Responses: resp.Responses[n:]}, nil, nil
		}
		if attempt == maxAttempts {
			return nil, nil, fmt.Errorf("etcdfence: write all %v: the fence keys changed between every read and commit, %d times; given up", paired, attempt)
		}
		// Lost to another writer (or first sight of the keys): decide
		// again on what the failed Txn read, at its revision.
		for i, f := range fences {
			kvs := resp.Responses[i].GetResponseRange().Kvs
			if len(kvs) == 0 {
				stored[i], revs[i] = distlock.Token{}, 0
				continue
			}
			t, err := f.decode(kvs)
			if err != nil {
				return nil, nil, err
			}
			stored[i], revs[i] = t, kvs[0].ModRevision
		}
	}
}
