package gocronlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/distlock/distlock"
	"github.com/go-co-op/gocron/v2"
)

// Elector is a gocron.Elector: IsLeader returns nil only while this
// instance holds a live distlock.Leadership of its election. It campaigns
// in the background from NewElector until Close, as distlock.RunAsLeader
// does (a jittered backoff after failures; a deposed leader campaigns
// again at once).
type Elector struct {
	el     distlock.Elector
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	term context.Context // the current term's context while leading, nil otherwise
	tok  distlock.Token
}

var _ gocron.Elector = (*Elector)(nil)

// ErrNotLeader is what IsLeader wraps when this instance does not lead:
// distlock.ErrNotLeader.
var ErrNotLeader = distlock.ErrNotLeader

// NewElector starts campaigning in el with value (what Leader shows, e.g.
// the host name) and returns the Elector; it campaigns until Close or ctx
// ends.
func NewElector(ctx context.Context, el distlock.Elector, value string) (*Elector, error) {
	if el == nil {
		return nil, fmt.Errorf("gocronlock: %w: nil Elector", distlock.ErrNilClient)
	}
	ctx, cancel := context.WithCancel(ctx)
	e := &Elector{el: el, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(e.done)
		_ = distlock.RunAsLeader(ctx, el, value, func(ctx context.Context, t distlock.Token) error {
			e.mu.Lock()
			e.term, e.tok = ctx, t
			e.mu.Unlock()
			<-ctx.Done()
			e.mu.Lock()
			e.term = nil
			e.mu.Unlock()
			return context.Cause(ctx)
		})
	}()
	return e, nil
}

// IsLeader returns nil while this instance leads (gocron.Elector), and
// otherwise an error wrapping ErrNotLeader that names the current leader
// where the election can tell (etcdlock's and zklock's can).
func (e *Elector) IsLeader(ctx context.Context) error {
	e.mu.Lock()
	term := e.term
	e.mu.Unlock()
	if term != nil && term.Err() == nil {
		return nil
	}
	who := ""
	if l, ok := e.el.(interface {
		Leader(ctx context.Context) (distlock.LeaderInfo, error)
	}); ok {
		lctx, cancel := context.WithTimeout(ctx, distlock.DefaultOnceTimeout)
		defer cancel()
		switch li, err := l.Leader(lctx); {
		case err == nil:
			who = fmt.Sprintf(": the leader is %q (token %v)", li.Value, li.Token)
		case errors.Is(err, distlock.ErrNoLeader):
			who = ": no leader right now"
		}
	}
	return fmt.Errorf("gocronlock: %w%s", ErrNotLeader, who)
}

// Token returns the fencing token of the current term, and false when
// this instance does not lead: jobs that write to a resource fence their
// writes with it.
func (e *Elector) Token() (distlock.Token, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.term == nil || e.term.Err() != nil {
		return distlock.Token{}, false
	}
	return e.tok, true
}

// Close stops campaigning, resigns if leading, and waits for that (or for
// ctx) to end.
func (e *Elector) Close(ctx context.Context) error {
	e.cancel()
	select {
	case <-e.done:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-time.After(distlock.DefaultOnceTimeout):
		return errors.New("gocronlock: elector did not stop")
	}
}
