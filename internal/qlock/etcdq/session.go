// Package etcdq is the queue-lock engine's store driver for etcd: a
// session bound to one lease kept alive by hedged KeepAliveOnce calls, and
// the store's part of every step of an acquisition (see qlock's
// lifecycle.go): the enqueue Txn guarded by the session's guard key
// (guard.go), a watch on the entry ahead (watch.go, wait.go), one range
// watch per queue following the session's own entries (follow.go), the
// release Txn conditioned on the entry's create
// revision (release.go), and the election's reads (election.go).
package etcdq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Config is a session's configuration, as the etcdlock options set it.
type Config struct {
	qlock.Options
	TTL time.Duration // requested; at least etcdlock.MinTTL
}

// MinTTL is the shortest TTL a session accepts: etcdlock.MinTTL, whose
// doc says why.
const MinTTL = 2 * time.Second

// Backend is etcd, as errors, metrics and spans (etcd) and logs
// (etcdlock) name it: the Backend of every session NewSession makes, and
// of ClientStore.
var Backend = qlock.Backend{Name: "etcd", Pkg: "etcdlock"}

// Session is one etcd lease kept alive in the background, and the
// engine's driver on it; etcdlock.Session documents what users see.
type Session struct {
	client *clientv3.Client
	id     clientv3.LeaseID
	ttl    time.Duration // as granted by the server
	margin time.Duration
	prefix string

	*qlock.State
	engine *qlock.Engine // runs acquisitions with this driver

	// guard makes a failed Lock's key unable to come back (guard.go).
	guard guard

	seq atomic.Uint64 // makes each entry key unique within the lease
	// streamGen selects the gRPC stream the session's watches use; it is
	// bumped when a stream goes silent (see waitDeleted).
	streamGen atomic.Uint64

	progressMu    sync.Mutex
	progressAsked map[string]time.Time // last progress request, by stream

	// maxRev is the highest create revision of the session's entries
	// whose enqueue has answered (see checkRev).
	maxRev    atomic.Int64
	followMu  sync.Mutex
	followers map[string]*follower // by prefix (follow.go)

	// unknownWarned holds the locks (their foreign base) whose queue
	// showed a key of no known client, logged once (warnUnknown).
	unknownWarned sync.Map
}

// NewSession grants a lease on client and keeps it alive until the session
// ends. The caller has checked c's TTL and prefix.
func NewSession(ctx context.Context, client *clientv3.Client, c Config) (*Session, error) {
	if c.TTL < MinTTL {
		return nil, fmt.Errorf("etcdlock: new session: %w: %v is below the minimum %v (the keepalive runs every third of the TTL and needs a safety margin)", distlock.ErrTTLTooShort, c.TTL, MinTTL)
	}
	if client == nil {
		return nil, fmt.Errorf("etcdlock: new session: %w: *clientv3.Client is nil", distlock.ErrNilClient)
	}
	secs := int64((c.TTL + time.Second - 1) / time.Second)
	sent := time.Now()
	resp, err := client.Grant(ctx, secs)
	if err != nil {
		return nil, fmt.Errorf("etcdlock: new session: grant lease: %w", err)
	}
	ttl := time.Duration(resp.TTL) * time.Second
	s := &Session{
		client: client,
		id:     resp.ID,
		ttl:    ttl,
		margin: ttl / 5,
		prefix: c.Prefix,
	}
	log := c.Logger.With("session", strconv.FormatInt(int64(resp.ID), 16)) // the lease is the session: the same key as zklock's
	s.State = qlock.NewState(Backend, log, c.Holder, uint64(resp.ID), sent.Add(s.ttl-s.margin), c.Observe)
	s.engine = qlock.New(s.State, s)
	s.SetRevocable(c.Revocable)
	s.Log().Debug("etcdlock: session started", "ttl", ttl)
	s.Finally(s.keepalive)
	return s, nil
}

// Client returns the client the session was made with.
func (s *Session) Client() *clientv3.Client { return s.client }

// ID returns the ID of the session's lease.
func (s *Session) ID() clientv3.LeaseID { return s.id }

var _ qlock.Store = (*Session)(nil)

// Engine returns the engine that runs the session's acquisitions on this
// driver.
func (s *Session) Engine() *qlock.Engine { return s.engine }

// User returns the session as users see it, with Close revoking the lease.
func (s *Session) User() qlock.Session {
	return qlock.NewSession(s.State, s.prefix, s.ttl, s.revoke)
}

func (s *Session) revoke(ctx context.Context) error {
	_, err := s.client.Revoke(ctx, s.id)
	if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("etcdlock: revoke lease %x: %w", int64(s.id), err)
	}
	return nil
}

// keepalive refreshes the lease every third of the TTL and ends the session
// when the client-side deadline passes without a confirmed refresh.
// KeepAliveOnce is used rather than the client's KeepAlive stream because
// the deadline must count from when each refresh was sent, which the stream
// does not tell.
//
// One refresh is a round of hedged attempts (see refresh): a member that
// is frozen or cut off keeps the connection open and answers nothing, and
// a single attempt given the whole remaining deadline would wait on it
// until the session is lost, while the other members could have answered
// in milliseconds.
func (s *Session) keepalive() {
	interval := s.ttl / 3
	retry := interval / 4
	next := time.NewTimer(interval)
	defer next.Stop()
	for {
		deadline := s.Deadline()
		expire := time.NewTimer(time.Until(deadline))
		select {
		case <-s.Context().Done():
			expire.Stop()
			if errors.As(s.Err(), new(*qlock.SuspendedError)) {
				// Ended by the deadline, moved earlier by a system
				// suspend (qlock.State.Deadline): as on the deadline.
				s.revokeLater("suspend")
			}
			return
		case <-expire.C:
			s.expire(deadline)
			return
		case <-next.C:
			expire.Stop()
			// Both timers can be overdue at once (the process was stopped
			// past the deadline): the deadline wins, no keepalive goes out.
			// Read again: a system suspend since moves it earlier.
			if deadline = s.Deadline(); !time.Now().Before(deadline) {
				s.expire(deadline)
				return
			}
		}
		sent, resp, err := s.refresh(deadline)
		switch {
		case err == nil:
			s.ExtendFrom(sent, sent.Add(time.Duration(resp.TTL)*time.Second-s.margin))
			s.Log().Debug("etcdlock: keepalive", "member", fmt.Sprintf("%x", resp.ResponseHeader.GetMemberId()), "took", time.Since(sent))
			// Counted from the send time, as the deadline is: a slow
			// answer must not eat into the next refresh's time to reach
			// a member before the deadline.
			next.Reset(max(0, time.Until(sent.Add(interval))))
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			s.End(fmt.Errorf("%w: lease %x not found on the server", distlock.ErrSessionExpired, int64(s.id)))
			return
		case s.Context().Err() != nil:
			return
		default:
			s.Log().Warn("etcdlock: keepalive failed", "err", err, "deadline", deadline)
			next.Reset(retry)
		}
	}
}

// hedgeDelay is how long a request that may be repeated (a keepalive, a
// read, a release) may go unanswered before another one is sent beside it
// (see hedged): a tenth of the TTL, so that between the keepalive (a third
// of the TTL in) and the deadline (a fifth of the TTL before its end) four
// more attempts go out. A healthy member answers in milliseconds; one that
// has not answered by then is most likely frozen, cut off or overloaded.
func (s *Session) hedgeDelay() time.Duration { return s.ttl / 10 }

type attempt struct {
	sent time.Time
	resp *clientv3.LeaseKeepAliveResponse
}

// refresh sends KeepAliveOnce attempts, hedged (see hedged), until one is
// confirmed, one says the lease is gone, or the deadline passes, and
// returns the send time of the attempt that decided. Since each
// KeepAliveOnce opens a new stream, the client's balancer sends each
// attempt to the next member, so one frozen member cannot hold the
// refresh. (An attempt that fails at once — a member without a leader, a
// refused connection — is retried by KeepAliveOnce itself on a new stream,
// hence on another member too.) The session's deadline counts from the
// send time of the attempt confirmed, which the server received after that
// time, whichever member it went through.
func (s *Session) refresh(deadline time.Time) (time.Time, *clientv3.LeaseKeepAliveResponse, error) {
	ctx, cancel := context.WithDeadline(clientv3.WithRequireLeader(s.Context()), deadline)
	defer cancel()
	var attempts atomic.Int32
	a, err := hedged(ctx, s.hedgeDelay(), func(ctx context.Context) (attempt, error) {
		attempts.Add(1)
		sent := time.Now()
		resp, err := s.client.KeepAliveOnce(ctx, s.id)
		return attempt{sent, resp}, err
	})
	if n := attempts.Load(); err == nil && n > 1 {
		s.Log().Info("etcdlock: keepalive answered after hedging", "attempts", n,
			"member", fmt.Sprintf("%x", a.resp.ResponseHeader.GetMemberId()), "after", time.Since(a.sent))
	}
	return a.sent, a.resp, err
}

// expire ends the session on its client-side deadline and revokes the lease
// in the background, so that waiters do not wait for the server's expiry.
func (s *Session) expire(deadline time.Time) {
	s.End(fmt.Errorf("%w: no keepalive of lease %x confirmed before the client-side deadline %s (TTL %v minus margin %v)",
		distlock.ErrSessionExpired, int64(s.id), deadline.Format(time.RFC3339Nano), s.ttl, s.margin))
	s.revokeLater("expiry")
}

// revokeLater revokes the ended session's lease in the background, within
// the margin, so that waiters do not wait for the server's expiry; Close
// waits for it.
func (s *Session) revokeLater(after string) {
	s.Finally(func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.margin)
		defer cancel()
		if err := s.revoke(ctx); err != nil {
			s.Log().Debug("etcdlock: revoke failed", "after", after, "err", err)
		}
	})
}
