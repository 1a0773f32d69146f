package chaos

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcd-revoke-lease revokes a session's lease from outside, from an admin
// client of its own, as an operator (or a buggy tool) would: every entry
// bound to the lease goes at once, while its owner may be waiting in
// Lock or working in its critical section. Three ways, drawn from the
// seed:
//
//   - at a random moment, the lease of a random waiter or a random holder
//     of the lock's queue;
//   - just before a release: a random waiter is picked, and when a worker
//     is next about to release or hand off leadership (the history's
//     hook, see History.SetHook)
//     the waiter's lease is revoked (the releasing holder's own if nobody
//     waited), and the release goes out 0–10 ms after the revocation was
//     applied. A waiter whose entry went just before the entry ahead of it
//     must not be told it acquired;
//   - with a workload that can stall a worker in its critical section,
//     the stalled holder's lease, after which its successor works and the
//     stalled holder writes with its stale token: the fences must refuse
//     it.
//
// Each revocation is recorded as a fault of its own (NemRevokeLease +
// "/revoke", Value the lease ID) from before the request until its
// answer, and then told what the lease had in the lock's queue just
// before the revocation, read at the revision before the one that
// deleted its keys: Mode "holding", "waiting", "idle" (no entry), or
// "unknown" (the revision was compacted away), Token its entries'
// tokens. The checkers treat a revoked holder like a session expired from
// outside (forcedExpiries: two may then believe they hold, the fences
// decide), and check that no lease revoked while it did not hold was
// told "acquired" afterwards (checkGrantAfterRevoke).

// revokeLeadMax bounds how long before a release a timed revocation is
// applied.
const revokeLeadMax = 10 * time.Millisecond

// Lease states recorded in a revocation's Mode.
const (
	leaseHolding = "holding"
	leaseWaiting = "waiting"
	leaseIdle    = "idle"
	leaseUnknown = "unknown"
)

// leaseAdmin is a store whose sessions are leases that an admin client
// can revoke (etcd).
type leaseAdmin interface {
	// adminClient returns a new client of every member, apart from the
	// workers'; the caller closes it.
	adminClient() (*clientv3.Client, error)
}

func (s *etcdStore) adminClient() (*clientv3.Client, error) { return s.c.Client() }

func injectRevokeLease(ctx context.Context, env *Env) (string, func(context.Context) error, error) {
	la, ok := env.Store.(leaseAdmin)
	if !ok {
		return "", nil, fmt.Errorf("chaos: %s has no leases to revoke", env.Store.Name())
	}
	cli, err := la.adminClient()
	if err != nil {
		return "", nil, err
	}
	defer cli.Close()
	st, stalls := env.workload.(staller)
	ways := 2
	if stalls {
		ways = 3
	}
	switch env.Rand(ways) {
	case 0:
		return revokeAtRandom(ctx, env, cli)
	case 1:
		return revokeBeforeRelease(ctx, env, cli)
	default:
		return revokeStalled(ctx, env, cli, st)
	}
}

// revokeAtRandom revokes, once the queue has entries, the lease of a
// random waiter or a random holder (a coin decides which, when there are
// both).
func revokeAtRandom(ctx context.Context, env *Env, cli *clientv3.Client) (string, func(context.Context) error, error) {
	pick := env.Rand(1 << 30)
	wantHolder := pick%2 == 0
	pick /= 2
	var victim distlock.QueueEntry
	err := waitQueue(ctx, env, cli, func(q []distlock.QueueEntry) bool {
		if len(q) == 0 {
			return false
		}
		var of []distlock.QueueEntry
		for _, e := range q {
			if e.Holding == wantHolder {
				of = append(of, e)
			}
		}
		if len(of) == 0 {
			of = q
		}
		victim = of[pick%len(of)]
		return true
	})
	if err != nil {
		return "", nil, fmt.Errorf("chaos: no entry in the queue to revoke the lease of: %w", err)
	}
	role := leaseWaiting
	if victim.Holding {
		role = leaseHolding
	}
	lease := clientv3.LeaseID(victim.Token.Owner)
	target := leaseTarget(env, lease, "random "+role)
	op, rev, err := revokeLease(ctx, env, cli, lease, target)
	if err != nil {
		return target, nil, err
	}
	recordLeaseState(ctx, env, cli, op, lease, rev)
	return target, noHeal, nil
}

// waitQueue follows the lock's queue (with a multi-lock workload, the
// queue of one of its names, drawn from the seed) until pick, called
// with each new state of it, returns true, for up to 2 × TTL.
func waitQueue(ctx context.Context, env *Env, cli *clientv3.Client, pick func([]distlock.QueueEntry) bool) error {
	wctx, cancel := context.WithTimeout(ctx, 2*env.Store.TTL())
	defer cancel()
	errPicked := errors.New("picked")
	admin, err := etcdlock.NewAdmin(cli, "")
	if err != nil {
		return err
	}
	err = admin.WatchQueue(wctx, env.targetLock(), func(q []distlock.QueueEntry) error {
		if pick(q) {
			return errPicked
		}
		return nil
	})
	if errors.Is(err, errPicked) {
		return nil
	}
	return err
}

// revokeBeforeRelease picks a random waiter, once one waits, and revokes
// its lease when a worker is about to release (for a lock, most likely
// the release the waiter waits for), letting the release go out 0–10 ms
// after the revocation was applied. If nobody waits for 2 × TTL, it
// revokes the releasing holder's own lease instead.
func revokeBeforeRelease(ctx context.Context, env *Env, cli *clientv3.Client) (string, func(context.Context) error, error) {
	lead := env.RandDuration(0, revokeLeadMax)
	pick := env.Rand(1 << 30)
	var waiter clientv3.LeaseID // 0: the releaser's own
	err := waitQueue(ctx, env, cli, func(q []distlock.QueueEntry) bool {
		var ws []distlock.QueueEntry
		for _, e := range q {
			if !e.Holding {
				ws = append(ws, e)
			}
		}
		if len(ws) == 0 {
			return false
		}
		waiter = clientv3.LeaseID(ws[pick%len(ws)].Token.Owner)
		return true
	})
	if err != nil {
		env.Log.Info("chaos: nobody waits; revoking a releasing holder's lease instead", "err", err)
	}
	type fired struct {
		target string
		lease  clientv3.LeaseID
		op     *Op
		rev    int64
		err    error
	}
	done := make(chan fired, 1)
	var armed atomic.Bool
	armed.Store(true)
	env.History.SetHook(func(rel Op) {
		// A handoff is a release too: it ends the leader's term and
		// starts a waiter's, whose lease may be the one revoked.
		if rel.Kind != KindRelease && rel.Kind != KindHandOff || !armed.CompareAndSwap(true, false) {
			return
		}
		f := fired{lease: waiter}
		defer func() { done <- f }()
		role := "waiter"
		if f.lease == 0 {
			t, err := distlock.ParseToken(rel.Token)
			if err != nil {
				f.err = fmt.Errorf("chaos: a release without a token (%q)", rel.Token)
				return
			}
			f.lease, role = clientv3.LeaseID(t.Owner), "releasing holder"
		}
		f.target = leaseTarget(env, f.lease, fmt.Sprintf("%s, %v before %s's release", role, lead.Round(time.Microsecond), rel.Process))
		rctx, cancel := context.WithTimeout(ctx, env.Store.TTL())
		defer cancel()
		f.op, f.rev, f.err = revokeLease(rctx, env, cli, f.lease, f.target)
		// The release waits: it goes out lead after the revocation.
		time.Sleep(lead)
	})
	defer env.History.SetHook(nil)
	wctx, cancel := context.WithTimeout(ctx, 4*env.Store.TTL())
	defer cancel()
	var f fired
	select {
	case f = <-done:
	case <-wctx.Done():
		if armed.CompareAndSwap(true, false) {
			return "", nil, fmt.Errorf("chaos: no release within %v to revoke a lease before", 4*env.Store.TTL())
		}
		f = <-done // fired just now
	}
	if f.err != nil {
		return f.target, nil, f.err
	}
	recordLeaseState(ctx, env, cli, f.op, f.lease, f.rev)
	return f.target, noHeal, nil
}

// revokeStalled stalls a worker inside its critical section, revokes its
// lease, waits for a successor to work, and lets the stalled worker write
// with its stale token at the heal.
func revokeStalled(ctx context.Context, env *Env, cli *clientv3.Client, st staller) (string, func(context.Context) error, error) {
	i := env.Rand(len(env.Clients))
	target := fmt.Sprintf("w%d", i)
	sctx, cancel := context.WithTimeout(ctx, 4*env.Store.TTL())
	tok, release, stalled := st.Stall(sctx, i)
	cancel()
	if !stalled {
		release()
		env.Log.Info("chaos: no worker stalled; revoking a random lease instead", "worker", target)
		return revokeAtRandom(ctx, env, cli)
	}
	lease := clientv3.LeaseID(tok.Owner)
	target = leaseTarget(env, lease, "stalled holder")
	op, rev, err := revokeLease(ctx, env, cli, lease, target)
	if err != nil {
		release()
		return target, nil, err
	}
	recordLeaseState(ctx, env, cli, op, lease, rev)
	wctx, cancel := context.WithTimeout(ctx, 4*env.Store.TTL())
	st.WaitSuccessor(wctx, tok)
	cancel()
	return target, func(context.Context) error { release(); return nil }, nil
}

// revokeLease revokes lease and records the revocation, from before the
// request until its answer; it returns the revision the answer carries.
// A lease the server no longer knows (ended meanwhile) is recorded as
// failed and is not an error.
func revokeLease(ctx context.Context, env *Env, cli *clientv3.Client, lease clientv3.LeaseID, target string) (*Op, int64, error) {
	op := env.History.Invoke(Op{Process: "nemesis", Kind: KindFault, Fault: NemRevokeLease + "/revoke", Target: target, Value: int64(lease)})
	resp, err := cli.Revoke(ctx, lease)
	switch {
	case err == nil:
		env.History.Complete(op, OK, nil)
		return op, resp.Header.Revision, nil
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		env.History.Complete(op, Fail, err)
		return op, 0, nil
	}
	env.History.Complete(op, Info, err)
	return op, 0, err
}

// recordLeaseState records in a revocation what its lease had in the
// lock's queue just before the revocation: read at the revision before
// the one it answered with. If the revocation deleted keys, that
// revision is the deletion's, so the read sees the queue right before;
// if it deleted none, the lease had no entry at the revocation, and the
// read can only show entries that someone else deleted at that revision.
// Either way a lease shown holding nothing there held nothing when it
// was revoked.
func recordLeaseState(ctx context.Context, env *Env, cli *clientv3.Client, op *Op, lease clientv3.LeaseID, rev int64) {
	if rev == 0 {
		return // not revoked
	}
	rctx, cancel := context.WithTimeout(ctx, env.Store.TTL())
	defer cancel()
	state, toks := leaseState(rctx, cli, env.Locks(), lease, rev-1)
	env.History.Update(op, func(o *Op) { o.Mode, o.Token = state, strings.Join(toks, ",") })
}

// leaseState reads the locks' queues at revision rev and returns what
// lease had in them (holding if it held in any), and its entries' tokens.
func leaseState(ctx context.Context, cli *clientv3.Client, locks []string, lease clientv3.LeaseID, rev int64) (string, []string) {
	admin, err := etcdlock.NewAdmin(&clientv3.Client{KV: atRevision{cli.KV, rev}}, "")
	if err != nil {
		return leaseUnknown, nil
	}
	var q []distlock.QueueEntry
	for _, lock := range locks {
		es, err := admin.Inspect(ctx, lock)
		if err != nil {
			return leaseUnknown, nil
		}
		q = append(q, es...)
	}
	state := leaseIdle
	var toks []string
	for _, e := range q {
		if e.Token.Owner != uint64(lease) {
			continue
		}
		toks = append(toks, e.Token.String())
		switch {
		case e.Holding:
			state = leaseHolding
		case state == leaseIdle:
			state = leaseWaiting
		}
	}
	return state, toks
}

// atRevision reads at one revision of the past.
type atRevision struct {
	clientv3.KV
	rev int64
}

func (a atRevision) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	return a.KV.Get(ctx, key, append(opts, clientv3.WithRev(a.rev))...)
}

// leaseTarget names a revocation's target: the worker that acquired with
// the lease before, if one did, the lease, and why it was chosen.
func leaseTarget(env *Env, lease clientv3.LeaseID, why string) string {
	proc := ""
	for _, op := range env.History.Ops() {
		if op.Kind != KindAcquire || op.Outcome != OK {
			continue
		}
		if t, err := distlock.ParseToken(op.Token); err == nil && t.Owner == uint64(lease) {
			proc = op.Process + " "
		}
	}
	return fmt.Sprintf("%slease %x (%s)", proc, int64(lease), why)
}

// revokedLeases returns the leases revoked by etcd-revoke-lease whose
// revocation may have taken effect, with its recorded operations.
func revokedLeases(ops []Op) map[uint64][]Op {
	m := map[uint64][]Op{}
	for _, op := range ops {
		if op.Kind == KindFault && op.Fault == NemRevokeLease+"/revoke" && op.Outcome != Fail && op.Value != 0 {
			m[uint64(op.Value)] = append(m[uint64(op.Value)], op)
		}
	}
	return m
}

// addRevokedLeases adds to forced (see forcedExpiries) the revocations of
// etcd-revoke-lease, to every process that acquired with the lease.
func addRevokedLeases(ops []Op, forced map[string][]int64) {
	revoked := revokedLeases(ops)
	if len(revoked) == 0 {
		return
	}
	seen := map[string]bool{}
	for _, op := range ops {
		if op.Kind != KindAcquire || op.Outcome != OK {
			continue
		}
		t, err := distlock.ParseToken(op.Token)
		if err != nil || seen[op.Process+" "+strconv.FormatUint(t.Owner, 16)] {
			continue
		}
		seen[op.Process+" "+strconv.FormatUint(t.Owner, 16)] = true
		for _, r := range revoked[t.Owner] {
			forced[op.Process] = append(forced[op.Process], r.Invoke)
		}
	}
}

// checkGrantAfterRevoke checks that no one was told "acquired" for an
// entry already gone: a lease that etcd-revoke-lease revoked while it
// held nothing in the queue (waiting, or idle) cannot hold afterwards,
// so no acquisition with it may complete after the revocation was
// answered. It checks each such revocation. (A lease revoked while
// holding is a forced expiry: its Lock may return just after, and its
// Lease then reports the loss; the fences refuse what it writes after its
// successor.)
func checkGrantAfterRevoke(ops []Op) Check {
	c := Check{Name: "no-grant-after-revoke", Subject: "lock"}
	revoked := revokedLeases(ops)
	states := map[string]int{}
	for _, rs := range revoked {
		for _, r := range rs {
			states[r.Mode]++
			if r.Outcome == OK && (r.Mode == leaseWaiting || r.Mode == leaseIdle) {
				c.Checked++
			}
		}
	}
	var bad []string
	for _, op := range ops {
		if op.Kind != KindAcquire || op.Outcome != OK {
			continue
		}
		t, err := distlock.ParseToken(op.Token)
		if err != nil {
			continue
		}
		for _, r := range revoked[t.Owner] {
			if r.Outcome == OK && (r.Mode == leaseWaiting || r.Mode == leaseIdle) && op.Complete > r.Complete {
				c.Violations++
				bad = append(bad, fmt.Sprintf("%s told acquired %s at %v, %v after its lease was revoked while %s (%s)",
					op.Process, op.Token, time.Duration(op.Complete), time.Duration(op.Complete-r.Complete), r.Mode, r.Target))
			}
		}
	}
	c.OK = c.Violations == 0
	c.Skipped = c.Checked == 0
	c.Detail = limit(append([]string{fmt.Sprintf("%d revocations (of a lease holding %d, waiting %d, idle %d, unknown %d)",
		states[leaseHolding]+states[leaseWaiting]+states[leaseIdle]+states[leaseUnknown]+states[""],
		states[leaseHolding], states[leaseWaiting], states[leaseIdle], states[leaseUnknown]+states[""])}, bad...))
	return c
}
