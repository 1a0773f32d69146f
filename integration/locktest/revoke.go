package locktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
)

// Revoker is what a backend's Admin does to revoke (recipe.Admin's
// Revoke and Revocations, zklock's), on the backend's prefix.
type Revoker interface {
	// Revoke is the store's Admin.Revoke of lock name.
	Revoke(ctx context.Context, name string, r distlock.RevokeRequest) ([]distlock.Revocation, error)
	// Revocations is the store's Admin.Revocations of lock name.
	Revocations(ctx context.Context, name string) ([]distlock.Revocation, error)
}

var revokeCases = []struct {
	name string
	run  func(t *testing.T, b Backend)
}{
	{"RevokeCooperative", revokeCooperative},
	{"RevokeForcedAfterGrace", revokeForced},
	{"RevokeNotRevocable", revokeNotRevocable},
	{"RevokeFreeLock", revokeFree},
	{"RevokeBadInput", revokeBadInput},
	{"RevokeReadersAndPermits", revokeShared},
	{"RevokeRevokerStops", revokeRevokerStops},
	{"RevokeAtOnce", revokeAtOnce},
	{"RevokeForceRacesRelease", revokeForceRacesRelease},
	{"RevokeElections", revokeElections},
	{"RevokeForceShortensGrace", revokeForceShortensGrace},
}

// revokeForceShortensGrace: a holder asked with an hour's grace (its
// revoker gone) is forced at once by a later request with no grace; the
// record keeps the first request and names the one that forced it.
func revokeForceShortensGrace(t *testing.T, b Backend) {
	l := MustLock(t, mutex(t, revocable(t, b), "short"))
	ctx, cancel := context.WithCancel(Ctx(t))
	res := revokeAsync(ctx, b, "short", distlock.RevokeRequest{Reason: "later please", By: "alice", Grace: time.Hour})
	awaitRevoked(t, l, "later please")
	cancel()
	<-res
	start := time.Now()
	rv := oneRevocation(t, <-revokeAsync(Ctx(t), b, "short", distlock.RevokeRequest{Reason: "now", By: "bob", Force: true}), distlock.RevokeForced)
	if time.Since(start) > time.Minute || !rv.Again || rv.By != "alice" || rv.ForcedBy != "bob" || rv.ForceReason != "now" {
		t.Fatalf("forcing request: %+v after %v; want alice's record forced at once by bob", rv, time.Since(start))
	}
	if err := l.Unlock(Ctx(t)); !errors.Is(err, distlock.ErrLost) {
		t.Fatalf("Unlock of the forced lease: %v, want ErrLost", err)
	}
}

// revokeElections: Revoke asks an election's leader to step down, as it
// asks a lock's holder, beside the holder of the mutex of the same name;
// the leader hears it on its Done, hands over, and the record says
// released.
func revokeElections(t *testing.T, b Backend) {
	s := revocable(t, b)
	ld := MustCampaign(t, election(t, s, "both"), "leader")
	next := CampaignAsync(Ctx(t), election(t, b.Session(t), "both"), "next")
	b.WaitEntries(t, "both", 2)
	l := MustLock(t, mutex(t, b.Session(t), "both"))
	res := revokeAsync(Ctx(t), b, "both", distlock.RevokeRequest{Reason: "deploy", Grace: time.Minute, Force: true})
	Recv(t, ld.Done(), "the leader's Done after the revocation")
	var rerr *distlock.RevokedError
	if !errors.As(ld.Err(), &rerr) || rerr.Revocation.Token != ld.Token().String() {
		t.Fatalf("the revoked leader's Err: %v, want a *RevokedError for %s", ld.Err(), ld.Token())
	}
	MustResign(t, ld)
	MustUnlock(t, l)
	r := <-res
	if r.err != nil || len(r.rs) != 2 {
		t.Fatalf("Revoke of a leader and a holder: %+v, %v; want two records", r.rs, r.err)
	}
	for _, rv := range r.rs {
		if rv.Outcome != distlock.RevokeReleased {
			t.Fatalf("record %+v: want released", rv)
		}
	}
	nl := Leads(t, next, "the next candidate after the revoked leader resigned")
	if !nl.Token().Newer(ld.Token()) {
		t.Fatalf("token %v not newer than %v", nl.Token(), ld.Token())
	}
	MustResign(t, nl)
}

// revocable returns a session whose holders follow revocations.
func revocable(t *testing.T, b Backend) Session {
	return b.ObservedSession(t, Observed{Revocable: true})
}

// RevokeAsync runs b.Revoke in a goroutine.
func revokeAsync(ctx context.Context, b Backend, name string, r distlock.RevokeRequest) <-chan revoked {
	ch := make(chan revoked, 1)
	go func() {
		rs, err := b.Revoke(ctx, name, r)
		ch <- revoked{rs, err}
	}()
	return ch
}

type revoked struct {
	rs  []distlock.Revocation
	err error
}

// awaitRevoked waits for l's Done and checks that it says revoked, with
// r's reason, while the lock is still held.
func awaitRevoked(t *testing.T, l *distlock.Lease, reason string) *distlock.RevokedError {
	t.Helper()
	select {
	case <-l.Done():
	case <-Ctx(t).Done():
		t.Fatal("the revocable holder's Done did not close")
	}
	var re *distlock.RevokedError
	if err := l.Err(); !errors.As(err, &re) || !errors.Is(err, distlock.ErrRevoked) || errors.Is(err, distlock.ErrLost) {
		t.Fatalf("Err after a revocation: %v, want a *RevokedError (ErrRevoked, not ErrLost)", err)
	}
	var le *distlock.LockError
	if !errors.As(l.Err(), &le) || le.Name != l.Token().Name {
		t.Fatalf("Err %v does not name the lock %q", l.Err(), l.Token().Name)
	}
	if re.Reason != reason || re.By == "" || re.Token != l.Token().String() {
		t.Fatalf("RevokedError %+v: want reason %q, a requester, token %s", re.Revocation, reason, l.Token())
	}
	return re
}

func newFence(t *testing.T, lock string) *fencing.Memory {
	t.Helper()
	f, err := fencing.NewMemory(lock)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func oneRevocation(t *testing.T, r revoked, want distlock.RevokeOutcome) distlock.Revocation {
	t.Helper()
	if r.err != nil {
		t.Fatalf("Revoke: %v", r.err)
	}
	if len(r.rs) != 1 || r.rs[0].Outcome != want {
		t.Fatalf("Revoke returned %+v, want one revocation %s", r.rs, want)
	}
	return r.rs[0]
}

// revokeCooperative: a revocable holder sees Done close with ErrRevoked
// while it still holds (its fenced writes still go through), finishes
// and releases; the revocation ends released, the waiter acquires with a
// larger token, and the record stays.
func revokeCooperative(t *testing.T, b Backend) {
	m := mutex(t, revocable(t, b), "coop")
	l := MustLock(t, m)
	fence := newFence(t, "coop")
	if err := fence.Admit(Ctx(t), l.Token()); err != nil {
		t.Fatal(err)
	}
	waiter := LockAsync(Ctx(t), mutex(t, b.Session(t), "coop"))
	b.WaitEntries(t, "coop", 2)
	res := revokeAsync(Ctx(t), b, "coop", distlock.RevokeRequest{Reason: "deploy", By: "ops", Grace: time.Minute})
	re := awaitRevoked(t, l, "deploy")
	if re.By != "ops" || re.Grace != time.Minute || re.Force {
		t.Fatalf("RevokedError %+v: want by ops, grace 1m, not forced", re.Revocation)
	}
	// Still held: the token is still the newest, and the waiter waits.
	if err := fence.Admit(Ctx(t), l.Token()); err != nil {
		t.Fatalf("fenced write of the revoked, still holding, lease: %v", err)
	}
	select {
	case r := <-waiter:
		t.Fatalf("the waiter acquired while the revoked holder still held: %+v", r)
	default:
	}
	if err := l.Unlock(Ctx(t)); err != nil {
		t.Fatalf("Unlock of a revoked lease: %v, want nil", err)
	}
	rv := oneRevocation(t, <-res, distlock.RevokeReleased)
	if rv.Token != l.Token().String() || rv.Reason != "deploy" || rv.Ended.IsZero() || rv.Again {
		t.Fatalf("revocation %+v", rv)
	}
	w := <-waiter
	if w.Err != nil {
		t.Fatal(w.Err)
	}
	defer MustUnlock(t, w.Lease)
	if w.Lease.Token().Seq <= l.Token().Seq {
		t.Fatalf("successor token %s not after the revoked %s", w.Lease.Token(), l.Token())
	}
	if err := fence.Admit(Ctx(t), l.Token()); err != nil {
		t.Fatalf("fence before the successor wrote: %v", err)
	}
	if err := fence.Admit(Ctx(t), w.Lease.Token()); err != nil {
		t.Fatal(err)
	}
	if err := fence.Admit(Ctx(t), l.Token()); !errors.Is(err, fencing.ErrStale) {
		t.Fatalf("revoked holder's late write: %v, want ErrStale", err)
	}
	all, err := b.Revocations(Ctx(t), "coop")
	if err != nil || len(all) != 1 || all[0].Outcome != distlock.RevokeReleased || all[0].By != "ops" {
		t.Fatalf("Revocations: %+v, %v; want the one released record", all, err)
	}
}

// revokeForced: a revocable holder that does not let go is forced out
// once the grace period is over: its entry deleted, its Lease lost (Err
// goes on from ErrRevoked to ErrLost and Unlock reports the loss), the
// successor's token refuses its late writes.
func revokeForced(t *testing.T, b Backend) {
	l := MustLock(t, mutex(t, revocable(t, b), "hung"))
	waiter := LockAsync(Ctx(t), mutex(t, b.Session(t), "hung"))
	b.WaitEntries(t, "hung", 2)
	start := time.Now()
	res := revokeAsync(Ctx(t), b, "hung", distlock.RevokeRequest{Reason: "stuck", Grace: 500 * time.Millisecond, Force: true})
	awaitRevoked(t, l, "stuck")
	w := <-waiter
	if w.Err != nil {
		t.Fatal(w.Err)
	}
	defer MustUnlock(t, w.Lease)
	if time.Since(start) < 500*time.Millisecond {
		t.Fatalf("forced after %v, before the 500 ms grace", time.Since(start))
	}
	rv := oneRevocation(t, <-res, distlock.RevokeForced)
	if !rv.Force || rv.Ended.Before(rv.GraceEnds()) {
		t.Fatalf("forced revocation %+v ended before its grace", rv)
	}
	fence := newFence(t, "hung")
	if err := fence.Admit(Ctx(t), w.Lease.Token()); err != nil {
		t.Fatal(err)
	}
	if err := fence.Admit(Ctx(t), l.Token()); !errors.Is(err, fencing.ErrStale) {
		t.Fatalf("forced holder's late write: %v, want ErrStale", err)
	}
	if err := l.Unlock(Ctx(t)); !errors.Is(err, distlock.ErrLost) {
		t.Fatalf("Unlock of a forced lease: %v, want ErrLost", err)
	}
	if err := l.Err(); !errors.Is(err, distlock.ErrLost) {
		t.Fatalf("Err of a forced lease: %v, want ErrLost", err)
	}
	if got := b.Entries(t, "hung"); len(got) != 1 {
		t.Fatalf("entries after the force: %v, want the successor's only", got)
	}
}

// revokeNotRevocable: a holder whose session did not opt in hears
// nothing until the revocation is forced. Without force the revocation
// ends still-held; asking again adds nothing; forcing it then deletes the
// entry, and the holder loses the lock (ErrEntryGone).
func revokeNotRevocable(t *testing.T, b Backend) {
	l := MustLock(t, mutex(t, b.Session(t), "plain"))
	rv := oneRevocation(t, <-revokeAsync(Ctx(t), b, "plain", distlock.RevokeRequest{Reason: "first", Grace: 100 * time.Millisecond}), distlock.RevokeStillHeld)
	if rv.Force || rv.Again {
		t.Fatalf("revocation %+v", rv)
	}
	if l.Err() != nil {
		t.Fatalf("a holder that did not opt in: Err %v after a revocation, want nil", l.Err())
	}
	again := oneRevocation(t, <-revokeAsync(Ctx(t), b, "plain", distlock.RevokeRequest{Reason: "second", Grace: time.Hour}), distlock.RevokeStillHeld)
	if !again.Again || again.Reason != "first" {
		t.Fatalf("second revocation %+v: want the first's record, Again", again)
	}
	forced := oneRevocation(t, <-revokeAsync(Ctx(t), b, "plain", distlock.RevokeRequest{Reason: "third", Force: true}), distlock.RevokeForced)
	if !forced.Again || forced.Reason != "first" || !forced.Force || forced.ForceReason != "third" || forced.ForcedBy == "" {
		t.Fatalf("forced revocation %+v: want the first's record, forced by the third request", forced)
	}
	select {
	case <-l.Done():
	case <-Ctx(t).Done():
		t.Fatal("the forced holder's Done did not close")
	}
	if err := l.Err(); !errors.Is(err, distlock.ErrLost) || !errors.Is(err, distlock.ErrEntryGone) {
		t.Fatalf("forced holder's Err: %v, want ErrLost and ErrEntryGone", err)
	}
	if got := b.Entries(t, "plain"); len(got) != 0 {
		t.Fatalf("entries after the force: %v", got)
	}
	all, err := b.Revocations(Ctx(t), "plain")
	if err != nil || len(all) != 1 || all[0].Outcome != distlock.RevokeForced {
		t.Fatalf("Revocations: %+v, %v; want one forced record", all, err)
	}
	if all[0].ForceReason != "third" {
		t.Fatalf("the stored record %+v does not say who forced it", all[0])
	}
	// And once more, on the free lock: nothing.
	if rs, err := b.Revoke(Ctx(t), "plain", distlock.RevokeRequest{Reason: "free"}); err != nil || len(rs) != 0 {
		t.Fatalf("Revoke of the free lock: %+v, %v", rs, err)
	}

	// A still-held revocation whose holder then releases reads ended.
	l2 := MustLock(t, mutex(t, b.Session(t), "plain2"))
	oneRevocation(t, <-revokeAsync(Ctx(t), b, "plain2", distlock.RevokeRequest{Reason: "ask"}), distlock.RevokeStillHeld)
	MustUnlock(t, l2)
	all, err = b.Revocations(Ctx(t), "plain2")
	if err != nil || len(all) != 1 || all[0].Outcome != distlock.RevokeEnded {
		t.Fatalf("Revocations after the still-held holder released: %+v, %v; want one ended", all, err)
	}
}

// revokeFree: revoking a free lock (never used, or only waited on by
// nobody) does nothing and records nothing.
func revokeFree(t *testing.T, b Backend) {
	rs, err := b.Revoke(Ctx(t), "free", distlock.RevokeRequest{Reason: "x", Force: true})
	if err != nil || len(rs) != 0 {
		t.Fatalf("Revoke of a free lock: %+v, %v; want none, nil", rs, err)
	}
	l := MustLock(t, mutex(t, b.Session(t), "free"))
	MustUnlock(t, l)
	rs, err = b.Revoke(Ctx(t), "free", distlock.RevokeRequest{Reason: "x", Force: true})
	if err != nil || len(rs) != 0 {
		t.Fatalf("Revoke of a released lock: %+v, %v; want none, nil", rs, err)
	}
	all, err := b.Revocations(Ctx(t), "free")
	if err != nil || len(all) != 0 {
		t.Fatalf("Revocations of a lock never revoked: %+v, %v", all, err)
	}
}

func revokeBadInput(t *testing.T, b Backend) {
	for _, c := range []struct {
		name string
		r    distlock.RevokeRequest
		want error
	}{
		{"ok", distlock.RevokeRequest{}, distlock.ErrInvalidRevoke},
		{"ok", distlock.RevokeRequest{Reason: "  "}, distlock.ErrInvalidRevoke},
		{"ok", distlock.RevokeRequest{Reason: "x", Grace: -time.Second}, distlock.ErrInvalidRevoke},
		{"", distlock.RevokeRequest{Reason: "x"}, distlock.ErrInvalidName},
		{"a//b", distlock.RevokeRequest{Reason: "x"}, distlock.ErrInvalidName},
		{"@a", distlock.RevokeRequest{Reason: "x"}, distlock.ErrInvalidName},
	} {
		if _, err := b.Revoke(Ctx(t), c.name, c.r); !errors.Is(err, c.want) {
			t.Errorf("Revoke(%q, %+v): %v, want %v", c.name, c.r, err, c.want)
		}
	}
	if _, err := b.Revocations(Ctx(t), "a//b"); !errors.Is(err, distlock.ErrInvalidName) {
		t.Errorf("Revocations of a bad name: %v", err)
	}
}

// revokeShared: every holder is revoked — both readers of an RWMutex
// (not the writer waiting), both permits of a semaphore — each with a
// record of its own; and lock "a"'s records are not lock "a/b"'s.
func revokeShared(t *testing.T, b Backend) {
	s := revocable(t, b)
	rw, err := s.RWMutex("rw")
	if err != nil {
		t.Fatal(err)
	}
	r1, r2 := MustRLock(t, rw), MustRLock(t, rw)
	wrw, err := b.Session(t).RWMutex("rw")
	if err != nil {
		t.Fatal(err)
	}
	writer := LockAsync(Ctx(t), wrw)
	b.WaitEntries(t, "rw", 3)
	res := revokeAsync(Ctx(t), b, "rw", distlock.RevokeRequest{Reason: "readers", Grace: time.Minute})
	awaitRevoked(t, r1, "readers")
	awaitRevoked(t, r2, "readers")
	MustUnlock(t, r1)
	MustUnlock(t, r2)
	r := <-res
	if r.err != nil || len(r.rs) != 2 || r.rs[0].Outcome != distlock.RevokeReleased || r.rs[1].Outcome != distlock.RevokeReleased {
		t.Fatalf("Revoke of two readers: %+v, %v", r.rs, r.err)
	}
	w := <-writer
	if w.Err != nil {
		t.Fatal(w.Err)
	}
	if w.Lease.Err() != nil {
		t.Fatalf("the waiting writer was revoked: %v", w.Lease.Err())
	}
	MustUnlock(t, w.Lease)

	sem, err := s.Semaphore("sem", 2)
	if err != nil {
		t.Fatal(err)
	}
	p1, p2 := MustAcquire(t, sem), MustAcquire(t, sem)
	res = revokeAsync(Ctx(t), b, "sem", distlock.RevokeRequest{Reason: "permits", Grace: time.Minute})
	for _, p := range []*distlock.Permit{p1, p2} {
		awaitRevoked(t, p.Lease, "permits")
		MustRelease(t, p)
	}
	r = <-res
	if r.err != nil || len(r.rs) != 2 {
		t.Fatalf("Revoke of two permits: %+v, %v", r.rs, r.err)
	}
	tokens := map[string]bool{p1.Token().String(): true, p2.Token().String(): true}
	for _, rv := range r.rs {
		if rv.Outcome != distlock.RevokeReleased || !tokens[rv.Token] {
			t.Fatalf("permit revocation %+v (permits %s, %s)", rv, p1.Token(), p2.Token())
		}
	}

	// Lock "rw/sub": its own records only.
	sub := MustLock(t, mutex(t, s, "rw/sub"))
	res = revokeAsync(Ctx(t), b, "rw/sub", distlock.RevokeRequest{Reason: "sub", Grace: time.Minute})
	awaitRevoked(t, sub, "sub")
	MustUnlock(t, sub)
	oneRevocation(t, <-res, distlock.RevokeReleased)
	if all, err := b.Revocations(Ctx(t), "rw"); err != nil || len(all) != 2 {
		t.Fatalf("Revocations of rw: %+v, %v; want its two", all, err)
	}
	if all, err := b.Revocations(Ctx(t), "rw/sub"); err != nil || len(all) != 1 || all[0].Reason != "sub" {
		t.Fatalf("Revocations of rw/sub: %+v, %v; want its one", all, err)
	}
}

// revokeRevokerStops: a revoker that stops during the grace period leaves
// its record pending; once the holder is gone, Revocations says ended.
// The record outlives both sessions: the audit trail.
func revokeRevokerStops(t *testing.T, b Backend) {
	s := revocable(t, b)
	l := MustLock(t, mutex(t, s, "stop"))
	ctx, cancel := context.WithCancel(Ctx(t))
	res := revokeAsync(ctx, b, "stop", distlock.RevokeRequest{Reason: "bye", Grace: time.Hour})
	awaitRevoked(t, l, "bye")
	cancel()
	// (It may be stopped before it returns the record: the holder can
	// see the record before its revoker has rung the bell, on ZooKeeper.)
	if r := <-res; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("Revoke cancelled in its grace: %+v, %v; want context.Canceled", r.rs, r.err)
	}
	all, err := b.Revocations(Ctx(t), "stop")
	if err != nil || len(all) != 1 || all[0].Outcome != distlock.RevokePending {
		t.Fatalf("Revocations while held: %+v, %v; want one pending", all, err)
	}
	MustUnlock(t, l)
	s.Close(t)
	all, err = b.Revocations(Ctx(t), "stop")
	if err != nil || len(all) != 1 || all[0].Outcome != distlock.RevokeEnded || all[0].Reason != "bye" {
		t.Fatalf("Revocations after the holder left: %+v, %v; want one ended", all, err)
	}
}

// revokeAtOnce: revocations that come right as a lock is acquired, over
// and over, are all seen: the record may be made before the holder's
// watch is in place.
func revokeAtOnce(t *testing.T, b Backend) {
	m := mutex(t, revocable(t, b), "race")
	for i := range 10 {
		got := make(chan *distlock.Lease, 1)
		go func() {
			l, err := m.Lock(Ctx(t))
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		// The entry holds as soon as it exists (nobody else queues), maybe
		// before Lock returns and its holder follows revocations.
		b.WaitEntries(t, "race", 1)
		res := revokeAsync(Ctx(t), b, "race", distlock.RevokeRequest{Reason: "race", Grace: time.Minute, Force: i%2 == 0})
		l := <-got
		if l == nil {
			return
		}
		select {
		case <-l.Done():
		case <-Ctx(t).Done():
			t.Fatalf("round %d: the revocation was not seen", i)
		}
		if !errors.Is(l.Err(), distlock.ErrRevoked) {
			t.Fatalf("round %d: Err %v", i, l.Err())
		}
		if err := l.Unlock(Ctx(t)); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		oneRevocation(t, <-res, distlock.RevokeReleased)
	}
}

// revokeForceRacesRelease sweeps the holder's release across the end of
// the grace period, when the revoker forces: whichever comes first, the
// force never deletes the successor's entry (the waiter that the release
// or the force let in keeps the lock), and the outcome says which came
// first.
func revokeForceRacesRelease(t *testing.T, b Backend) {
	const grace = 150 * time.Millisecond
	hs := revocable(t, b)
	ws := b.Session(t)
	outcomes := map[distlock.RevokeOutcome]int{}
	for _, offset := range []time.Duration{-30, -15, -8, -4, -2, -1, 0, 1, 2, 4, 8, 15, 30} {
		offset *= time.Millisecond
		l := MustLock(t, mutex(t, hs, "sweep"))
		waiter := LockAsync(Ctx(t), mutex(t, ws, "sweep"))
		b.WaitEntries(t, "sweep", 2)
		res := revokeAsync(Ctx(t), b, "sweep", distlock.RevokeRequest{Reason: "sweep", Grace: grace, Force: true})
		release := time.AfterFunc(grace+offset, func() { _ = l.Unlock(context.Background()) })
		r := <-res
		w := <-waiter
		if release.Stop() {
			_ = l.Unlock(Ctx(t)) // forced before its time came: lost
		}
		if r.err != nil || w.Err != nil || len(r.rs) != 1 {
			t.Fatalf("offset %v: Revoke %+v, %v; waiter %v", offset, r.rs, r.err, w.Err)
		}
		outcomes[r.rs[0].Outcome]++
		// The successor's entry survived the force, whichever came first.
		if got := b.Entries(t, "sweep"); len(got) != 1 || w.Lease.Err() != nil {
			t.Fatalf("offset %v (%s): entries %v, successor's Err %v", offset, r.rs[0].Outcome, got, w.Lease.Err())
		}
		if err := w.Lease.Unlock(Ctx(t)); err != nil {
			t.Fatalf("offset %v (%s): the successor's Unlock: %v", offset, r.rs[0].Outcome, err)
		}
	}
	t.Logf("outcomes across the sweep: %v", outcomes)
}
