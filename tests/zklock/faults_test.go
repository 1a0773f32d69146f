package zklock_test

import (
	"errors"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/recipe"
	"github.com/go-zookeeper/zk"
)

// TestFaults hurts a real 3-server ensemble: sessions expired on the
// servers, connections dropped, a holder partitioned.
func TestFaults(t *testing.T) {
	ens := integration.NewZooKeeper(t)
	admin, events := connect(t, ens)
	drain(events)

	t.Run("LeaderKilledWhileHeldAndWaited", func(t *testing.T) {
		prefix := newPrefix()
		lead, err := ens.Leader(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		a, b := (lead+1)%3, (lead+2)%3
		hconn, hev := connect(t, ens, a)
		drain(hev)
		holder := mustLock(t, newMutex(t, newSession(t, hconn, recipe.WithPrefix(prefix)), "leader"))
		wconn, wev := connect(t, ens, b)
		drain(wev)
		waiter := newMutex(t, newSession(t, wconn, recipe.WithPrefix(prefix)), "leader")
		res := lockAsync(testCtx(t), waiter)
		waitEntries(t, admin, prefix+"/leader", 2)

		if err := ens.Kill(lead); err != nil {
			t.Fatal(err)
		}
		if _, err := ens.Leader(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		// A leader change is no reason to give up a lock: the sessions
		// live on, on the surviving servers.
		if err := holder.Err(); err != nil {
			t.Fatalf("holder lost the lock on a leader change: %v", err)
		}
		select {
		case r := <-res:
			t.Fatalf("the waiter returned (err %v) while the lock is held", r.Err)
		default:
		}
		mustUnlock(t, holder)
		r := recv(t, res, "the waiter under the new leader")
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		if !r.Lease.Token().Newer(holder.Token()) {
			t.Fatalf("token %v not newer than %v", r.Lease.Token(), holder.Token())
		}
		mustUnlock(t, r.Lease)
		if err := ens.Restart(testCtx(t), lead); err != nil {
			t.Fatal(err)
		}
		// Through the old leader, back as a follower, tokens keep growing.
		oconn, oev := connect(t, ens, lead)
		drain(oev)
		l := mustLock(t, newMutex(t, newSession(t, oconn, recipe.WithPrefix(prefix)), "leader"))
		if !l.Token().Newer(r.Lease.Token()) {
			t.Fatalf("token %v after the restart not newer than %v", l.Token(), r.Lease.Token())
		}
		mustUnlock(t, l)
	})

	t.Run("WaiterExpiredNeverAcquires", func(t *testing.T) {
		prefix := newPrefix()
		hconn, hev := connect(t, ens, 0)
		drain(hev)
		holder := mustLock(t, newMutex(t, newSession(t, hconn, recipe.WithPrefix(prefix)), "wexp"))
		wconn, wev := connect(t, ens, 1)
		drain(wev)
		ws := newSession(t, wconn, recipe.WithPrefix(prefix))
		res := lockAsync(testCtx(t), newMutex(t, ws, "wexp"))
		waitEntries(t, admin, prefix+"/wexp", 2)
		if err := ens.ExpireSession(testCtx(t), wconn); err != nil {
			t.Fatal(err)
		}
		r := recv(t, res, "the expired waiter's Lock")
		if r.Err == nil {
			t.Fatal("Lock reported acquired after its session expired")
		}
		if !errors.Is(r.Err, distlock.ErrSessionExpired) && !errors.Is(r.Err, distlock.ErrEntryGone) {
			t.Fatalf("Lock: %v, want ErrSessionExpired or ErrEntryGone", r.Err)
		}
		recv(t, ws.Done(), "the waiter session's Done")
		if !errors.Is(ws.Err(), distlock.ErrSessionExpired) {
			t.Fatalf("session Err %v, want ErrSessionExpired", ws.Err())
		}
		if holder.Err() != nil {
			t.Fatalf("holder lost the lock: %v", holder.Err())
		}
		if es := entries(t, admin, prefix+"/wexp"); len(es) != 1 {
			t.Fatalf("entries %v, want the holder's only", es)
		}
		mustUnlock(t, holder)
	})

	t.Run("HolderExpired", func(t *testing.T) {
		prefix := newPrefix()
		hconn, hev := connect(t, ens, 0)
		drain(hev)
		hs := newSession(t, hconn, recipe.WithPrefix(prefix))
		holder := mustLock(t, newMutex(t, hs, "hexp"))
		wconn, wev := connect(t, ens, 2)
		drain(wev)
		res := lockAsync(testCtx(t), newMutex(t, newSession(t, wconn, recipe.WithPrefix(prefix)), "hexp"))
		waitEntries(t, admin, prefix+"/hexp", 2)
		if err := ens.ExpireSession(testCtx(t), hconn); err != nil {
			t.Fatal(err)
		}
		recv(t, holder.Done(), "the holder's Done")
		if err := holder.Err(); !errors.Is(err, distlock.ErrLost) || !errors.Is(err, distlock.ErrSessionExpired) {
			t.Fatalf("holder Err %v, want ErrLost and ErrSessionExpired", err)
		}
		recv(t, hs.Done(), "the holder session's Done")
		r := recv(t, res, "successor")
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		if !r.Lease.Token().Newer(holder.Token()) {
			t.Fatalf("successor token %v not newer than %v", r.Lease.Token(), holder.Token())
		}
		if err := holder.Unlock(testCtx(t)); !errors.Is(err, distlock.ErrLost) {
			t.Fatalf("Unlock of the lost lock: %v, want ErrLost", err)
		}
		if r.Lease.Err() != nil {
			t.Fatalf("the lost holder's Unlock hurt the successor: %v", r.Lease.Err())
		}
		mustUnlock(t, r.Lease)
	})

	t.Run("DropConnectionKeepsLock", func(t *testing.T) {
		prefix := newPrefix()
		hconn, hev := connect(t, ens)
		hs := newSession(t, hconn, recipe.WithPrefix(prefix))
		m := newMutex(t, hs, "drop")
		holder := mustLock(t, m)
		wconn, wev := connect(t, ens)
		drain(wev)
		wm := newMutex(t, newSession(t, wconn, recipe.WithPrefix(prefix)), "drop")
		res := lockAsync(testCtx(t), wm)
		waitEntries(t, admin, prefix+"/drop", 2)
		if err := ens.DropConnection(hconn); err != nil {
			t.Fatal(err)
		}
		awaitState(t, hev, zk.StateDisconnected)
		awaitState(t, hev, zk.StateHasSession)
		drain(hev)
		if hconn.SessionID() != hs.ID() {
			t.Fatalf("reconnected with session %#x, want %#x", hconn.SessionID(), hs.ID())
		}
		if holder.Err() != nil || hs.Err() != nil {
			t.Fatalf("after a reconnect within the session: lease %v, session %v", holder.Err(), hs.Err())
		}
		select {
		case r := <-res:
			t.Fatalf("waiter returned (%v) while the lock is held", r.Err)
		default:
		}
		// The held lock still works: a TryLock of the same lock loses, and
		// the lock's own-node watch survived (Unlock hands it on).
		if _, err := m.TryLock(testCtx(t)); !errors.Is(err, distlock.ErrLocked) {
			t.Fatalf("TryLock while held: %v, want ErrLocked", err)
		}
		mustUnlock(t, holder)
		r := recv(t, res, "successor")
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		if !r.Lease.Token().Newer(holder.Token()) {
			t.Fatalf("successor token %v not newer than %v", r.Lease.Token(), holder.Token())
		}
		mustUnlock(t, r.Lease)
	})

	t.Run("PartitionedHolderHearsFirst", func(t *testing.T) {
		prefix := newPrefix()
		lead, err := ens.Leader(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		f, other := (lead+1)%3, (lead+2)%3
		hconn, hev := connect(t, ens, f)
		drain(hev)
		hs := newSession(t, hconn, recipe.WithPrefix(prefix))
		holder := mustLock(t, newMutex(t, hs, "cut"))
		wconn, wev := connect(t, ens, other)
		drain(wev)
		res := lockAsync(testCtx(t), newMutex(t, newSession(t, wconn, recipe.WithPrefix(prefix)), "cut"))
		waitEntries(t, admin, prefix+"/cut", 2)

		defer ens.Heal(f)
		if err := ens.Cut(f); err != nil {
			t.Fatal(err)
		}
		r := recv(t, res, "successor")
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		// The holder's Done closed before the successor's Lock returned.
		select {
		case <-holder.Done():
		default:
			t.Fatal("the successor acquired before the partitioned holder was told it lost the lock")
		}
		if err := holder.Err(); !errors.Is(err, distlock.ErrLost) || !errors.Is(err, distlock.ErrSessionExpired) {
			t.Fatalf("holder Err %v, want ErrLost and ErrSessionExpired", err)
		}
		if !r.Lease.Token().Newer(holder.Token()) {
			t.Fatalf("successor token %v not newer than %v", r.Lease.Token(), holder.Token())
		}
		ens.Heal(f)
		mustUnlock(t, r.Lease)
	})
}
