package recipe

import (
	"context"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
)

// Election is leader election: each Campaign enqueues one candidate entry
// bound to the session, whose value is the candidate's value, and the
// candidate leads while the election's term record names its entry. The
// term's fencing token is the position of the write that began the term
// (the record's etcd mod revision or ZooKeeper mzxid), so every term's
// token is larger than all before it.
//
// A handoff (Resign, HandOff) writes the record naming the successor in
// the write that deletes the leader's entry. When the leader's entry goes
// otherwise (its session ended, it was deleted), the term is vacant until
// the next in line (the highest priority, then the oldest; see
// distlock.WithPriority) claims it with a compare-and-set of the record
// guarded by its own entry, so there is never a phantom leader nor two
// terms at once. A waiting candidate of a higher priority than the
// leader's asks it to step down through a revocation record (see
// Admin.Revoke), and after the Election's preempt grace
// (distlock.WithPreemptGrace) deletes its entry.
//
// Candidates are a queue of their own: an Election and a Mutex of the same
// name never wait for each other. Every candidate follows the whole
// election, so a change wakes each of them: elections are meant for tens
// of candidates, not thousands.
type Election struct{ q *qlock.Election }

// NewElection returns the election called name (see
// distlock.ValidateName) on the session s. opts set the Election's
// preempt grace (distlock.WithPreemptGrace) and its compatibility mode
// (distlock.WithElectionCompat: its candidates another client's, whose
// rule "the oldest leads" it then keeps, refusing priorities and
// HandOff).
func NewElection(s Backend, name string, opts ...distlock.ElectionOption) (*Election, error) {
	ss, err := session(s, "election", name)
	if err != nil {
		return nil, err
	}
	q, err := qlock.NewElection(ss.e, name, distlock.NewElectionConfig(opts...))
	if err != nil {
		return nil, err
	}
	return &Election{q}, nil
}

// Campaign enqueues a candidate whose value is value and waits until it
// leads (see Election for how a term begins and ends). opts set its
// priority (distlock.WithPriority).
//
// It fails, leaving no entry behind, when ctx ends (the error wraps ctx's
// cause), when the session ends (distlock.ErrSessionExpired,
// distlock.ErrSessionClosed; once it has ended every Campaign fails:
// campaign again on a new Session; also ErrSessionExpired when its
// client-side Deadline had passed by the time it could return) or when its
// entry is deleted by someone else (distlock.ErrEntryGone). Every call is
// a candidate of its own, even on one Session.
//
// The returned Leadership ends (Done, Context) when the entry goes, the
// session ends, or Resign or HandOff is called (before their write is
// sent: see distlock.Leadership, "Stepping down"); its Err then says why.
// Its Proclaim is a write guarded by the entry's identity (the entry
// gone: distlock.ErrNotLeader) and does not hand leadership over. Its
// HandOff is one write, the successor picked from the election's state as
// the leader's watch last saw it (a read first only when that state names
// no such candidate, or the write found it stale); Resign is a HandOff to
// the next in line, or, with nobody waiting, the guarded delete. A second
// Resign, or one after leadership was lost, wraps distlock.ErrNotLeader.
func (e *Election) Campaign(ctx context.Context, value string, opts ...distlock.CampaignOption) (distlock.Leadership, error) {
	return e.q.Campaign(ctx, value, opts...)
}

// Leader returns the current leader's value, token and priority, read
// fresh from the store (a linearizable read: the answer is at least as new
// as every write acknowledged before the call). With no leader (no
// candidate, or a vacant term not yet claimed) the error wraps
// distlock.ErrNoLeader.
func (e *Election) Leader(ctx context.Context) (distlock.LeaderInfo, error) { return e.q.Leader(ctx) }

// Observe streams the election's leader: first the current one (the zero
// distlock.LeaderInfo if none), then every change in the order it
// happened: a new leader (new token), a Proclaim (same token, new value),
// and "no leader" while a term is vacant or when the last candidate goes.
// Consecutive equal values are sent once; tokens only grow. A term that
// began and ended while the store could not be followed (a compaction, a
// member's failure, a reconnect) can be missed.
//
// The channel is closed when ctx ends or the session's client is closed.
// Receivers must keep up: Observe waits for each value to be taken.
func (e *Election) Observe(ctx context.Context) <-chan distlock.LeaderInfo { return e.q.Observe(ctx) }

// Name returns the election's name, as given to NewElection.
func (e *Election) Name() string { return e.q.Name() }

// Dir returns where the election's entries are kept, as Mutex.Dir.
func (e *Election) Dir() string { return e.q.Dir() }
