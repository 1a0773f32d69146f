package qlock

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/user"
	"slices"
	"sync"
	"time"

	"github.com/distlock/distlock"
)

// Revoking a lock's holders (see distlock's revoke.go for what users see):
// the steps live here once; the stores' parts are a ClientStore's.

// RevokeKeep is how many revocation records of one lock are kept: older
// ones are deleted when a new one is made, so that the audit trail of a
// lock revoked again and again stays bounded.
const RevokeKeep = 100

// RevokeKey is the name of the record of the holder with token seq in a
// lock's revocation directory: the sequence number, zero-padded so that
// the records sort in the order of their holders.
func RevokeKey(seq int64) string { return fmt.Sprintf("%020d", seq) }

// revokedBy is a request's By when it gives none: "user@host pid N".
func revokedBy() string {
	name := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("%s@%s pid %d", name, cmp.Or(host, "unknown-host"), os.Getpid())
}

// record returns rv as stored: its JSON (plain fields, so Marshal cannot
// fail).
func record(rv distlock.Revocation) []byte {
	b, _ := json.Marshal(rv)
	return b
}

// parseRevocation reads a stored record.
func parseRevocation(data []byte) (distlock.Revocation, error) {
	var r distlock.Revocation
	if err := json.Unmarshal(data, &r); err != nil {
		return distlock.Revocation{}, fmt.Errorf("revocation record does not parse: %w", err)
	}
	return r, nil
}

// revokeErr returns the error of a revocation of lock name with a cause.
func (a *Admin) revokeErr(name string) func(error) error {
	return func(err error) error {
		return &distlock.LockError{Backend: a.st.Backend().Name, Name: name, Op: distlock.OpRevoke, Err: err}
	}
}

// foreignClients are all the foreign clients an entry can be of: a
// record's holder is alive while an entry of any client has its token.
var foreignClients = []string{distlock.ClientCurator, distlock.ClientKazoo, distlock.ClientGoZookeeper, distlock.ClientEtcd, distlock.ClientEtcdRecipes}

// lockHolders reads lock name's queue without the election's candidates
// (whose leader the term record names) and a semaphore's line (which
// holds nothing): its lock entries and a semaphore's permits. Other
// clients' entries are left out unless clients names theirs
// (RevokeRequest.Clients): they follow no revocation record, and a
// forced delete lets the next waiter in while their holder still
// believes it holds.
func lockHolders(ctx context.Context, st ClientStore, name string, clients []string) ([]distlock.QueueEntry, error) {
	q, err := st.ReadQueue(ctx, name)
	return slices.DeleteFunc(q, func(e distlock.QueueEntry) bool {
		foreign := e.Client != "" && !slices.Contains(clients, e.Client)
		return foreign || e.Client == distlock.ClientUnknown || e.Kind == distlock.Candidate || e.Kind == distlock.Counted && !e.Holding
	}), err
}

// ClientStore is what a store does on a client, not a session, for
// those that hold nothing (an Admin, a revoker, a preempting candidate):
// read a lock's queue and election, keep the revocation records of its
// holders (keyed by the holder's token, RevokeKey, under the lock's
// revocation directory), and wait for or delete one entry.
type ClientStore interface {
	// Backend is the store's, for errors.
	Backend() Backend
	// ReadQueue reads lock name's whole queue, in one consistent read
	// where the store has one: a semaphore's holders (in slot order) and
	// its line, the lock's entries with Holding set, and an election's
	// candidates, each queue oldest first, with their Kind, Token, Owner,
	// Holder and Priority (a candidate's Holding is the Admin's to set,
	// from the term record).
	ReadQueue(ctx context.Context, name string) ([]distlock.QueueEntry, error)
	// ReadElection reads election name's state (see Elections).
	ReadElection(ctx context.Context, name string) (ElectionState, error)
	// CreateRevocation stores record data for token seq if there is none, and then
	// tells the holder (holders follow new records); it returns the
	// existing record's data otherwise.
	CreateRevocation(ctx context.Context, name string, seq int64, data []byte) (existing []byte, err error)
	// UpdateRevocation replaces the record of token seq.
	UpdateRevocation(ctx context.Context, name string, seq int64, data []byte) error
	// ListRevocations returns lock name's records, oldest holder first.
	ListRevocations(ctx context.Context, name string) ([][]byte, error)
	// PruneRevocations deletes all but the newest keep records of lock name.
	PruneRevocations(ctx context.Context, name string, keep int) error
	// WaitDeleted returns nil once entry e (its key at e's position, see
	// Position) is gone, or ctx's error.
	WaitDeleted(ctx context.Context, e distlock.QueueEntry) error
	// DeleteEntry deletes entry e only if it is still e's (its position); gone
	// reports that it was not there any more.
	DeleteEntry(ctx context.Context, e distlock.QueueEntry) (gone bool, err error)
}

// Revoke asks lock name's holders to let go, as r says, and waits until
// they have or r's grace period is over; then, with r.Force, deletes the
// entries of those that have not. It records each holder's revocation and
// its outcome, and returns them (none when the lock is free). A holder
// already revoked is not asked again: its record is returned with Again
// set and, with r.Force, forced once its first grace period or r's is
// over, whichever ends first.
func (a *Admin) Revoke(ctx context.Context, name string, r distlock.RevokeRequest) ([]distlock.Revocation, error) {
	st, fail := a.st, a.revokeErr(name)
	if err := st.Backend().ValidateName(name); err != nil {
		return nil, err
	}
	if err := r.Validate(); err != nil {
		return nil, fail(err)
	}
	if r.By == "" {
		r.By = revokedBy()
	}
	entries, err := lockHolders(ctx, st, name, r.Clients)
	if err != nil {
		return nil, fail(err)
	}
	// Who holds: a semaphore's permits, and the lock entries with no
	// conflicting entry ahead, and the election's leader.
	held := slices.DeleteFunc(entries, func(e distlock.QueueEntry) bool { return !e.Holding })
	es, err := st.ReadElection(ctx, name)
	if err != nil {
		return nil, fail(err)
	}
	if l, ok := es.leader(); ok {
		held = append(held, es.leaderEntry(name, l))
	}
	out, err := revokeHolders(ctx, st, name, held, r)
	if err != nil {
		return out, fail(err)
	}
	return out, nil
}

// revokeHolders records the revocation r of lock name's holders held,
// waits until they have let go or its grace is over, and forces them if r
// says so (Revoke, and a candidate's preemption of a leader).
func revokeHolders(ctx context.Context, st ClientStore, name string, held []distlock.QueueEntry, r distlock.RevokeRequest) ([]distlock.Revocation, error) {
	if len(held) == 0 {
		return nil, nil
	}
	now := time.Now()
	out := make([]distlock.Revocation, len(held))
	for i, e := range held {
		rv := distlock.Revocation{
			Lock: name, Key: e.Key, Token: e.Token.String(), Holder: e.Holder,
			By: r.By, Reason: r.Reason, Grace: r.Grace, Force: r.Force,
			Requested: now, Outcome: distlock.RevokePending,
		}
		existing, err := st.CreateRevocation(ctx, name, e.Token.Seq, record(rv))
		if err != nil {
			return out[:i], fmt.Errorf("record the revocation of token %s: %w", e.Token, err)
		}
		if existing != nil {
			old, err := parseRevocation(existing)
			if err != nil {
				return out[:i], fmt.Errorf("revocation of token %s: %w", e.Token, err)
			}
			rv = old
			rv.Again = true
		}
		out[i] = rv
	}
	// A failed prune only delays the trail's bound: the next revocation
	// prunes again.
	_ = st.PruneRevocations(ctx, name, RevokeKeep)

	// Wait for each holder until its own grace period is over (a record
	// made earlier has its first grace), in parallel.
	errs := make([]error, len(held))
	var wg sync.WaitGroup
	for i, e := range held {
		if rv := &out[i]; !rv.Again || r.Force { // else asked already: this call adds nothing
			wg.Go(func() {
				if err := settleRevocation(ctx, st, name, e, rv, r, now); err != nil {
					errs[i] = fmt.Errorf("revocation of token %s: %w", e.Token, err)
				}
			})
		}
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// settleRevocation waits out rv's grace period (or r's, made at now, if
// it ends first) for entry e to go, forces it if r says so, and records
// the outcome in rv and in the store.
func settleRevocation(ctx context.Context, st ClientStore, name string, e distlock.QueueEntry, rv *distlock.Revocation, r distlock.RevokeRequest, now time.Time) error {
	if !unsettled(*rv) {
		return nil // over already: released or forced
	}
	end := rv.GraceEnds()
	if rv.Again && now.Add(r.Grace).Before(end) {
		// A later request may shorten the grace it forces after, never
		// lengthen it: the operator's call (fences keep the work safe).
		end = now.Add(r.Grace)
	}
	gctx, cancel := context.WithDeadline(ctx, end)
	err := st.WaitDeleted(gctx, e)
	cancel()
	switch {
	case err == nil:
		rv.Outcome = distlock.RevokeReleased
	case ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("wait for the holder to release: %w", cmp.Or(context.Cause(ctx), err))
	case !r.Force:
		rv.Outcome = distlock.RevokeStillHeld
	default:
		gone, err := st.DeleteEntry(ctx, e)
		if err != nil {
			return fmt.Errorf("delete the holder's entry %s: %w", e.Key, err)
		}
		rv.Outcome = distlock.RevokeForced
		if rv.Again && !rv.Force {
			// Forced by a later request than the one recorded.
			rv.ForcedBy, rv.ForceReason = r.By, r.Reason
		}
		rv.Force = true
		if gone {
			rv.Outcome = distlock.RevokeReleased // it went just now
		}
	}
	rv.Ended = time.Now()
	if err := st.UpdateRevocation(ctx, name, e.Token.Seq, record(*rv)); err != nil {
		return fmt.Errorf("record its outcome (%s): %w", rv.Outcome, err)
	}
	return nil
}

// Revocations returns lock name's revocation records, in the order they
// were requested. A pending or still-held record whose holder is gone is
// reported as distlock.RevokeEnded.
func (a *Admin) Revocations(ctx context.Context, name string) ([]distlock.Revocation, error) {
	st, fail := a.st, a.revokeErr(name)
	if err := st.Backend().ValidateName(name); err != nil {
		return nil, err
	}
	raw, err := st.ListRevocations(ctx, name)
	if err != nil {
		return nil, fail(fmt.Errorf("list the revocation records: %w", err))
	}
	var out []distlock.Revocation
	for _, data := range raw {
		rv, err := parseRevocation(data)
		if err != nil {
			return nil, fail(err)
		}
		out = append(out, rv)
	}
	if slices.ContainsFunc(out, unsettled) {
		entries, err := lockHolders(ctx, st, name, foreignClients)
		if err != nil {
			return nil, fail(err)
		}
		live := map[string]bool{}
		for _, e := range entries {
			live[e.Token.String()] = true
		}
		es, err := st.ReadElection(ctx, name)
		if err != nil {
			return nil, fail(err)
		}
		if l, ok := es.leader(); ok {
			live[es.leaderEntry(name, l).Token.String()] = true
		}
		for i := range out {
			if unsettled(out[i]) && !live[out[i].Token] {
				out[i].Outcome = distlock.RevokeEnded
			}
		}
	}
	slices.SortStableFunc(out, func(a, b distlock.Revocation) int { return a.Requested.Compare(b.Requested) })
	return out, nil
}

// Position is entry e's queue position: its create revision or czxid,
// which a revocation's WaitDeleted and DeleteEntry compare the entry's key with.
func Position(e distlock.QueueEntry) int64 { return cmp.Or(e.Seq, e.Token.Seq) }

// unsettled reports whether rv's holder may still hold: pending or still
// held.
func unsettled(rv distlock.Revocation) bool {
	return rv.Outcome == distlock.RevokePending || rv.Outcome == distlock.RevokeStillHeld
}
