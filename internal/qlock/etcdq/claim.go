package etcdq

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/ctxwait"
	"github.com/distlock/distlock/internal/qlock"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"
)

// A semaphore's slots on etcd (see qlock's semaphore.go): slot i of
// semaphore dir is the key slotKey(dir, i), bound to its holder's lease,
// its value the permit count and the holder: "N holder". A claim is one
// Txn: put the slot key if it does not exist — and, for the line's head,
// if its line entry is still there, which the same Txn deletes; for a
// direct claim, if the line is empty — guarded like an enqueue (guard.go).
// Its Then branch reads the slots, to check everyone's N; its Else branch
// reads what made it fail: the slots, the line's oldest entry, the guard.

// claim is one permit acquisition's claims on etcd (qlock.Claimer): the
// session's book of the semaphore's slots, and the line head's state
// between its claims.
type claim struct {
	s    *Session
	book *qlock.SlotBook
	r    qlock.Request
	// read says a head's Claim read the slots, at revision rev, which
	// WaitSlot watches after; free is a slot to try first (-1: none
	// known, read first), which WaitSlot sets to the one it saw go.
	read bool
	rev  int64
	free int
}

// Claimer returns the claims of one permit acquisition (qlock.Slots).
func (s *Session) Claimer(book *qlock.SlotBook, r qlock.Request) qlock.Claimer {
	return &claim{s: s, book: book, r: r, free: -1}
}

// readAt records a head's read of the slots at rev, with free to try
// next.
func (c *claim) readAt(rev int64, free int) { c.read, c.rev, c.free = true, rev, free }

// slotValue is a slot key's value.
func slotValue(n int, holder string) string { return strconv.Itoa(n) + " " + holder }

// parseSlotValue splits a slot key's value into the permit count and the
// holder; n is 0 for a value distlock did not write.
func parseSlotValue(v []byte) (n int, holder string) {
	ns, h, _ := strings.Cut(string(v), " ")
	n, err := strconv.Atoi(ns)
	if err != nil || n < 1 {
		return 0, string(v)
	}
	return n, h
}

// Claim takes a free slot of the semaphore (qlock.Claimer).
func (c *claim) Claim(ctx context.Context, line *qlock.Node) (*qlock.Node, error) {
	s, r, name := c.s, c.r, c.book.Name()
	dir := s.Dir(name)
	sp := slotPrefix(dir)
	lkey, lend := conflictRange(dir, qlock.Counted)
	readSlots := clientv3.OpGet(sp, clientv3.WithPrefix())
	cond := clientv3.Compare(clientv3.CreateRevision(lkey), "=", 0).WithRange(lend) // nobody in line
	if line != nil {
		cond = clientv3.Compare(clientv3.CreateRevision(line.Key), "=", line.Seq) // the head still is
	}
	// Which slot to try. A direct claim tries one at random, blind: one
	// Txn when it is free, and claimers arriving together rarely aim at
	// the same one. The head tries the slot WaitSlot saw go; a new head
	// reads the slots first, so that finding all of them held costs a
	// read, not a failed Txn (which is a raft write all the same).
	i := -1
	if line == nil {
		i = rand.IntN(r.Limit)
	} else if c.read {
		i = c.free
	}
	if i < 0 {
		resp, err := s.client.Get(ctx, sp, clientv3.WithPrefix())
		if err != nil {
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			return nil, s.storeErr(err)
		}
		if err := checkPermits(dir, name, r.Limit, resp.Kvs); err != nil {
			return nil, err
		}
		free, held := pickFree(dir, r.Limit, resp.Kvs, c.book.Reserved)
		if free < 0 {
			c.readAt(resp.Header.Revision, -1)
			return nil, fmt.Errorf("%w (all %d permits held%s)", distlock.ErrLocked, r.Limit, held)
		}
		i = free
	}
	value := slotValue(r.Limit, string(r.Value))
	for {
		if i = c.unreserved(dir, i); i < 0 {
			// Every slot this claim could try is being claimed or held by
			// another acquisition of this session: as if all were held (a
			// head reads the slots, for the revision WaitSlot watches from).
			if line != nil {
				resp, err := s.client.Get(ctx, sp, clientv3.WithPrefix(), clientv3.WithKeysOnly())
				if err != nil {
					return nil, s.storeErr(err)
				}
				c.readAt(resp.Header.Revision, -1)
			}
			return nil, fmt.Errorf("%w (all %d permits held)", distlock.ErrLocked, r.Limit)
		}
		key := slotKey(dir, i)
		if !c.book.Reserve(key) {
			continue
		}
		then := []clientv3.Op{clientv3.OpPut(key, value, clientv3.WithLease(s.id)), readSlots}
		els := []clientv3.Op{readSlots, s.guardGet(),
			clientv3.OpGet(lkey, append(clientv3.WithFirstCreate(), clientv3.WithRange(lend))...)}
		if line != nil {
			then = append(then, clientv3.OpDelete(line.Key))
			els[2] = clientv3.OpGet(line.Key, clientv3.WithKeysOnly())
		}
		forget := s.expect(key)
		floor := s.maxRev.Load()
		guard := s.guardRev()
		// Each attempt has its own bound, as an enqueue's: one that landed
		// on a frozen member must not hang the Acquire.
		actx, acancel := context.WithTimeout(ctx, s.enqueueAttempt())
		resp, err := s.client.Txn(actx).
			If(cond, clientv3.Compare(clientv3.CreateRevision(key), "=", 0), s.guardIs(guard)).
			Then(then...).Else(els...).Commit()
		acancel()
		drop := func() { forget(); c.book.Free(key) }
		var (
			rev   int64              // the slot's, when claimed
			taken []*mvccpb.KeyValue // the slots as the claim read them
		)
		if err != nil {
			// The put may or may not have been applied, or be still on
			// its way. settle tells which, and makes sure it cannot apply
			// later; only then is it safe to go again.
			// settle is safe to repeat (it adopts the slot or moves the
			// guard again): a store still out of reach costs retries
			// within ctx, not the claim (a TryAcquire's among them).
			srev, adopted, serr := s.settle(ctx, key)
			for serr != nil && retryable(serr) && ctx.Err() == nil && ctxwait.Sleep(ctx, qlock.RetryDelay) == nil {
				srev, adopted, serr = s.settle(ctx, key)
			}
			switch {
			case serr == nil && adopted:
				rev = srev
			case serr == nil && ctx.Err() == nil && !errors.Is(err, rpctypes.ErrLeaseNotFound):
				drop()
				s.Log().Debug("etcdlock: claim unanswered; retrying", "key", key, "err", err)
				if ctxwait.Sleep(ctx, qlock.RetryDelay) == nil {
					continue
				}
				return nil, context.Cause(ctx)
			default:
				forget()
				// The slot stays reserved until the cleanup is done: a claim
				// of this session made meanwhile would have its key deleted
				// by it (same key, same lease).
				s.abandonThen(key, func() { c.book.Free(key) })
				err = s.storeErr(err)
				return nil, cmp.Or(context.Cause(ctx), err)
			}
		} else if resp.Succeeded {
			rev, taken = resp.Header.Revision, resp.Responses[1].GetResponseRange().Kvs
		}
		if rev != 0 {
			if err := s.checkRev(key, rev, floor); err != nil {
				drop()
				return nil, err
			}
			n := &qlock.Node{Entry: qlock.Entry{Key: key, Seq: rev, Kind: qlock.Counted}, Token: rev, Slot: i, Waited: line != nil}
			if err := checkPermits(dir, name, r.Limit, taken); err != nil {
				forget()
				s.Abandon(n)
				c.book.Free(key)
				return nil, err
			}
			return n, nil
		}
		drop()
		slots := resp.Responses[0].GetResponseRange().Kvs
		if err := checkPermits(dir, name, r.Limit, slots); err != nil {
			return nil, err
		}
		s.sawGuardIn(resp.Responses[1].GetResponseRange(), resp.Header.Revision)
		if other := resp.Responses[2].GetResponseRange().Kvs; line == nil && len(other) > 0 {
			return nil, fmt.Errorf("%w (waiters queued: entry %s)", distlock.ErrLocked, other[0].Key)
		} else if line != nil && (len(other) == 0 || other[0].CreateRevision != line.Seq) {
			return nil, fmt.Errorf("%w: key %s", distlock.ErrEntryGone, line.Key)
		}
		free, held := pickFree(dir, r.Limit, slots, c.book.Reserved)
		if line != nil {
			c.readAt(resp.Header.Revision, free)
		}
		if free < 0 {
			return nil, fmt.Errorf("%w (all %d permits held%s)", distlock.ErrLocked, r.Limit, held)
		}
		i = free // the slot went, or the guard moved: go again
	}
}

// pickFree returns a slot below n, at random, that slots (a read of the
// slot keys) leaves free and mine does not say this session is claiming,
// -1 if none, and who holds the oldest slot for a "held" message.
func pickFree(dir string, n int, slots []*mvccpb.KeyValue, mine func(key string) bool) (int, string) {
	taken := make([]bool, n)
	held := ""
	var oldest int64
	for _, kv := range slots {
		if i, ok := parseSlot(dir, string(kv.Key)); ok && i < n {
			taken[i] = true
			if _, h := parseSlotValue(kv.Value); h != "" && (oldest == 0 || kv.CreateRevision < oldest) {
				oldest, held = kv.CreateRevision, fmt.Sprintf(", oldest by %q", h)
			}
		}
	}
	var free []int
	for i, t := range taken {
		if !t && !mine(slotKey(dir, i)) {
			free = append(free, i)
		}
	}
	if len(free) == 0 {
		return -1, held
	}
	return free[rand.IntN(len(free))], held
}

// unreserved returns slot i, or the next one after it (wrapping around
// below the permit count) that no other acquisition of this session
// claims or holds, -1 if none.
func (c *claim) unreserved(dir string, i int) int {
	n := c.r.Limit
	for k := range n {
		if j := (i + k) % n; !c.book.Reserved(slotKey(dir, j)) {
			return j
		}
	}
	return -1
}

// checkPermits returns an error wrapping distlock.ErrPermitsMismatch if a
// slot key was made for another count than n, or is beyond it.
func checkPermits(dir, name string, n int, slots []*mvccpb.KeyValue) error {
	for _, kv := range slots {
		i, ok := parseSlot(dir, string(kv.Key))
		if !ok {
			continue
		}
		if m, _ := parseSlotValue(kv.Value); m != n || i >= n {
			return fmt.Errorf("%w: semaphore %q: slot key %s was made for %d permits, this Semaphore has %d", distlock.ErrPermitsMismatch, name, kv.Key, m, n)
		}
	}
	return nil
}

// WaitSlot waits for a slot key of the semaphore to go after the head's
// last Claim read them (qlock.Claimer). Only the line's head watches: one
// prefix watch, deletions only. As waitDeleted's, the watch starts at the
// current revision, which etcd serves as soon as a delete is committed (a
// watch that starts in the past waits for a catch-up loop that runs every
// 100 ms: a handoff's whole budget); if the revision moved past the read
// before the watch started, one read at its start revision tells whether
// a slot went in between. It looks again after half a TTL in any case,
// so that a watch stuck on a member that lost the cluster costs a delay,
// not the wake-up.
func (c *claim) WaitSlot(ctx context.Context) error {
	if !c.read {
		return nil
	}
	s := c.s
	wctx, cancel := context.WithTimeout(ctx, 3*s.watchCheck())
	defer cancel()
	dir := s.Dir(c.book.Name())
	sp := slotPrefix(dir)
	c.free = -1 // unless a delete names one: the next Claim reads first
	wctx = metadata.AppendToOutgoingContext(clientv3.WithRequireLeader(wctx), "distlock-watch", streamName(s.streamGen.Load()))
	for resp := range s.client.Watch(wctx, sp, clientv3.WithPrefix(), clientv3.WithFilterPut(), clientv3.WithCreatedNotify()) {
		if resp.Created && resp.Header.Revision > c.rev {
			g, err := s.client.Get(ctx, sp, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithRev(resp.Header.Revision))
			if err != nil {
				return nil // the next Claim reads
			}
			if free, _ := pickFree(dir, c.r.Limit, g.Kvs, c.book.Reserved); free >= 0 {
				c.free = free
				return nil
			}
			continue
		}
		for _, ev := range resp.Events {
			if i, ok := parseSlot(dir, string(ev.Kv.Key)); ok {
				c.free = i
			}
		}
		if len(resp.Events) > 0 || resp.CompactRevision != 0 || resp.Err() != nil || resp.Canceled {
			return nil
		}
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return nil
}

// settle ends the doubt about a claim whose answer did not come, in one
// Txn: if slot key is bound to this session's lease, the claim was
// applied (adopted, with the key's create revision); otherwise the guard
// moves, so that the claim, if still on its way, fails its compare.
func (s *Session) settle(ctx context.Context, key string) (rev int64, adopted bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.enqueueAttempt())
	defer cancel()
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.LeaseValue(key), "=", s.id)).
		Then(clientv3.OpGet(key, clientv3.WithKeysOnly())).
		Else(s.guardPut()).Commit()
	if err != nil {
		return 0, false, s.storeErr(err)
	}
	if resp.Succeeded {
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			return kvs[0].CreateRevision, true, nil
		}
	}
	s.sawGuard(resp.Header.Revision, resp.Header.Revision)
	return 0, false, nil
}
