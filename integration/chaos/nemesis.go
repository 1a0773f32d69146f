package chaos

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/integration"
)

// Nemesis names.
const (
	NemHolderPause     = "holder-pause"
	NemKill            = "kill"
	NemKillLeader      = "kill-leader"
	NemPauseServer     = "pause-server"
	NemIsolateLeader   = "isolate-leader"
	NemIsolateFollower = "isolate-follower"
	NemAsymmetric      = "asymmetric"
	NemExpireSession   = "zk-expire-session"
	NemHoldReplies     = "zk-hold-replies"
	NemDropConnection  = "zk-drop-connection"
	NemCompact         = "etcd-compact"
	// NemRevokeLease revokes the etcd lease of a waiter or a holder from
	// an admin client of its own (the etcd twin of zk-expire-session):
	// at a random moment, just before a release, or while the holder is
	// stalled inside its critical section (nemesis_lease.go).
	NemRevokeLease = "etcd-revoke-lease"
	// NemEtcdHoldReplies holds what the members send one client (its
	// keepalives', enqueues' and releases' replies) while its requests
	// are still applied, then delivers it (the etcd twin of
	// zk-hold-replies; nemesis_client.go).
	NemEtcdHoldReplies = "etcd-hold-replies"
	// NemIsolateClient cuts one client off from every server while the
	// servers keep their quorum (nemesis_client.go).
	NemIsolateClient = "isolate-client"
	// NemRevoke force-revokes the lock's holders (distlock's Revoke with
	// Force): their entries deleted from outside, while they may still
	// be working.
	NemRevoke = "revoke"
	// NemMemberChange removes a member from the cluster's configuration
	// and adds a fresh one back (nemesis_member.go).
	NemMemberChange = "member-change"
)

// Nemeses returns the named nemeses; "all" (or none) returns every one.
func Nemeses(names ...string) ([]Nemesis, error) {
	all := AllNemeses()
	if len(names) == 0 || len(names) == 1 && names[0] == "all" {
		return all, nil
	}
	byName := map[string]Nemesis{}
	for _, n := range all {
		byName[n.Name()] = n
	}
	var out []Nemesis
	for _, name := range names {
		n, ok := byName[name]
		if !ok {
			return nil, fmt.Errorf("chaos: unknown nemesis %q", name)
		}
		out = append(out, n)
	}
	return out, nil
}

// AllNemeses returns one of every nemesis.
func AllNemeses() []Nemesis {
	return []Nemesis{
		holderPause{},
		nemesis{NemKill, nil, injectKill(false)},
		nemesis{NemKillLeader, nil, injectKill(true)},
		nemesis{NemPauseServer, nil, injectPauseServer},
		nemesis{NemIsolateLeader, nil, injectIsolate(true)},
		nemesis{NemIsolateFollower, nil, injectIsolate(false)},
		nemesis{NemAsymmetric, nil, injectAsymmetric},
		nemesis{NemExpireSession, onZK, injectExpire},
		nemesis{NemHoldReplies, onZK, injectHoldReplies},
		nemesis{NemDropConnection, onZK, injectDrop},
		nemesis{NemCompact, onEtcd, injectCompact},
		nemesis{NemRevokeLease, onEtcd, injectRevokeLease},
		nemesis{NemEtcdHoldReplies, onEtcd, injectEtcdHoldReplies},
		nemesis{NemIsolateClient, nil, injectIsolateClient},
		nemesis{NemRevoke, nil, injectRevoke},
		nemesis{NemMemberChange, changesMembers, injectMemberChange},
	}
}

type nemesis struct {
	name    string
	applies func(*Env) bool
	inject  func(ctx context.Context, env *Env) (string, func(context.Context) error, error)
}

func (n nemesis) Name() string { return n.name }
func (n nemesis) Applies(env *Env) bool {
	return n.applies == nil || n.applies(env)
}
func (n nemesis) Inject(ctx context.Context, env *Env) (string, func(context.Context) error, error) {
	return n.inject(ctx, env)
}

func onZK(env *Env) bool   { return env.Store.Name() == ZooKeeper }
func onEtcd(env *Env) bool { return env.Store.Name() == Etcd }

func noHeal(context.Context) error { return nil }

func injectKill(leader bool) func(ctx context.Context, env *Env) (string, func(context.Context) error, error) {
	return func(ctx context.Context, env *Env) (string, func(context.Context) error, error) {
		f := env.Store.Faults()
		i := env.Rand(env.Store.Size())
		if leader {
			var err error
			if i, err = f.Leader(ctx); err != nil {
				return "", nil, err
			}
		}
		if err := f.Kill(i); err != nil {
			return env.Store.Node(i), nil, err
		}
		return env.Store.Node(i), func(ctx context.Context) error { return f.Restart(ctx, i) }, nil
	}
}

func injectPauseServer(ctx context.Context, env *Env) (string, func(context.Context) error, error) {
	f := env.Store.Faults()
	i := env.Rand(env.Store.Size())
	if err := f.Pause(i); err != nil {
		return env.Store.Node(i), nil, err
	}
	return env.Store.Node(i), func(context.Context) error { return f.Resume(i) }, nil
}

func injectIsolate(leader bool) func(ctx context.Context, env *Env) (string, func(context.Context) error, error) {
	return func(ctx context.Context, env *Env) (string, func(context.Context) error, error) {
		f := env.Store.Faults()
		l, err := f.Leader(ctx)
		if err != nil {
			return "", nil, err
		}
		i := l
		if !leader {
			i = (l + 1 + env.Rand(env.Store.Size()-1)) % env.Store.Size()
		}
		// Cut returns once the server has noticed; a cut that did not
		// take effect fails the run rather than test nothing.
		if err := f.Cut(i); err != nil {
			f.Heal(i)
			return "", nil, err
		}
		return env.Store.Node(i), func(context.Context) error { f.Heal(i); return nil }, nil
	}
}

func injectAsymmetric(ctx context.Context, env *Env) (string, func(context.Context) error, error) {
	f := env.Store.Faults()
	i := env.Rand(env.Store.Size())
	dir, what := integration.Inbound, "inbound"
	if env.Rand(2) == 0 {
		dir, what = integration.Outbound, "outbound"
	}
	node := env.Store.Node(i)
	f.Network().Set(node, integration.Fault{Hold: true, Dir: dir})
	if err := f.CheckAttribution(); err != nil {
		f.Network().Clear(node)
		return "", nil, err
	}
	return node + " " + what, func(context.Context) error { f.Network().Clear(node); return nil }, nil
}

// zkTarget picks the worker that holds the lock now (a random one if
// none is known) and returns its ZooKeeper client.
func zkTarget(env *Env) (string, zkClientFaults, error) {
	i := env.Holder()
	c, ok := env.Clients[i].(zkClientFaults)
	if !ok {
		return "", nil, fmt.Errorf("chaos: client %d has no ZooKeeper faults", i)
	}
	return fmt.Sprintf("w%d", i), c, nil
}

// staller is a workload that can stall a worker inside its critical
// section (RegisterWorkload).
type staller interface {
	Stall(ctx context.Context, i int) (distlock.Token, func(), bool)
	WaitSuccessor(ctx context.Context, t distlock.Token) bool
}

// injectExpire expires a holder's session from outside. With a workload
// that can stall a worker mid-critical-section, it stalls one first, so
// that the expired holder, which still believes it holds, writes after
// its successor: the fences must refuse it.
func injectExpire(ctx context.Context, env *Env) (string, func(context.Context) error, error) {
	st, ok := env.workload.(staller)
	if !ok {
		target, c, err := zkTarget(env)
		if err != nil {
			return "", nil, err
		}
		return target, noHeal, c.Expire(ctx)
	}
	i := env.Rand(len(env.Clients))
	target := fmt.Sprintf("w%d", i)
	c, ok := env.Clients[i].(zkClientFaults)
	if !ok {
		return "", nil, fmt.Errorf("chaos: client %d has no ZooKeeper faults", i)
	}
	sctx, cancel := context.WithTimeout(ctx, 4*env.Store.TTL())
	tok, release, stalled := st.Stall(sctx, i)
	cancel()
	// The moment of the expiry, for the checkers (the fault itself was
	// recorded when the nemesis started waiting for the stall).
	env.History.Event(Op{Process: "nemesis", Kind: KindFault, Fault: NemExpireSession + "/expire", Target: target, Token: tokenText(tok), Outcome: OK})
	if err := c.Expire(ctx); err != nil {
		release()
		return target, nil, err
	}
	if stalled {
		wctx, cancel := context.WithTimeout(ctx, 4*env.Store.TTL())
		st.WaitSuccessor(wctx, tok)
		cancel()
	}
	return target, func(context.Context) error { release(); return nil }, nil
}

func injectHoldReplies(ctx context.Context, env *Env) (string, func(context.Context) error, error) {
	target, c, err := zkTarget(env)
	if err != nil {
		return "", nil, err
	}
	release, err := c.HoldReplies()
	if err != nil {
		return target, nil, err
	}
	return target, func(context.Context) error { release(); return nil }, nil
}

func injectDrop(ctx context.Context, env *Env) (string, func(context.Context) error, error) {
	target, c, err := zkTarget(env)
	if err != nil {
		return "", nil, err
	}
	return target, noHeal, c.DropConnection()
}

func injectCompact(ctx context.Context, env *Env) (string, func(context.Context) error, error) {
	c, ok := env.Store.(compactor)
	if !ok {
		return "", nil, fmt.Errorf("chaos: %s cannot compact", env.Store.Name())
	}
	rev, err := c.Compact(ctx)
	return fmt.Sprintf("revision %d", rev), noHeal, err
}

// holderHooks is what a workload offers the holder-pause nemesis.
type holderHooks interface {
	// HolderAcquired starts the holder's critical section (it still runs).
	HolderAcquired(ctx context.Context, env *Env, h *integration.Holder) any
	// HolderWaitSuccessor waits until a later holder did its work.
	HolderWaitSuccessor(ctx context.Context, state any) bool
	// HolderResumed finishes the critical section after the pause.
	HolderResumed(ctx context.Context, env *Env, h *integration.Holder, state any)
}

// holderPause is the key nemesis: a lock holder in a child process takes
// the lock, starts its critical section, and is stopped with SIGSTOP
// (like a long GC pause) until its session expired and a successor wrote;
// continued, it finishes its critical section with its stale token.
type holderPause struct{}

func (holderPause) Name() string { return NemHolderPause }

func (holderPause) Applies(env *Env) bool {
	_, ok := env.workload.(holderHooks)
	return ok
}

func (holderPause) Inject(ctx context.Context, env *Env) (string, func(context.Context) error, error) {
	hooks := env.workload.(holderHooks)
	spec := env.Store.Holder(env.targetLock())
	spec.Logger = env.Log
	acq := env.History.Invoke(Op{Process: "holder", Kind: KindAcquire})
	h, err := integration.StartHolder(ctx, spec)
	if err != nil {
		env.History.Complete(acq, Fail, err)
		return "", nil, err
	}
	proc := fmt.Sprintf("holder-%d", h.PID())
	env.History.Update(acq, func(o *Op) { o.Process, o.Token = proc, h.Token().String() })
	env.History.Complete(acq, OK, nil)
	state := hooks.HolderAcquired(ctx, env, h)
	if err := h.Pause(); err != nil {
		h.Close()
		return proc, nil, err
	}
	// Stopped past its TTL: the store expires its session and a worker
	// takes over and writes.
	wctx, cancel := context.WithTimeout(ctx, 6*max(env.Store.HolderTTL(), env.Store.TTL()))
	succeeded := hooks.HolderWaitSuccessor(wctx, state)
	cancel()
	env.Log.Info("chaos: paused holder", "holder", proc, "successor wrote", succeeded)
	return proc, func(ctx context.Context) error {
		defer h.Close()
		if err := h.Resume(); err != nil {
			return err
		}
		hooks.HolderResumed(ctx, env, h, state)
		select {
		case <-h.Lost():
			env.History.Event(Op{Process: proc, Kind: KindLost, Token: h.Token().String(), Outcome: OK, Error: h.LostError()})
		case <-time.After(2 * env.Store.HolderTTL()):
		case <-ctx.Done():
		}
		return nil
	}, nil
}

// injectRevoke force-revokes the lock's holders, as an operator would a
// hung one. With a workload that can stall a worker mid-critical-section,
// it stalls one first and revokes it at once (grace 0), so that the
// revoked holder, which still believes it holds, writes after its
// successor: the fences must refuse it. Otherwise it revokes whoever
// holds, at once (grace 0: holds are short). Each forced holder's token is recorded
// (NemRevoke+"/force") for the checkers, which treat it like a session
// expired from outside.
func injectRevoke(ctx context.Context, env *Env) (string, func(context.Context) error, error) {
	n := len(env.Clients)
	// revoke records the forced tokens as one event that starts before
	// the Revoke (the deletes happen inside it, and a successor may
	// acquire before it returns) and names them once it is over.
	revoke := func(by int, target, lock string, grace time.Duration) (bool, error) {
		op := env.History.Invoke(Op{Process: "nemesis", Kind: KindFault, Fault: NemRevoke + "/force", Target: target})
		// Bounded: the client it goes through may be the one another
		// nemesis cut off, and the run must not wait for the caller's
		// whole deadline (its outcome is then unknown, as recorded).
		rctx, cancel := context.WithTimeout(ctx, grace+5*env.Store.TTL())
		defer cancel()
		rs, err := env.Clients[by].Revoke(rctx, lock, distlock.RevokeRequest{Reason: "chaos", By: "nemesis", Grace: grace, Force: true})
		var forced []string
		for _, r := range rs {
			if r.Outcome == distlock.RevokeForced {
				forced = append(forced, r.Token)
			}
		}
		env.History.Update(op, func(o *Op) { o.Token = strings.Join(forced, ",") })
		env.History.Complete(op, outcomeOf(err), err)
		return len(forced) > 0, err
	}
	st, ok := env.workload.(staller)
	if !ok {
		_, err := revoke(env.Rand(n), "holders", env.targetLock(), 0)
		return "holders", noHeal, err
	}
	i := env.Rand(n)
	target := fmt.Sprintf("w%d", i)
	sctx, cancel := context.WithTimeout(ctx, 4*env.Store.TTL())
	tok, release, stalled := st.Stall(sctx, i)
	cancel()
	// The stalled holder's lock (with a multi-lock, the first of its
	// names: revoking one entry ends the whole acquisition).
	lock := tok.Name
	if tok.IsZero() {
		lock = env.targetLock()
	}
	forced, err := revoke((i+1)%n, target, lock, 0)
	if err != nil {
		release()
		return target, nil, err
	}
	if stalled && forced {
		wctx, cancel := context.WithTimeout(ctx, 4*env.Store.TTL())
		st.WaitSuccessor(wctx, tok)
		cancel()
	}
	return target, func(context.Context) error { release(); return nil }, nil
}
