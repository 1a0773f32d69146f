package gocronlock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
	"github.com/go-co-op/gocron/v2"
)

// Errors of NewLocker, besides distlock.ErrNilClient for a Backend
// without a session.
var (
	// ErrInvalidOption reports a period, mode, clock, timeout, wait or
	// retention NewLocker cannot work with. It is distlock.ErrInvalidOption.
	ErrInvalidOption = distlock.ErrInvalidOption
	// ErrTTLTooLong reports, in AtLeastOnce mode, a session TTL not
	// shorter than the time a slot's runs wait for its lock (the period,
	// or WithWait's bound): a run killed mid-slot would hold the slot's
	// lock until the slot ended, and nobody could run it again.
	ErrTTLTooLong = errors.New("session TTL too long for the period")
)

// Backend is what a Locker takes locks and markers from: a lock and its
// marker store for a name, on one session.
type Backend struct {
	// Mutex returns the lock called name.
	Mutex func(name string) (distlock.Locker, error)
	// Marks returns the marker store of lock name.
	Marks func(name string) (distlock.SlotMarks, error)
	// TTL is the session's TTL (etcd's lease TTL, ZooKeeper's negotiated
	// session timeout): how long a killed holder's entry outlives it.
	// NewLocker checks it against the period in AtLeastOnce mode; 0
	// (unknown) skips the check.
	TTL time.Duration
}

// Etcd is the Backend of an etcdlock session; a nil session is refused by
// NewLocker.
func Etcd(s *etcdlock.Session) Backend {
	if s == nil {
		return Backend{}
	}
	return Backend{
		Mutex: func(name string) (distlock.Locker, error) { return recipe.NewMutex(s, name) },
		Marks: func(name string) (distlock.SlotMarks, error) { return recipe.NewMarks(s, name) },
		TTL:   s.TTL(),
	}
}

// ZooKeeper is the Backend of a zklock session; a nil session is refused
// by NewLocker.
func ZooKeeper(s *zklock.Session) Backend {
	if s == nil {
		return Backend{}
	}
	return Backend{
		Mutex: func(name string) (distlock.Locker, error) { return recipe.NewMutex(s, name) },
		Marks: func(name string) (distlock.SlotMarks, error) { return recipe.NewMarks(s, name) },
		TTL:   s.TTL(),
	}
}

// Option configures a Locker.
type Option func(*Locker)

// WithMode sets whether a slot's marker is written before the job runs
// (distlock.AtMostOnce) or after it (distlock.AtLeastOnce, the default).
func WithMode(m distlock.OnceMode) Option { return func(l *Locker) { l.mode = m } }

// WithClock sets the clock the slot is read from (default time.Now): for
// tests that simulate clock skew.
func WithClock(now func() time.Time) Option { return func(l *Locker) { l.now = now } }

// WithPrefix sets the first segment of the locks' names (default
// "gocron"): job key K is lock PREFIX/K, escaped (see LockName).
func WithPrefix(p string) Option { return func(l *Locker) { l.prefix = p } }

// WithRetention sets how long a slot's marker is kept (default 24 hours,
// and never less than 100 periods): the Locker deletes older ones now and
// then (at most once a minute and per Locker, after marking a slot), so
// that a job that runs every second does not pile up markers. 0 keeps
// them all.
func WithRetention(d time.Duration) Option { return func(l *Locker) { l.retention = d } }

// WithTimeout bounds each store request of Lock and Unlock (default
// distlock.DefaultOnceTimeout).
func WithTimeout(d time.Duration) Option { return func(l *Locker) { l.timeout = d } }

// WithWait bounds how long Lock waits for the slot's lock (default: until
// the slot ends, when the next slot is due). A bound shorter than the
// session's TTL gives up on a killed holder before its entry is gone, so
// NewLocker refuses it in AtLeastOnce mode.
func WithWait(d time.Duration) Option { return func(l *Locker) { l.wait = d } }

// Locker is a gocron.Locker that runs each job once per slot across every
// scheduler that uses a Locker of the same period on the same store (see
// the package doc).
type Locker struct {
	b         Backend
	period    time.Duration
	mode      distlock.OnceMode
	now       func() time.Time
	prefix    string
	timeout   time.Duration
	wait      time.Duration // 0: until the slot ends
	retention time.Duration

	mu     sync.Mutex
	pruned map[string]time.Time // lock name: when its markers were last pruned
}

// pruner is a marker store that can delete old markers (etcdlock's and
// zklock's Marks).
type pruner interface {
	Prune(ctx context.Context, before string) (int, error)
}

var _ gocron.Locker = (*Locker)(nil)

// NewLocker returns a Locker on b whose slots are period long (at least a
// second: slots are named to the second).
//
// In AtLeastOnce mode it refuses (ErrTTLTooLong) a session TTL b.TTL that
// is not shorter than the period, or than WithWait's bound if shorter: a
// run killed mid-slot holds the slot's lock for about a TTL after its
// death, and the other instances wait for it only until the slot ends.
// Pick a TTL well below the period less the job's run time (see the
// package doc). AtMostOnce never reruns a slot, so it has no such bound.
func NewLocker(b Backend, period time.Duration, opts ...Option) (*Locker, error) {
	l := &Locker{b: b, period: period, mode: distlock.AtLeastOnce, now: time.Now, prefix: "gocron", timeout: distlock.DefaultOnceTimeout,
		retention: 24 * time.Hour, pruned: map[string]time.Time{}}
	for _, o := range opts {
		o(l)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("gocronlock: %w: %s", ErrInvalidOption, fmt.Sprintf(format, args...))
	}
	switch {
	case b.Mutex == nil || b.Marks == nil:
		return nil, fmt.Errorf("gocronlock: %w: Backend without Mutex or Marks (nil session?)", distlock.ErrNilClient)
	case period < time.Second || period%time.Second != 0:
		return nil, bad("period %v: want whole seconds, at least one", period)
	case l.mode != distlock.AtLeastOnce && l.mode != distlock.AtMostOnce:
		return nil, bad("unknown mode %q (want %q or %q)", l.mode, distlock.AtLeastOnce, distlock.AtMostOnce)
	case l.now == nil:
		return nil, bad("nil clock")
	case l.timeout <= 0:
		return nil, bad("timeout %v: want a positive duration", l.timeout)
	case l.wait < 0:
		return nil, bad("wait %v: want a positive duration (or none: until the slot ends)", l.wait)
	case l.retention < 0:
		return nil, bad("retention %v: want 0 (keep all) or more", l.retention)
	}
	if bound := l.waitBound(); l.mode == distlock.AtLeastOnce && b.TTL >= bound {
		return nil, fmt.Errorf("gocronlock: %w: session TTL %v, slots wait %v for a holder: a run killed mid-slot could not be rerun before the slot ends; make the session with a TTL below %v",
			ErrTTLTooLong, b.TTL, bound, bound)
	}
	if l.retention > 0 {
		l.retention = max(l.retention, 100*period)
	}
	if err := distlock.ValidateName(l.prefix); err != nil {
		return nil, fmt.Errorf("gocronlock: prefix: %w", err)
	}
	return l, nil
}

// waitBound is the longest a Lock waits for the slot's lock: the period,
// or WithWait's bound if shorter.
func (l *Locker) waitBound() time.Duration {
	if l.wait > 0 {
		return min(l.wait, l.period)
	}
	return l.period
}

// Slot returns the slot t falls in: t rounded to the nearest multiple of
// the period, in UTC, to the second (e.g. 2026-12-01T08:00:00Z).
func (l *Locker) Slot(t time.Time) string {
	return t.UTC().Round(l.period).Format("2006-01-02T15:04:05Z")
}

// LockName returns the job lock of key, which keeps the job's slot
// markers (each run holds its slot's lock, distlock.SlotLockName of this
// name and the slot): the prefix, '/', and the key with every byte but
// ASCII letters, digits and '-' written as '_' and two hex digits (so any
// key maps to a valid, distinct name); a key whose escaped form is too
// long is named by its SHA-256 instead.
func (l *Locker) LockName(key string) string {
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		c := key[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "_%02x", c)
	}
	name := l.prefix + "/" + b.String()
	if key == "" || len(name) > distlock.MaxNameLen {
		sum := sha256.Sum256([]byte(key))
		name = l.prefix + "/sha256-" + hex.EncodeToString(sum[:])
	}
	return name
}

// Lock takes the lock of job key's current slot (distlock.SlotLockName of
// LockName(key) and the slot), waiting for it until the slot ends — when
// the next slot is due, by the Locker's clock — or WithWait's bound if
// sooner, and claims the slot (gocron.Locker). Holding the lock, it reads
// the slot's marker: a marker means the slot's run finished (or, in
// AtMostOnce mode, started) on some instance, and Lock releases the lock
// and fails with a *distlock.SlotDoneError; no marker means nobody ran
// the slot, or its runner died or failed before marking it (AtLeastOnce),
// and Lock returns the held lock so that gocron runs the job.
//
// So a runner killed mid-run delays its slot until its session's TTL
// ends its entry, and then exactly one waiting instance (the lock's FIFO
// queue hands it on, and the marker is checked under it) runs the slot
// again; the next slot takes another lock, which the dead runner never
// held, and is not delayed.
//
// Lock fails — and gocron skips the run — when the wait ends first (an
// error wrapping distlock.ErrLocked), when the slot is done already, or
// when the store fails; it leaves nothing held then.
func (l *Locker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	name := l.LockName(key)
	now := l.now()
	slot := l.Slot(now)
	slotLock := distlock.SlotLockName(name, slot)
	// A job key may be any length (LockName hashes a long one): the
	// message shows its first 64 characters.
	fail := func(err error) error {
		return fmt.Errorf("gocronlock: job %.64q (lock %q) slot %s: %w", key, slotLock, slot, err)
	}
	mu, err := l.b.Mutex(slotLock)
	if err != nil {
		return nil, fail(err)
	}
	marks, err := l.b.Marks(name)
	if err != nil {
		return nil, fail(err)
	}
	// The slot ends when the next one is due; the wait is measured from
	// now on the Locker's clock (a skewed clock shifts both ends alike).
	end := now.UTC().Round(l.period).Add(l.period)
	wait := min(end.Sub(now), l.waitBound())
	wctx, wcancel := context.WithTimeout(ctx, wait)
	lease, err := mu.Lock(wctx)
	wcancel()
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w: waited %v, until the slot's end, for its holder: %w", distlock.ErrLocked, wait.Round(time.Millisecond), err)
		}
		return nil, fail(err)
	}
	release := func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.timeout)
		defer cancel()
		_ = lease.Unlock(uctx)
	}
	tctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	prev, err := marks.Marker(tctx, slot)
	switch {
	case err != nil:
		release()
		return nil, fail(err)
	case prev != nil:
		release()
		return nil, fail(&distlock.SlotDoneError{Name: name, Slot: slot, Marker: *prev})
	}
	lk := &lock{l: l, key: key, slot: slot, lease: lease, marks: marks}
	if l.mode == distlock.AtMostOnce {
		if err := lk.mark(tctx); err != nil {
			release()
			return nil, fail(err)
		}
	}
	return lk, nil
}

// lock is a held slot lock.
type lock struct {
	l     *Locker
	key   string
	slot  string
	lease *distlock.Lease
	marks distlock.SlotMarks
}

func (lk *lock) mark(ctx context.Context) error {
	err := lk.marks.Mark(ctx, lk.lease, distlock.SlotMarker{
		Slot: lk.slot, Token: lk.lease.Token().String(), Mode: lk.l.mode, Marked: time.Now().UTC(),
	})
	if err == nil {
		lk.l.prune(ctx, lk.marks)
	}
	return err
}

// prune deletes marks' markers older than the retention, at most once a
// minute (or period) per lock; best effort (a failure only leaves them
// for next time).
func (l *Locker) prune(ctx context.Context, marks distlock.SlotMarks) {
	p, ok := marks.(pruner)
	if !ok || l.retention == 0 {
		return
	}
	now := l.now()
	l.mu.Lock()
	last := l.pruned[marks.Name()]
	due := now.Sub(last) >= max(l.period, time.Minute) || now.Before(last)
	if due {
		l.pruned[marks.Name()] = now
	}
	l.mu.Unlock()
	if due {
		_, _ = p.Prune(ctx, l.Slot(now.Add(-l.retention)))
	}
}

// Unlock marks the slot done (AtLeastOnce; a lock lost meanwhile cannot,
// and the error says so: the slot may run again) and releases the lock
// (gocron.Lock).
func (lk *lock) Unlock(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lk.l.timeout)
	defer cancel()
	var merr error
	if lk.l.mode == distlock.AtLeastOnce {
		if err := lk.mark(ctx); err != nil && !errors.Is(err, distlock.ErrSlotDone) {
			merr = fmt.Errorf("gocronlock: job %.64q slot %s ran but is not marked done (it may run again): %w", lk.key, lk.slot, err)
		}
	}
	return errors.Join(merr, lk.lease.Unlock(ctx))
}
