package distlock

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Sentinel errors. Backends wrap them in a *LockError naming the lock, so
// test them with errors.Is, not ==.
var (
	// ErrLocked is returned by TryLock when another entry holds the lock.
	ErrLocked = errors.New("lock is held by another owner")

	// ErrLost reports that a held lock may no longer be exclusively ours:
	// its entry was deleted, or its session expired or could not be
	// confirmed alive in time. Work done after this must be assumed to
	// overlap with a successor's; only fencing makes it safe.
	ErrLost = errors.New("lock lost")

	// ErrReleased is returned by Unlock on a lock that was already
	// unlocked, and is the cause of a released Lease's context.
	ErrReleased = errors.New("lock already released")

	// ErrSessionExpired reports that the session (etcd lease, ZooKeeper
	// session) that binds the lock entries ended, or that the client could
	// not confirm it alive before its conservative deadline.
	ErrSessionExpired = errors.New("session expired")

	// ErrSessionClosed reports that the session was closed by its owner.
	ErrSessionClosed = errors.New("session closed")

	// ErrEntryGone reports that a lock's entry was deleted by someone
	// other than its owner (an operator, a tool, a revoked lease) while it
	// waited or held.
	ErrEntryGone = errors.New("lock entry deleted, not by its owner (lease revoked or expired, or another client)")

	// ErrInvalidName reports a lock name that does not follow the rules of
	// ValidateName.
	ErrInvalidName = errors.New("invalid lock name")

	// ErrInvalidToken reports a token text that does not parse, or a token
	// that is not valid for the use it is put to.
	ErrInvalidToken = errors.New("invalid fencing token")

	// ErrTokenFork reports two tokens of one lock with the same sequence
	// number and different owners: two acquisitions that a cluster rebuilt
	// from scratch, or restored from a backup, issued with the same number.
	// They cannot be ordered, and a fence refuses the second one it sees
	// (fencing.ErrFork is this error).
	ErrTokenFork = errors.New("two acquisitions with the same fencing sequence number (cluster rebuilt or restored from a backup?)")

	// ErrHistoryRewound reports that the store handed a session a sequence
	// number (etcd revision, ZooKeeper zxid) not larger than one it had
	// handed the same session before: the cluster's history went back, as
	// after a restore from a backup without moving the counters on. The
	// session ends with it rather than issue a token that could equal one
	// of its earlier acquisitions'.
	ErrHistoryRewound = errors.New("store history went back (cluster restored from a backup?)")

	// ErrNilClient reports a nil client, connection or session passed to a
	// constructor.
	ErrNilClient = errors.New("nil client")

	// ErrTTLTooShort reports a session TTL too short for the keepalive to
	// keep the session alive with a safety margin.
	ErrTTLTooShort = errors.New("session TTL too short")

	// ErrPermitsMismatch reports a semaphore whose other users were made
	// with another permit count: two callers that disagree on N would
	// otherwise admit up to the larger N between them.
	ErrPermitsMismatch = errors.New("semaphore permit count differs from the one its holders and waiters use")

	// ErrInvalidPermits reports a semaphore permit count out of range (1 to
	// MaxPermits).
	ErrInvalidPermits = errors.New("invalid semaphore permit count")

	// ErrInvalidOption reports an option or constructor argument whose
	// value is out of range: a negative lock-delay, a gocronlock period
	// that is not whole seconds.
	ErrInvalidOption = errors.New("invalid option")
)

// Op names the operation a LockError is about.
type Op string

// The operations a LockError can name.
const (
	OpValidate Op = "validate" // checking a lock name (ValidateName)
	OpLock     Op = "lock"     // Lock, RLock
	OpTryLock  Op = "trylock"  // TryLock, TryRLock
	OpUnlock   Op = "unlock"   // Lease.Unlock
	OpHold     Op = "hold"     // the lock was held, then lost
	OpCampaign Op = "campaign" // Elector.Campaign
	OpProclaim Op = "proclaim" // Leadership.Proclaim
	OpResign   Op = "resign"   // Leadership.Resign
	OpHandOff  Op = "handoff"  // Leadership.HandOff
	OpLeader   Op = "leader"   // an election's Leader

	OpAcquire    Op = "acquire"    // Semaphore.Acquire
	OpTryAcquire Op = "tryacquire" // Semaphore.TryAcquire
)

// LockError says which lock an error is about, on which backend and
// during which operation. It wraps one of the sentinel errors (or a store
// error), so errors.Is and errors.As see through it.
//
// Which layer says what, for every backend: an error of an operation on a
// lock (one of the Ops: a Mutex's, RWMutex's, Election's or Semaphore's
// own calls, a held Lease's loss and Unlock, a revocation, a lock name or
// permit count a backend checks) is a *LockError, returned as it is, with
// no package prefix stacked on top. Its text names the library once, the
// backend once and the lock once:
//
//	distlock: etcd lock "ledger": hold: lock lost: session expired: ...
//	distlock: zookeeper lock "ledger": revoke: invalid revocation request: ...
//
// What follows the Op is the cause alone: where a LockError is the cause
// of another of the same lock (Resign or Proclaim after the Lease's own
// error), the inner one reads "op: cause". Backend is empty only for an
// error no backend made (ValidateName called directly), which reads
// `distlock: lock "ledger": ...`. An error that is not about an
// operation on a lock (a nil client or session, a bad option or TTL, a
// session that could not be made, an admin read such as Inspect failing)
// is the backend package's, and says so once: "etcdlock: new session:
// ...", `zklock: new mutex "ledger": ...`.
type LockError struct {
	// Backend names the store: "etcd" or "zookeeper" ("" when no backend
	// made the error).
	Backend string
	// Name is the lock's name; for a multi-lock, its names joined by "+"
	// (which no lock name contains). It is the name as given, whole, even
	// where Error cuts one longer than MaxNameLen bytes short.
	Name string
	// Op is the operation that failed; the constants above list them all.
	Op Op
	// Err is the cause.
	Err error
}

// Error says which lock, on which backend, which operation and why.
func (e *LockError) Error() string {
	return fmt.Sprintf("distlock: %s: %s: %v", e.lock(), e.Op, e.Err)
}

// lock is the lock as Error names it: `etcd lock "ledger"`, or `lock
// "ledger"` without a backend. A name longer than MaxNameLen (never a
// valid one; a multi-lock's joined names can be) shows its first 64 bytes
// and its length: `lock "aaaa…"…(5000 bytes)`.
func (e *LockError) lock() string {
	if e.Backend == "" {
		return "lock " + quoteName(e.Name)
	}
	return e.Backend + " lock " + quoteName(e.Name)
}

// Unwrap returns the cause.
func (e *LockError) Unwrap() error { return e.Err }

// quoteName quotes s (a lock name, a token's text, a slot) for an error
// message as %q does if it is at most MaxNameLen bytes long — every valid
// name appears whole — and otherwise its first 64 bytes (cut at a
// character boundary) quoted, followed by "…(N bytes)" with s's full
// length: a message must stay readable when a caller passes a 5,000-byte
// name by mistake. The errors that quote a name keep it whole in their
// fields.
func quoteName(s string) string {
	if len(s) <= quoteWhole {
		return strconv.Quote(s)
	}
	cut := 64
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s…(%d bytes)", strconv.Quote(s[:cut]), len(s))
}

// quoteWhole is MaxNameLen, which name.go (a file above this one) keeps;
// TestQuoteWhole holds the two equal.
const quoteWhole = 256
