package locktest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
)

// OnceBackend is a store for the distlock.Once cases: a Backend whose
// sessions (OnceSession) also give slot markers, and what the cases do to
// the store behind a holder's back.
type OnceBackend interface {
	Backend
	// DeleteEntry deletes the oldest entry (the holder's) of lock name, as
	// an operator or a revoked lease would.
	DeleteEntry(t *testing.T, name string)
	// AdmitNewer makes the fence of lock name's markers admit tok, as a
	// newer holder's mark would.
	AdmitNewer(t *testing.T, name string, tok distlock.Token)
	// RawMarker returns the stored value of lock name's marker for slot
	// (at the key or znode the distlock once command has always used), and
	// whether there is one.
	RawMarker(t *testing.T, name, slot string) (string, bool)
}

// OnceSession is a Session that gives the done-markers of a lock's slots.
type OnceSession interface {
	Session
	// Marks returns the done-markers of lock name, as the store's
	// NewMarks does for this session.
	Marks(name string) (distlock.SlotMarks, error)
}

// RunOnce runs the distlock.Once cases on b, one lock name per case.
func RunOnce(t *testing.T, b OnceBackend) {
	cases := []struct {
		name string
		run  func(t *testing.T, b OnceBackend)
	}{
		{"RunsOnce", onceRunsOnce},
		{"AtMostOnceMarksFirst", onceAtMostOnce},
		{"AtLeastOnceRetriesFailure", onceRetriesFailure},
		{"EntryDeletedWhileRunning", onceEntryDeleted},
		{"SessionEndsWhileRunning", onceSessionEnds},
		{"EntryGoneCannotMark", onceEntryGoneCannotMark},
		{"StaleTokenCannotMark", onceStaleToken},
		{"Concurrent", onceConcurrent},
		{"Invalid", onceInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, b) })
	}
}

func onceSession(t *testing.T, b OnceBackend) OnceSession {
	t.Helper()
	s, ok := b.Session(t).(OnceSession)
	if !ok {
		t.Fatal("the backend's Session has no Marks")
	}
	return s
}

func marks(t *testing.T, s OnceSession, name string) distlock.SlotMarks {
	t.Helper()
	m, err := s.Marks(name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// wantDone checks that err reports slot as done by the acquisition tok.
func wantDone(t *testing.T, err error, slot string, tok distlock.Token, mode distlock.OnceMode) {
	t.Helper()
	var done *distlock.SlotDoneError
	if !errors.Is(err, distlock.ErrSlotDone) || !errors.As(err, &done) {
		t.Fatalf("err %v, want a SlotDoneError", err)
	}
	m := done.Marker
	if done.Slot != slot || m.Slot != slot || m.Token != tok.String() || m.Mode != mode || m.Holder == "" || m.Marked.IsZero() {
		t.Fatalf("done %+v, want slot %s marked by %v, %s", done, slot, tok, mode)
	}
	if !strings.Contains(err.Error(), slot) || !strings.Contains(err.Error(), tok.String()) {
		t.Errorf("message %q does not name the slot and the token", err)
	}
}

func wantNoMarker(t *testing.T, b OnceBackend, name, slot string) {
	t.Helper()
	if v, ok := b.RawMarker(t, name, slot); ok {
		t.Fatalf("slot %s of lock %q has a marker: %s", slot, name, v)
	}
}

func onceRunsOnce(t *testing.T, b OnceBackend) {
	ctx := Ctx(t)
	s := onceSession(t, b)
	const name, slot = "once/runs", "2026-11-30"
	m, mk := mutex(t, s, name), marks(t, s, name)
	ran, err := distlock.Once(ctx, m, mk, slot, func(context.Context) error { return nil })
	if !ran || err != nil {
		t.Fatalf("first Once: ran %v, err %v", ran, err)
	}
	got, err := mk.Marker(ctx, slot)
	if err != nil || got == nil {
		t.Fatalf("Marker: %+v, %v", got, err)
	}
	tok, err := distlock.ParseToken(got.Token)
	if err != nil || tok.Name != name || got.Slot != slot || got.Mode != distlock.AtLeastOnce || got.Holder == "" {
		t.Fatalf("marker %+v (%v), want one of lock %q's tokens", got, err, name)
	}
	if v, ok := b.RawMarker(t, name, slot); !ok || !strings.Contains(v, `"`+tok.String()+`"`) || !strings.Contains(v, `"at-least-once"`) {
		t.Fatalf("stored marker %q (present %v), want one with token %v", v, ok, tok)
	}

	// Another session (another instance) finds it done.
	s2 := onceSession(t, b)
	ran, err = distlock.Once(ctx, mutex(t, s2, name), marks(t, s2, name), slot, func(context.Context) error {
		t.Error("fn ran for a done slot")
		return nil
	})
	if ran {
		t.Fatal("ran for a done slot")
	}
	wantDone(t, err, slot, tok, distlock.AtLeastOnce)
	if len(b.Entries(t, name)) != 0 {
		t.Fatal("Once left the lock held")
	}

	// The next slot runs.
	ran, err = distlock.Once(ctx, m, mk, "2026-12-01", func(context.Context) error { return nil })
	if !ran || err != nil {
		t.Fatalf("next slot: ran %v, err %v", ran, err)
	}
}

func onceAtMostOnce(t *testing.T, b OnceBackend) {
	ctx := Ctx(t)
	s := onceSession(t, b)
	const name, slot = "once/amo", "m1"
	m, mk := mutex(t, s, name), marks(t, s, name)
	errBoom := errors.New("boom")
	lease := MustLock(t, m)
	ran, err := distlock.OnceHeld(ctx, lease, mk, slot, func(ctx context.Context) error {
		// The marker is there before fn runs.
		got, err := mk.Marker(ctx, slot)
		if err != nil || got == nil || got.Mode != distlock.AtMostOnce || got.Token != lease.Token().String() {
			t.Errorf("marker while fn runs: %+v, %v; want the at-most-once one", got, err)
		}
		return errBoom
	}, distlock.WithOnceMode(distlock.AtMostOnce), distlock.WithOnceHolder("test holder"))
	if !ran || err != errBoom {
		t.Fatalf("OnceHeld: ran %v, err %v; want fn's error as it is", ran, err)
	}
	if lease.Err() != nil {
		t.Fatalf("OnceHeld released the lease: %v", lease.Err())
	}
	MustUnlock(t, lease)
	if v, ok := b.RawMarker(t, name, slot); !ok || !strings.Contains(v, `"test holder"`) {
		t.Fatalf("marker %q (present %v), want the holder given", v, ok)
	}
	// A failed at-most-once run counts as done, in either mode.
	for _, mode := range []distlock.OnceMode{distlock.AtMostOnce, distlock.AtLeastOnce} {
		ran, err := distlock.Once(ctx, m, mk, slot, func(context.Context) error {
			t.Error("fn ran again")
			return nil
		}, distlock.WithOnceMode(mode))
		if ran {
			t.Fatal("ran again")
		}
		wantDone(t, err, slot, lease.Token(), distlock.AtMostOnce)
	}
}

func onceRetriesFailure(t *testing.T, b OnceBackend) {
	ctx := Ctx(t)
	s := onceSession(t, b)
	const name, slot = "once/retry", "f1"
	m, mk := mutex(t, s, name), marks(t, s, name)
	errBoom := errors.New("boom")
	ran, err := distlock.Once(ctx, m, mk, slot, func(context.Context) error { return errBoom })
	if !ran || !errors.Is(err, errBoom) {
		t.Fatalf("failing fn: ran %v, err %v", ran, err)
	}
	wantNoMarker(t, b, name, slot)
	runs := 0
	ran, err = distlock.Once(ctx, m, mk, slot, func(context.Context) error { runs++; return nil })
	if !ran || err != nil || runs != 1 {
		t.Fatalf("retry: ran %v, err %v, %d runs", ran, err, runs)
	}
	if _, ok := b.RawMarker(t, name, slot); !ok {
		t.Fatal("no marker after the successful retry")
	}
}

// wantLostUnmarked checks the error of a run whose lock was lost before
// the marker.
func wantLostUnmarked(t *testing.T, b OnceBackend, name, slot string, ran bool, err error) {
	t.Helper()
	var oe *distlock.OnceError
	if !ran || !errors.Is(err, distlock.ErrLost) || !errors.As(err, &oe) || oe.Op != distlock.OpMark || !oe.Ran || oe.Name != name || oe.Slot != slot {
		t.Fatalf("ran %v, err %v (%+v); want a OnceError that fn ran, at OpMark, matching ErrLost", ran, err, oe)
	}
	if !strings.Contains(err.Error(), "NOT marked") || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), slot) {
		t.Errorf("message %q: want the lock, the slot and that it is not marked", err)
	}
	wantNoMarker(t, b, name, slot)
}

func onceEntryDeleted(t *testing.T, b OnceBackend) {
	ctx := Ctx(t)
	s := onceSession(t, b)
	const name, slot = "once/deleted", "d1"
	m, mk := mutex(t, s, name), marks(t, s, name)
	ran, err := distlock.Once(ctx, m, mk, slot, func(fctx context.Context) error {
		b.DeleteEntry(t, name)
		select {
		case <-fctx.Done():
		case <-ctx.Done():
			t.Fatal("fn's context not cancelled when the lock's entry was deleted")
		}
		if !errors.Is(context.Cause(fctx), distlock.ErrLost) {
			t.Errorf("fn's context's cause %v, want ErrLost", context.Cause(fctx))
		}
		return nil // as a fn that finished its work regardless
	})
	wantLostUnmarked(t, b, name, slot, ran, err)
}

func onceSessionEnds(t *testing.T, b OnceBackend) {
	ctx := Ctx(t)
	s := onceSession(t, b)
	const name, slot = "once/ended", "e1"
	m, mk := mutex(t, s, name), marks(t, s, name)
	lease := MustLock(t, m)
	ran, err := distlock.OnceHeld(ctx, lease, mk, slot, func(fctx context.Context) error {
		s.End(t)
		select {
		case <-fctx.Done():
		case <-ctx.Done():
			t.Fatal("fn's context not cancelled when the session ended")
		}
		return nil
	})
	wantLostUnmarked(t, b, name, slot, ran, err)
}

// onceEntryGoneCannotMark: a holder whose entry is gone cannot mark, even
// before it noticed (the store's own check, in the marker's transaction).
func onceEntryGoneCannotMark(t *testing.T, b OnceBackend) {
	ctx := Ctx(t)
	s := onceSession(t, b)
	const name, slot = "once/gone", "g1"
	lease := MustLock(t, mutex(t, s, name))
	b.DeleteEntry(t, name)
	err := marks(t, s, name).Mark(ctx, lease, distlock.SlotMarker{Slot: slot, Token: lease.Token().String(), Mode: distlock.AtLeastOnce})
	if !errors.Is(err, distlock.ErrLost) {
		t.Fatalf("mark after the entry was deleted: %v, want ErrLost", err)
	}
	wantNoMarker(t, b, name, slot)
}

func onceStaleToken(t *testing.T, b OnceBackend) {
	ctx := Ctx(t)
	s := onceSession(t, b)
	const name, slot = "once/stale", "s1"
	m, mk := mutex(t, s, name), marks(t, s, name)
	lease := MustLock(t, m)
	defer MustUnlock(t, lease)
	newer := distlock.Token{Name: name, Seq: lease.Token().Seq + 1000, Owner: lease.Token().Owner}
	b.AdmitNewer(t, name, newer)
	ran, err := distlock.OnceHeld(ctx, lease, mk, slot, func(context.Context) error { return nil })
	if !errors.Is(err, fencing.ErrStale) {
		t.Fatalf("err %v, want fencing.ErrStale too", err)
	}
	wantLostUnmarked(t, b, name, slot, ran, err)
	// At most once: refused before fn runs.
	ran, err = distlock.OnceHeld(ctx, lease, mk, slot, func(context.Context) error {
		t.Error("fn ran without a marker")
		return nil
	}, distlock.WithOnceMode(distlock.AtMostOnce))
	var oe *distlock.OnceError
	if ran || !errors.Is(err, distlock.ErrLost) || !errors.As(err, &oe) || oe.Ran || oe.Op != distlock.OpMark {
		t.Fatalf("at most once: ran %v, err %v; want not run, ErrLost", ran, err)
	}
	if !strings.Contains(err.Error(), "was not run") {
		t.Errorf("message %q: want that fn was not run", err)
	}
	wantNoMarker(t, b, name, slot)
}

func onceConcurrent(t *testing.T, b OnceBackend) {
	ctx := Ctx(t)
	const name, slot, n = "once/concurrent", "c1", 3
	var (
		runs atomic.Int32
		wg   sync.WaitGroup
	)
	// The first fn to run waits until every other instance is queued
	// behind it, so that they all contend for the same slot.
	queued := make(chan struct{})
	go func() {
		b.WaitEntries(t, name, n)
		close(queued)
	}()
	type res struct {
		ran bool
		err error
	}
	results := make(chan res, n)
	for range n {
		s := onceSession(t, b)
		m, mk := mutex(t, s, name), marks(t, s, name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ran, err := distlock.Once(ctx, m, mk, slot, func(context.Context) error {
				runs.Add(1)
				select {
				case <-queued:
				case <-ctx.Done():
				}
				return nil
			})
			results <- res{ran, err}
		}()
	}
	wg.Wait()
	close(results)
	ran, done := 0, 0
	for r := range results {
		switch {
		case r.ran && r.err == nil:
			ran++
		case !r.ran && errors.Is(r.err, distlock.ErrSlotDone):
			done++
		default:
			t.Errorf("ran %v, err %v", r.ran, r.err)
		}
	}
	if runs.Load() != 1 || ran != 1 || done != n-1 {
		t.Fatalf("fn ran %d times (%d ran, %d found it done), want once", runs.Load(), ran, done)
	}
}

func onceInvalid(t *testing.T, b OnceBackend) {
	ctx := Ctx(t)
	s := onceSession(t, b)
	const name = "once/invalid"
	m, mk := mutex(t, s, name), marks(t, s, name)
	fn := func(context.Context) error {
		t.Error("fn ran")
		return nil
	}
	wantValidate := func(what string, ran bool, err error, is error) {
		t.Helper()
		var oe *distlock.OnceError
		if ran || !errors.As(err, &oe) || oe.Op != distlock.OpValidate || is != nil && !errors.Is(err, is) {
			t.Errorf("%s: ran %v, err %v; want a OnceError at OpValidate", what, ran, err)
		}
	}
	ran, err := distlock.Once(ctx, nil, mk, "s", fn)
	wantValidate("nil Locker", ran, err, distlock.ErrNilClient)
	ran, err = distlock.Once(ctx, m, nil, "s", fn)
	wantValidate("nil marks", ran, err, distlock.ErrNilClient)
	ran, err = distlock.Once(ctx, m, mk, "a/b", fn)
	wantValidate("bad slot", ran, err, distlock.ErrInvalidSlot)
	ran, err = distlock.Once(ctx, m, mk, "s", nil)
	wantValidate("nil fn", ran, err, nil)
	ran, err = distlock.Once(ctx, mutex(t, s, "once/other"), mk, "s", fn)
	wantValidate("another lock's Locker", ran, err, nil)
	other := MustLock(t, mutex(t, s, "once/other"))
	defer MustUnlock(t, other)
	ran, err = distlock.OnceHeld(ctx, other, mk, "s", fn)
	wantValidate("another lock's lease", ran, err, nil)
	ran, err = distlock.OnceHeld(ctx, nil, mk, "s", fn)
	wantValidate("nil lease", ran, err, nil)
	ran, err = distlock.Once(ctx, m, mk, "s", fn, distlock.WithOnceMode("sometimes"))
	wantValidate("unknown mode", ran, err, nil)
	if len(b.Entries(t, name)) != 0 {
		t.Error("a refused Once left an entry")
	}
	if err := mk.Mark(ctx, other, distlock.SlotMarker{Slot: "s"}); err == nil {
		t.Error("Mark with another lock's lease succeeded")
	}
	if _, err := mk.Marker(ctx, "a/b"); !errors.Is(err, distlock.ErrInvalidSlot) {
		t.Errorf("Marker of a bad slot: %v", err)
	}
}
