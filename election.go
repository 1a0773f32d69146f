package distlock

import (
	"context"
	"errors"
	"time"
)

var (
	// ErrNoLeader reports an election that nobody leads right now.
	ErrNoLeader = errors.New("no leader")
	// ErrNotLeader reports a Proclaim or Resign by a candidate that no
	// longer leads (deposed: its entry or session is gone).
	ErrNotLeader = errors.New("not the leader")
)

// Leadership is a won election: the leader's entry is the holder of the
// election's queue, so it has the same surface as a held lock — a fencing
// token, Done/Err/Context that end when leadership is lost — and two
// operations of its own.
type Leadership interface {
	// Token is the fencing token of this term of leadership.
	Token() Token
	// Done is closed when leadership ends: lost or resigned.
	Done() <-chan struct{}
	// Err is nil while leading; then it says why leadership ended.
	Err() error
	// Context is cancelled when leadership ends.
	Context() context.Context
	// Deadline is the time until which this candidate surely still leads
	// (see Lease.Deadline): do not start a step as leader that cannot
	// finish before it. The zero Time once leadership has ended.
	Deadline() time.Time
	// Proclaim updates the leader's value, only while this candidate
	// still leads; otherwise it fails with an error wrapping
	// ErrNotLeader.
	Proclaim(ctx context.Context, value string) error
	// Resign ends leadership and hands it on at once. A Resign that
	// fails does not pretend to have resigned: the error says so, and
	// the entry goes with the session at the latest.
	Resign(ctx context.Context) error
}

// Elector is one election that candidates campaign in.
type Elector interface {
	// Campaign blocks until this candidate leads, with value as the
	// leader's value, or ctx ends (leaving no entry behind).
	Campaign(ctx context.Context, value string) (Leadership, error)
}

// LeaderInfo is what an election says about its leader. The zero
// LeaderInfo (Token.IsZero) means "no leader".
type LeaderInfo struct {
	// Value is the leader's value (see Campaign, Proclaim).
	Value string
	// Token is the leader's fencing token.
	Token Token
}

// NoLeader reports whether i says that nobody leads.
func (i LeaderInfo) NoLeader() bool { return i.Token.IsZero() }
