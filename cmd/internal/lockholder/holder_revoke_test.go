package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
	"github.com/distlock/distlock/integration"
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
			spec, cli := holderEnv(ctx, t, store, "report", ttl, 0)
			a := integration.NewHolder(t, spec)
			t1 := a.Token()
			fence, err := fencing.NewMemory("report")
			if err != nil {
				t.Fatal(err)
			}
			if err := fence.Admit(ctx, t1); err != nil {
				t.Fatalf("the holder's write before the pause: %v", err)
			}
			m, err := newSession(ctx, t, cli).Mutex("report")
			if err != nil {
				t.Fatal(err)
			}
			waiter := make(chan *distlock.Lease, 1)
			go func() {
				l, err := m.Lock(ctx)
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
			rs, err := cli.Revoke(ctx, "report", distlock.RevokeRequest{Reason: "holder hung", By: "on-call", Grace: grace, Force: true})
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
			all, err := cli.Revocations(ctx, "report")
			if err != nil || len(all) != 1 || all[0].Outcome != distlock.RevokeForced || all[0].By != "on-call" || all[0].Reason != "holder hung" {
				t.Fatalf("audit records: %+v, %v; want the forced revocation", all, err)
			}
		})
	}
}
