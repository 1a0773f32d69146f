package distlock

import (
	"context"
	"errors"
	"time"
)

var (
	// ErrNoLeader reports an election that nobody leads right now.
	ErrNoLeader = errors.New("no leader")
	// ErrNotLeader reports a Proclaim, Resign or HandOff by a candidate
	// that no longer leads (deposed: its entry or session is gone).
	ErrNotLeader = errors.New("not the leader")
	// ErrNoCandidate reports a HandOff that found no candidate to hand
	// over to: none waits, or none has the value asked for. The leader
	// keeps leading.
	ErrNoCandidate = errors.New("no such candidate")
)

// DefaultPreemptGrace is how long a leader preempted by a candidate of
// higher priority has to step down before the candidate deletes its entry
// (see WithPreemptGrace).
const DefaultPreemptGrace = 10 * time.Second

// CampaignOption configures one Campaign.
type CampaignOption func(*CampaignConfig)

// CampaignConfig is what CampaignOptions set; backends read it with
// NewCampaignConfig.
type CampaignConfig struct {
	// Priority is the candidate's priority (WithPriority).
	Priority int
}

// NewCampaignConfig applies opts to the defaults.
func NewCampaignConfig(opts ...CampaignOption) CampaignConfig {
	var c CampaignConfig
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithPriority sets a candidate's priority; the default is 0, and larger
// is preferred. When a term ends, the waiting candidate of the highest
// priority leads next, the oldest among equals. A candidate of a higher
// priority than the current leader's asks the leader to step down (its
// Done closes with a *RevokedError; an Election's preempt grace later,
// its entry is deleted). Priorities range over [-MaxPriority,
// MaxPriority].
func WithPriority(p int) CampaignOption { return func(c *CampaignConfig) { c.Priority = p } }

// MaxPriority bounds a candidate's priority, in either direction.
const MaxPriority = 1 << 30

// ElectionOption configures an Election (etcdlock.NewElection,
// zklock.NewElection).
type ElectionOption func(*ElectionConfig)

// ElectionConfig is what ElectionOptions set; backends read it with
// NewElectionConfig.
type ElectionConfig struct {
	// PreemptGrace is WithPreemptGrace's.
	PreemptGrace time.Duration
}

// NewElectionConfig applies opts to the defaults.
func NewElectionConfig(opts ...ElectionOption) ElectionConfig {
	c := ElectionConfig{PreemptGrace: DefaultPreemptGrace}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithPreemptGrace sets how long a leader of lower priority has, once a
// candidate of higher priority campaigning through this Election asked it
// to step down, before the candidate forces it out by deleting its entry
// (DefaultPreemptGrace if not set). A leader that follows revocations
// (a revocable session) hears the request at once; one that does not
// learns of it when forced (its Done closes with ErrEntryGone). Fences
// refuse whatever the forced leader writes after its successor has
// written. Zero forces at once; a negative grace never forces. A
// candidate whose Campaign ends (cancelled, its session lost) before the
// grace is over does not force; a leader that was asked has been asked,
// and hands over to the next in line when it steps down. A leader that
// changes meanwhile (it handed over to someone else) is asked again only
// if the new one's priority is lower too.
func WithPreemptGrace(d time.Duration) ElectionOption {
	return func(c *ElectionConfig) { c.PreemptGrace = d }
}

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
	// Resign ends leadership and hands it on at once: to the candidate
	// that HandOff(ctx, "") would choose, in the same single write,
	// or, with no candidate waiting, by deleting the leader's entry. A
	// Resign that fails does not pretend to have resigned: the error
	// says so, and the entry goes with the session at the latest.
	Resign(ctx context.Context) error
	// HandOff ends this term and starts the next one with a chosen
	// candidate, in one atomic write: the leader's entry is deleted and
	// the successor's term begins at the same store revision, with a
	// larger token, so observers see the leader change with no moment
	// when nobody or two lead. to names the successor by its Campaign
	// value (the oldest of the highest priority among several with that
	// value); empty means the next in line (the waiting candidate of the
	// highest priority, the oldest among equals). It returns the new
	// leader. If no such candidate waits, it fails with an error wrapping
	// ErrNoCandidate and this candidate keeps leading; hand over to the
	// next in line, or Resign, to step down anyway.
	HandOff(ctx context.Context, to string) (LeaderInfo, error)
}

// Elector is one election that candidates campaign in.
type Elector interface {
	// Campaign blocks until this candidate leads, with value as the
	// leader's value, or ctx ends (leaving no entry behind).
	Campaign(ctx context.Context, value string, opts ...CampaignOption) (Leadership, error)
}

// LeaderInfo is what an election says about its leader. The zero
// LeaderInfo (Token.IsZero) means "no leader".
type LeaderInfo struct {
	// Value is the leader's value (see Campaign, Proclaim).
	Value string
	// Token is the leader's fencing token: the store revision at which
	// its term began.
	Token Token
	// Priority is the leader's Campaign priority (WithPriority).
	Priority int
}

// NoLeader reports whether i says that nobody leads.
func (i LeaderInfo) NoLeader() bool { return i.Token.IsZero() }
