package distlock

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Revoking a holder: an operator's way to take a lock from a holder that
// hangs, in two phases. Deleting a holder's entry blindly is dangerous: a
// holder that is merely slow goes on working beside its successor. So a
// revocation first asks (a record the holder sees, beside the lock's
// queue), waits a grace period for the holder to finish and release, and
// only then, if asked to force, deletes the holder's entry. The successor's
// larger token makes fences refuse whatever the revoked holder writes
// late; the record stays as an audit trail.
//
// Holders opt in, per session (etcdlock.WithRevocable,
// zklock.WithRevocable): a revocable holder's Lease sees Done close with a
// *RevokedError (errors.Is(err, ErrRevoked)) and is expected to finish its
// step and Unlock. The lock is still held then: its token is still the
// newest, and fenced writes still succeed until the Unlock or the forced
// delete. A session that has not opted in pays nothing, and its holders
// learn of a revocation only when it is forced (ErrEntryGone). Opting in
// costs each held lock one watch (etcd) or one read (ZooKeeper).
//
// The backends' Admin carries it out (recipe.Admin.Revoke,
// recipe.Admin.Revoke), and its Revocations lists the records.

// ErrRevoked is the cause of a revocable Lease's Done when an operator
// asked its holder to let go (see RevokedError). The lock is still held:
// finish, then Unlock, before the revocation's grace period ends.
var ErrRevoked = errors.New("lock revoked by an operator: finish and release")

// ErrInvalidRevoke reports a revocation request that is not valid: no
// reason, or a negative grace period.
var ErrInvalidRevoke = errors.New("invalid revocation request")

// OpRevoke names a revocation in a LockError.
const OpRevoke Op = "revoke"

// RevokeRequest is what an operator asks of a lock's holders.
type RevokeRequest struct {
	// Reason says why, for the holder and the audit trail. Required.
	Reason string
	// By says who asks; empty means the user, host and process ID of the
	// caller: "user@host pid N".
	By string
	// Grace is how long the holders have to release before the revocation
	// is forced (Force) or given up on. Zero asks and, with Force, deletes
	// at once.
	Grace time.Duration
	// Force deletes the entries of holders that have not released once
	// the grace period is over. Without it a revocation only asks.
	Force bool
	// Clients are the other clients (QueueEntry.Client: ClientCurator,
	// ClientKazoo, ...) whose holders of the lock are revoked too. They
	// follow no revocation record, so they cannot be asked: their
	// entries are deleted once the grace period is over, which needs
	// Force, and they do not learn of it (their client does not watch
	// its own entry): the lock's next holder may start while they still
	// believe they hold, and only a fence stops their late writes. By
	// default other clients' entries are left alone.
	Clients []string
}

// Validate reports an error wrapping ErrInvalidRevoke if r is not a
// request Revoke accepts.
func (r RevokeRequest) Validate() error {
	switch {
	case strings.TrimSpace(r.Reason) == "":
		return fmt.Errorf("%w: a reason is required (it goes to the holder and the audit record)", ErrInvalidRevoke)
	case r.Grace < 0:
		return fmt.Errorf("%w: negative grace period %v", ErrInvalidRevoke, r.Grace)
	case len(r.Clients) > 0 && !r.Force:
		return fmt.Errorf("%w: the holders of other clients (%s) cannot be asked, only forced: add Force", ErrInvalidRevoke, strings.Join(r.Clients, ", "))
	}
	for _, c := range r.Clients {
		if c == "" || c == ClientUnknown {
			return fmt.Errorf("%w: client %q: name one of the clients QueueEntry.Client names", ErrInvalidRevoke, c)
		}
	}
	return nil
}

// RevokeOutcome is where a revocation stands.
type RevokeOutcome string

// The outcomes a revocation record can have.
const (
	// RevokePending: the holder was asked and the grace period runs (or
	// the revoker stopped before it could record the end; Revocations
	// reports such a record's holder as gone with RevokeEnded).
	RevokePending RevokeOutcome = "pending"
	// RevokeReleased: the holder's entry went within the grace period
	// (it released, or its session ended).
	RevokeReleased RevokeOutcome = "released"
	// RevokeForced: the grace period ended with the entry still there,
	// and the revoker deleted it.
	RevokeForced RevokeOutcome = "forced"
	// RevokeStillHeld: the grace period ended with the entry still there,
	// and the revocation was not forced.
	RevokeStillHeld RevokeOutcome = "still-held"
	// RevokeEnded: a pending or still-held record's entry is gone, but
	// no revoker recorded how (one stopped before; the other gave up
	// waiting). Only Revocations reports it; the record says pending or
	// still-held.
	RevokeEnded RevokeOutcome = "ended"
)

// Revocation is one revocation of one holder: the request and its outcome,
// as recorded beside the lock (a JSON object with these fields in lower
// case), one record per holder's token, kept after the holder is gone as
// the audit trail.
type Revocation struct {
	// Lock is the lock's name.
	Lock string `json:"lock"`
	// Key is the holder's entry: an etcd key or a znode path.
	Key string `json:"key"`
	// Token is the holder's fencing token in its text form; a Token's
	// Name is a semaphore slot's for a permit (see SlotName).
	Token string `json:"token"`
	// Holder is the holder entry's value (see QueueEntry.Holder).
	Holder string `json:"holder"`
	// By, Reason, Grace and Force are the request's.
	By     string        `json:"by"`
	Reason string        `json:"reason"`
	Grace  time.Duration `json:"grace"`
	Force  bool          `json:"force"`
	// Requested is when it was asked, by the revoker's clock.
	Requested time.Time `json:"requested"`
	// Outcome is where it stands.
	Outcome RevokeOutcome `json:"outcome"`
	// Ended is when the outcome was recorded; zero while pending.
	Ended time.Time `json:"ended,omitzero"`
	// ForcedBy and ForceReason are the By and Reason of the request that
	// forced it, when that was a later one than the first (whose By and
	// Reason the record keeps).
	ForcedBy    string `json:"forced_by,omitempty"`
	ForceReason string `json:"force_reason,omitempty"`
	// Again is set on what Revoke returns, not stored: the holder had a
	// revocation recorded already, and this call did not ask again (it
	// may have forced it).
	Again bool `json:"-"`
}

// GraceEnds is when the holder's grace period ends.
func (r Revocation) GraceEnds() time.Time { return r.Requested.Add(r.Grace) }

// String describes the revocation for people.
func (r Revocation) String() string {
	s := fmt.Sprintf("token %s (%s) revoked by %s at %s: %q, grace %v", r.Token, r.Holder, r.By, r.Requested.UTC().Format(time.RFC3339), r.Reason, r.Grace)
	if r.Force {
		s += ", forced after it"
	}
	s += "; " + string(r.Outcome)
	if r.ForcedBy != "" {
		s += fmt.Sprintf(" by %s (%q)", r.ForcedBy, r.ForceReason)
	}
	if !r.Ended.IsZero() {
		s += " at " + r.Ended.UTC().Format(time.RFC3339)
	}
	return s
}

// RevokedError is the cause of a revocable Lease's Done when its holder
// was asked to let go. It matches ErrRevoked with errors.Is; the lock is
// still held, until Unlock or, after the grace period, a forced delete.
type RevokedError struct {
	Revocation
}

// Error says who revoked the lock, why, and when the grace period ends.
func (e *RevokedError) Error() string {
	return fmt.Sprintf("%v: by %s: %q; release before %s", ErrRevoked, e.By, e.Reason, e.GraceEnds().UTC().Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrRevoked) true.
func (e *RevokedError) Is(target error) bool { return target == ErrRevoked }
