package integration_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/fencing"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/zklock"
)

// TestHolderRevoke is the operator's story of a hung holder: a holder
// process is stopped (SIGSTOP) while it holds, with a session that stays
// alive on the server for long (its TTL well past the test's steps), so
// only a revocation can free the lock. The revocation asks, waits its
// grace, and forces: it deletes the stopped holder's entry, and a waiter
// acquires with a newer token long before the holder's session could
// expire. When the holder wakes it is told it lost the lock, its late
// fenced write is refused, and the revocation's audit record remains.
func TestHolderRevoke(t *testing.T) {
	for _, store := range []string{"etcd", "zk"} {
		t.Run(store, func(t *testing.T) {
			ctx := ctxFor(t, 2*time.Minute)
			const ttl = 30 * time.Second
			spec, locker, revoke, revocations := revokeEnv(ctx, t, store, ttl)
			a := integration.NewHolder(t, spec)
			t1 := a.Token()
			fence, err := fencing.NewMemory("report")
			if err != nil {
				t.Fatal(err)
			}
			if err := fence.Admit(ctx, t1); err != nil {
				t.Fatalf("the holder's write before the pause: %v", err)
			}
			waiter := make(chan *distlock.Lease, 1)
			go func() {
				l, err := locker().Lock(ctx)
				if err != nil {
					t.Error(err)
				}
				waiter <- l
			}()

			if err := a.Pause(); err != nil {
				t.Fatal(err)
			}
			paused := time.Now()
			const grace = time.Second
			rs, err := revoke(ctx, distlock.RevokeRequest{Reason: "holder hung", By: "on-call", Grace: grace, Force: true})
			if err != nil {
				t.Fatalf("Revoke: %v", err)
			}
			if len(rs) != 1 || rs[0].Outcome != distlock.RevokeForced || rs[0].Token != t1.String() {
				t.Fatalf("Revoke: %+v; want the stopped holder's (%s) forced", rs, t1)
			}
			l := <-waiter
			if l == nil {
				return
			}
			defer l.Unlock(context.Background())
			took := time.Since(paused)
			t.Logf("the waiter acquired %v after the holder was stopped (grace %v, session TTL %v)", took.Round(time.Millisecond), grace, ttl)
			if took < grace || took >= ttl {
				t.Fatalf("the waiter acquired %v after the stop: want after the %v grace and before the %v TTL", took, grace, ttl)
			}
			if !l.Token().Newer(t1) {
				t.Fatalf("the waiter's token %v is not newer than the revoked %v", l.Token(), t1)
			}
			if s := procState(t, a.PID()); s != 'T' {
				t.Fatalf("the holder's state when the waiter acquired: %c, want T (stopped)", s)
			}
			if err := fence.Admit(ctx, l.Token()); err != nil {
				t.Fatalf("the waiter's write: %v", err)
			}

			if err := a.Resume(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-a.Lost():
			case <-time.After(30 * time.Second):
				t.Fatal("the revoked holder was not told it lost the lock within 30s of waking up")
			}
			if err := fence.Admit(ctx, t1); !errors.Is(err, fencing.ErrStale) {
				t.Fatalf("the revoked holder's late write: %v, want ErrStale", err)
			}
			if err := a.Unlock(ctx); !errors.Is(err, distlock.ErrLost) {
				t.Fatalf("the revoked holder's late release: %v, want ErrLost", err)
			}
			if l.Err() != nil {
				t.Fatalf("the waiter's lease ended after the revoked holder's late release: %v", l.Err())
			}
			all, err := revocations(ctx)
			if err != nil || len(all) != 1 || all[0].Outcome != distlock.RevokeForced || all[0].By != "on-call" || all[0].Reason != "holder hung" {
				t.Fatalf("audit records: %+v, %v; want the forced revocation", all, err)
			}
		})
	}
}

// revokeEnv starts a cluster of store and returns the spec of a holder of
// lock "report" whose session lives ttl, a constructor of that lock on
// sessions of its own, and the lock's Revoke and Revocations.
func revokeEnv(ctx context.Context, t *testing.T, store string, ttl time.Duration) (
	spec integration.HolderSpec, locker func() distlock.Locker,
	revoke func(context.Context, distlock.RevokeRequest) ([]distlock.Revocation, error),
	revocations func(context.Context) ([]distlock.Revocation, error),
) {
	t.Helper()
	if store == "etcd" {
		c := integration.NewEtcd(t)
		cli, err := c.Client()
		if err != nil {
			t.Fatal(err)
		}
		return integration.HolderSpec{Backend: "etcd", Endpoints: c.Endpoints(), Lock: "report", TTL: ttl},
			func() distlock.Locker {
				s, err := etcdlock.NewSession(ctx, cli)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close(context.Background()) })
				m, err := etcdlock.NewMutex(s, "report")
				if err != nil {
					t.Fatal(err)
				}
				return m
			},
			func(ctx context.Context, r distlock.RevokeRequest) ([]distlock.Revocation, error) {
				return etcdlock.Revoke(ctx, cli, etcdlock.DefaultPrefix, "report", r)
			},
			func(ctx context.Context) ([]distlock.Revocation, error) {
				return etcdlock.Revocations(ctx, cli, etcdlock.DefaultPrefix, "report")
			}
	}
	ens := integration.NewZooKeeper(t)
	conn, _, err := ens.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return integration.HolderSpec{Backend: "zk", Endpoints: ens.Addrs(), Lock: "report", TTL: ttl},
		func() distlock.Locker {
			s, err := zklock.NewSession(ctx, conn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close(context.Background()) })
			m, err := zklock.NewMutex(s, "report")
			if err != nil {
				t.Fatal(err)
			}
			return m
		},
		func(ctx context.Context, r distlock.RevokeRequest) ([]distlock.Revocation, error) {
			return zklock.Revoke(ctx, conn, zklock.DefaultPrefix, "report", r, nil)
		},
		func(ctx context.Context) ([]distlock.Revocation, error) {
			return zklock.Revocations(ctx, conn, zklock.DefaultPrefix, "report")
		}
}
