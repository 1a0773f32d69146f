package qlock

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/distlock/distlock"
)

// Backend says which store a session is on: fixed when the session is
// made, by its driver's session constructor (NewState), and read from
// the session's State wherever the engine names the backend.
type Backend struct {
	// Name is the store, as errors (distlock.LockError.Backend), metrics
	// and spans name it: "etcd", "zookeeper".
	Name string
	// Pkg is the package users call, as logs name it: "etcdlock", "zklock".
	Pkg string
}

// ValidateName is distlock.ValidateName for a lock on b: its error
// names b.
func (b Backend) ValidateName(name string) error { return b.named(distlock.ValidateName(name)) }

// named sets b as the backend of err if it is a *distlock.LockError just
// made (by distlock.ValidateName) and naming none.
func (b Backend) named(err error) error {
	if le, ok := err.(*distlock.LockError); ok && le.Backend == "" {
		le.Backend = b.Name
	}
	return err
}

// State is what every session has, whatever its store: an end with a
// cause, a client-side deadline before which the store cannot have ended
// it, and background work that Close waits for. The store drivers keep
// their sessions on it; users see it through Session.
type State struct {
	backend Backend
	log     *slog.Logger
	tel     *telemetry
	holder  string // the value of the session's lock entries
	owner   uint64 // the session's ID in fencing tokens (lease ID, session ID)
	// ctx is cancelled, with the reason as cause, when the session ends.
	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup

	mu sync.Mutex
	// deadline is the client-side expiry on the monotonic clock, as the
	// drivers compute it; Deadline moves it earlier by the time the system
	// spent suspended since base.sent (see clock.go).
	deadline time.Time
	clk      clock
	// off is the boot clock's offset (see readClocks) as of the last
	// suspend seen, or of NewState.
	off time.Duration
	// base is the send time of the keepalive the deadline counts from
	// (or NewState's time), and the offset then: the suspend since is off
	// less base.off.
	base struct {
		sent time.Time
		off  time.Duration
	}
	// suspends are those seen since base.sent (see rebase).
	suspends []suspend
	off0     time.Duration // the offset at NewState
	// revocable: the session's holders follow revocation requests (see
	// distlock.RevokedError).
	revocable bool
	// lockDelay is the session's lock-delay (SetLockDelay): 0 for none.
	lockDelay time.Duration
	// slotMu guards books and every book's fields (see SlotBook).
	slotMu sync.Mutex
	// books are the session's SlotBooks, by semaphore name, while in use.
	books map[string]*SlotBook
}

// openSlots returns the session's book of semaphore name's slots for one
// more acquisition, which calls close on it when it is over. One book per
// name: the acquisitions of one session must see each other's
// reservations.
func (s *State) openSlots(name string) *SlotBook {
	s.slotMu.Lock()
	defer s.slotMu.Unlock()
	b := s.books[name]
	if b == nil {
		b = &SlotBook{st: s, name: name, reserved: map[string]bool{}}
		if s.books == nil {
			s.books = map[string]*SlotBook{}
		}
		s.books[name] = b
	}
	b.users++
	return b
}

// SetRevocable makes the session's holders follow revocation requests
// (etcdlock and zklock WithRevocable). Drivers call it before any lock is
// taken.
func (s *State) SetRevocable(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revocable = on
}

// Revocable reports whether the session's holders follow revocation
// requests.
func (s *State) Revocable() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.revocable
}

// SetLockDelay sets the session's lock-delay (etcdlock and zklock
// WithLockDelay): how long a waiter of its Mutexes, RWMutexes and
// multi-locks holds back after the entry whose going made it the head went
// without its holder's release (see the engine's wait). Drivers' callers
// set it before any lock is taken; d is not negative.
func (s *State) SetLockDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lockDelay = d
}

// LockDelay returns the session's lock-delay; 0 for none.
func (s *State) LockDelay() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lockDelay
}

// NewState returns the state of session owner (its ID in fencing tokens)
// on backend b, whose entries hold holder, that lives until deadline
// unless extended, and reports its metrics and spans as obs says.
// Drivers embed it.
func NewState(b Backend, log *slog.Logger, holder string, owner uint64, deadline time.Time, obs Observe) *State {
	s := &State{backend: b, log: log, holder: holder, owner: owner, deadline: deadline, tel: newTelemetry(b.Name, obs), clk: currentClock()}
	// The driver's first deadline counts from a send before this call;
	// a suspend between the two is not seen (the first keepalive, sent
	// later, tells the truth).
	s.base.sent, s.off, _ = readClocks(s.clk)
	s.base.off, s.off0 = s.off, s.off
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	if _, mono := s.clk.(monoClock); !mono {
		// Nothing else may wake the session soon after a resume (the
		// drivers' timers can be a third of the TTL away): a ticker does.
		period := suspendCheck(deadline.Sub(s.base.sent))
		s.Go(func(ctx context.Context) { s.watchSuspend(ctx, period) })
	}
	return s
}

// Backend returns the store the session is on.
func (s *State) Backend() Backend { return s.backend }

// Log returns the session's logger.
func (s *State) Log() *slog.Logger { return s.log }

// Holder returns the value of the session's lock entries.
func (s *State) Holder() string { return s.holder }

// Context returns a context that ends, with the reason as its cause, when
// the session does.
func (s *State) Context() context.Context { return s.ctx }

// Err returns nil while the session lives, then why it ended.
func (s *State) Err() error {
	if s.ctx.Err() == nil {
		return nil
	}
	return context.Cause(s.ctx)
}

// Deadline returns the client-side expiry, moved earlier by the time the
// system spent suspended since the last confirmed keepalive was sent (see
// clock.go): a suspend stops the monotonic clock the deadline is on, not
// the servers'. If a suspend has put the session past its deadline,
// Deadline ends the session at once, with a *SuspendedError: it is the
// check that the drivers, the Leases and the session's own ticker make
// whenever they wake.
func (s *State) Deadline() time.Time {
	s.mu.Lock()
	now := s.observe()
	d, err := effective(s.deadline, s.sleptLocked(), now)
	s.mu.Unlock()
	if err != nil {
		s.End(err)
	}
	return d
}

// ExtendFrom moves the deadline to d if that is later, for a keepalive
// sent at sent and now confirmed, and returns the deadline (as Deadline
// returns it) as it was before. Drivers call it for every confirmed
// keepalive, whose slack (the time that was left) it records. The suspend
// that moves d earlier counts from sent (see rebase).
//
// A suspend that has put the session past its deadline ends the session
// instead, as Deadline does: the answer came too late to count (the store
// may have expired the session while the process slept).
func (s *State) ExtendFrom(sent, d time.Time) (was time.Time) {
	s.mu.Lock()
	now := s.observe()
	was, err := effective(s.deadline, s.sleptLocked(), now)
	if err == nil && d.After(s.deadline) {
		s.deadline = d
		s.rebase(sent)
	}
	s.mu.Unlock()
	if err != nil {
		s.End(err)
	}
	s.tel.confirmed(was)
	return was
}

// Extend is ExtendFrom for a keepalive whose send time is not known: a
// suspend since the previous keepalive's send counts against d.
func (s *State) Extend(d time.Time) (was time.Time) { return s.ExtendFrom(time.Time{}, d) }

// End ends the session with cause, unless it has ended already; it
// reports whether this call ended it.
func (s *State) End(cause error) bool {
	s.mu.Lock()
	first := s.ctx.Err() == nil
	s.cancel(cause)
	s.mu.Unlock()
	if first {
		s.log.Info(s.backend.Pkg+": session ended", "cause", cause)
	}
	return first
}

// Go runs f in the background until it returns; Close waits for it. f
// must return once ctx (ended with the session) is done. Once the session
// has ended, f is not started: what it would follow went with the session.
func (s *State) Go(f func(ctx context.Context)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return
	}
	s.wg.Go(func() { f(s.ctx) })
}

// Finally runs f in the background even after the session ended (a
// revoke, a last cleanup); Close waits for it.
func (s *State) Finally(f func()) { s.wg.Go(f) }

// Close ends the session as closed by its owner; the first call also runs
// release, the store's part (revoke the lease, delete the nodes). Then it
// waits for the session's background work.
func (s *State) Close(ctx context.Context, release func(ctx context.Context) error) error {
	var err error
	if s.End(distlock.ErrSessionClosed) {
		err = release(ctx)
	}
	s.wg.Wait()
	return err
}

// Session is the part of a session that users see the same on every
// store; recipe.Session, which etcdlock.Session and zklock.Session embed,
// forwards to it.
type Session struct {
	st      *State
	prefix  string
	ttl     time.Duration
	release func(ctx context.Context) error
}

// NewSession returns the user's view of a session on st: prefix as
// configured, ttl as granted or negotiated, and release the store's part
// of Close.
func NewSession(st *State, prefix string, ttl time.Duration, release func(ctx context.Context) error) Session {
	return Session{st: st, prefix: prefix, ttl: ttl, release: release}
}

// Done returns a channel closed when the session ends.
func (s *Session) Done() <-chan struct{} { return s.st.ctx.Done() }

// Err returns nil while the session lives, then why it ended: an error
// wrapping distlock.ErrSessionExpired or distlock.ErrSessionClosed (or
// distlock.ErrHistoryRewound).
func (s *Session) Err() error { return s.st.Err() }

// Deadline returns the session's client-side expiry: until then the store
// cannot have ended it (an etcd lease's keepalive, or a ZooKeeper
// session's last answered request, plus the TTL, less a safety margin).
// Past it, the session ends as expired. On Linux it is moved earlier by
// the time the system spent suspended since then (Go's clocks stop during
// a suspend, the servers' do not), and a session that a resume finds past
// it ends at once.
func (s *Session) Deadline() time.Time { return s.st.Deadline() }

// Holder returns the value stored in the session's lock entries (see
// WithHolder).
func (s *Session) Holder() string { return s.st.holder }

// Prefix returns the key prefix (etcd) or znode (ZooKeeper) under which the
// session's locks keep their queues.
func (s *Session) Prefix() string { return s.prefix }

// TTL returns how long the store keeps the session's entries after the
// last sign of life: the etcd lease's TTL as granted, the ZooKeeper
// session timeout as negotiated.
func (s *Session) TTL() time.Duration { return s.ttl }

// Close ends the session: its held locks report distlock.ErrSessionClosed
// and its entries are deleted (the etcd lease is revoked; the ZooKeeper
// nodes are deleted, the ZooKeeper session itself being the connection's).
// It waits for the session's background work. Calling Close again is a
// no-op.
func (s *Session) Close(ctx context.Context) error { return s.st.Close(ctx, s.release) }
