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
	// that no longer leads: its own Resign or HandOff ended the term, or
	// it was deposed (its entry or session is gone). The message says
	// which: "not the leader: this term ended (resigned)", "... (handed
	// off)", or "not the leader: this term was lost: CAUSE"; the error
	// also matches ErrReleased or ErrLost (and the loss's cause) then.
	ErrNotLeader = errors.New("not the leader")
	// ErrNoCandidate reports a HandOff that found no candidate to hand
	// over to: none waits, or none has the value asked for. Found before
	// any write, the leader keeps leading; found after (the candidate
	// left just before the write), the leader has stepped down all the
	// same (see Leadership).
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
	// Compat is WithElectionCompat's.
	Compat Compat
}

// NewElectionConfig applies opts to the defaults.
func NewElectionConfig(opts ...ElectionOption) ElectionConfig {
	c := ElectionConfig{PreemptGrace: DefaultPreemptGrace}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithElectionCompat makes an Election's candidates those of another
// client's election (see Compat): CompatCurator (Curator's
// LeaderSelector), CompatCuratorLatch (LeaderLatch) or CompatKazoo on
// ZooKeeper, CompatEtcd (concurrency.Election, v3election, etcdctl elect)
// on etcd. The foreign rule is "the oldest leads", so such an Election
// refuses what would break it, with errors wrapping
// errors.ErrUnsupported: a Campaign with a priority, a HandOff. Resign
// leaves the term vacant for the next oldest candidate, of either client.
func WithElectionCompat(c Compat) ElectionOption {
	return func(e *ElectionConfig) { e.Compat = c }
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
// token, Done/Err/Context that end when leadership is lost — and
// operations of its own.
//
// # Stepping down
//
// A leader stops believing before anybody else can lead. Resign and
// HandOff (and RunAsLeader's stop, which resigns) first decide whatever
// could keep this candidate leading — no candidate to hand over to (the
// one ErrNoCandidate that leaves it leading), a term that has already
// ended — from the state the leader's watch last saw or a fresh read,
// with no write. Then Done closes, with an Err matching ErrReleased that
// says the leader handed over or resigned, and Deadline turns to the zero
// Time; only then is the write that can start another term sent. Work
// that stops on Done (or on Context) has stopped, as far as this process
// can tell it, before a successor's Campaign can return, however long the
// write's answer takes or if it never comes.
//
// Once Done has closed, this Leadership never leads again, whatever the
// write's outcome. A handoff the store refused (the chosen candidate left
// just before, the term moved) is tried again with a new pick: HandOff to
// a value that is no longer waiting goes to the next in line instead, and
// says so with an error wrapping ErrNoCandidate beside the new leader's
// LeaderInfo. With nobody left to hand over to, or when the write's
// outcome cannot be learnt, the leader's entry is deleted (the Lease's
// Unlock): the term is vacant until the next in line claims it. Resign
// reports only what it could not do (the delete failed: the entry is
// retried in the background and goes with the session at the latest);
// HandOff reports every handoff it did not make as asked.
//
// A term ended by others — the session expired, the entry deleted by a
// forced revocation or preemption — is heard by this Leadership when its
// session or watch tells it (at the latest by the session's client-side
// Deadline); a leader paused meanwhile cannot hear it. That is what the
// fencing Token is for.
type Leadership interface {
	// Token is the fencing token of this term of leadership.
	Token() Token
	// Done is closed when leadership ends: lost, or ended by this leader
	// (Resign, HandOff: before the write that starts another term is
	// sent), or when the leader is asked to step down (revoked, preempted;
	// it still leads until it hands over or is forced out).
	Done() <-chan struct{}
	// Err is nil while leading; then it says why leadership ended: an
	// error matching ErrReleased once Resign or HandOff ended it, ErrLost
	// when it was lost, ErrRevoked when asked to step down.
	Err() error
	// Context is cancelled when Done closes, with Err as its cause.
	Context() context.Context
	// Deadline is the time until which this candidate surely still leads
	// (see Lease.Deadline): do not start a step as leader that cannot
	// finish before it. The zero Time once Done has closed, which Resign
	// and HandOff do before their write is sent: it never lies past the
	// moment another candidate can lead.
	Deadline() time.Time
	// Proclaim updates the leader's value, only while this candidate
	// still leads; otherwise it fails with an error wrapping
	// ErrNotLeader.
	Proclaim(ctx context.Context, value string) error
	// Resign ends leadership and hands it on at once: to the candidate
	// that HandOff(ctx, "") would choose, in the same single write,
	// or, with no candidate waiting (or no handoff possible, see
	// Stepping down), by deleting the leader's entry. Done closes before
	// anything is written. A Resign that fails does not pretend to have
	// resigned: the error says so, and the entry goes with the session
	// at the latest.
	Resign(ctx context.Context) error
	// HandOff ends this term and starts the next one with a chosen
	// candidate, in one atomic write: the leader's entry is deleted and
	// the successor's term begins at the same store revision, with a
	// larger token, so observers see the leader change with no moment
	// when nobody or two lead. to names the successor by its Campaign
	// value (the oldest of the highest priority among several with that
	// value); empty means the next in line (the waiting candidate of the
	// highest priority, the oldest among equals). It returns the new
	// leader. If no such candidate waits when HandOff looks, it fails
	// with an error wrapping ErrNoCandidate, writes nothing, and this
	// candidate keeps leading (Err is nil); hand over to the next in
	// line, or Resign, to step down anyway. Otherwise Done closes before
	// the write, and this candidate does not lead again, even when the
	// handoff could not be made as asked (see Stepping down): after any
	// HandOff, Err tells whether it still leads.
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
