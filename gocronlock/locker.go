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
	"github.com/distlock/distlock/zklock"
	"github.com/go-co-op/gocron/v2"
)

// Backend is what a Locker takes locks and markers from: a lock and its
// marker store for a name, on one session.
type Backend struct {
	// Mutex returns the lock called name.
	Mutex func(name string) (distlock.Locker, error)
	// Marks returns the marker store of lock name.
	Marks func(name string) (distlock.SlotMarks, error)
}

// Etcd is the Backend of an etcdlock session.
func Etcd(s *etcdlock.Session) Backend {
	return Backend{
		Mutex: func(name string) (distlock.Locker, error) { return etcdlock.NewMutex(s, name) },
		Marks: func(name string) (distlock.SlotMarks, error) { return etcdlock.NewMarks(s, name) },
	}
}

// ZooKeeper is the Backend of a zklock session.
func ZooKeeper(s *zklock.Session) Backend {
	return Backend{
		Mutex: func(name string) (distlock.Locker, error) { return zklock.NewMutex(s, name) },
		Marks: func(name string) (distlock.SlotMarks, error) { return zklock.NewMarks(s, name) },
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
func NewLocker(b Backend, period time.Duration, opts ...Option) (*Locker, error) {
	l := &Locker{b: b, period: period, mode: distlock.AtLeastOnce, now: time.Now, prefix: "gocron", timeout: distlock.DefaultOnceTimeout,
		retention: 24 * time.Hour, pruned: map[string]time.Time{}}
	for _, o := range opts {
		o(l)
	}
	switch {
	case b.Mutex == nil || b.Marks == nil:
		return nil, fmt.Errorf("gocronlock: %w: Backend without Mutex or Marks", distlock.ErrNilClient)
	case period < time.Second || period%time.Second != 0:
		return nil, fmt.Errorf("gocronlock: period %v: want whole seconds, at least one", period)
	case l.mode != distlock.AtLeastOnce && l.mode != distlock.AtMostOnce:
		return nil, fmt.Errorf("gocronlock: unknown mode %q", l.mode)
	case l.now == nil:
		return nil, errors.New("gocronlock: nil clock")
	case l.timeout <= 0:
		return nil, fmt.Errorf("gocronlock: timeout %v: want a positive duration", l.timeout)
	case l.retention < 0:
		return nil, fmt.Errorf("gocronlock: retention %v: want 0 (keep all) or more", l.retention)
	}
	if l.retention > 0 {
		l.retention = max(l.retention, 100*period)
	}
	if err := distlock.ValidateName(l.prefix); err != nil {
		return nil, fmt.Errorf("gocronlock: prefix: %w", err)
	}
	return l, nil
}

// Slot returns the slot t falls in: t rounded to the nearest multiple of
// the period, in UTC, to the second (e.g. 2026-12-01T08:00:00Z).
func (l *Locker) Slot(t time.Time) string {
	return t.UTC().Round(l.period).Format("2006-01-02T15:04:05Z")
}

// LockName returns the lock a job key is run under: the prefix, '/', and
// the key with every byte but ASCII letters, digits and '-' written as
// '_' and two hex digits (so any key maps to a valid, distinct name); a
// key whose escaped form is too long is named by its SHA-256 instead.
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

// Lock takes job key's lock without waiting and claims its current slot
// (gocron.Locker). It fails — and gocron skips the run — when the lock is
// held (an error wrapping distlock.ErrLocked), when the slot is done
// already (a *distlock.SlotDoneError), or when the store fails; it leaves
// nothing held then.
func (l *Locker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	name := l.LockName(key)
	slot := l.Slot(l.now())
	fail := func(err error) error {
		return fmt.Errorf("gocronlock: job %q (lock %q) slot %s: %w", key, name, slot, err)
	}
	mu, err := l.b.Mutex(name)
	if err != nil {
		return nil, fail(err)
	}
	marks, err := l.b.Marks(name)
	if err != nil {
		return nil, fail(err)
	}
	tctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	lease, err := mu.TryLock(tctx)
	if err != nil {
		return nil, fail(err)
	}
	release := func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.timeout)
		defer cancel()
		_ = lease.Unlock(uctx)
	}
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

// lock is a held job lock for one slot.
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
			merr = fmt.Errorf("gocronlock: job %q slot %s ran but is not marked done (it may run again): %w", lk.key, lk.slot, err)
		}
	}
	return errors.Join(merr, lk.lease.Unlock(ctx))
}
