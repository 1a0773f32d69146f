package bench

import (
	"context"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/recipe"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// sessionTTL is the same for both, so neither pays for keepalives more often.
const sessionTTL = 30 * time.Second

// handle is one session and its lock handle, used by one goroutine at a
// time: Lock, then Unlock, repeatedly.
type handle interface {
	Lock(ctx context.Context) error
	Unlock(ctx context.Context) error
	// token is the current acquisition's fencing token, 0 if there is none.
	token() int64
	// close ends the session, which deletes whatever keys it still has.
	close(ctx context.Context) error
}

// impl is one of the two mutexes under comparison.
type impl struct {
	name string // as shown in the table
	// open starts a session on cli for the lock of benchmark case c.
	open func(ctx context.Context, cli *clientv3.Client, c string) (handle, error)
	// queuePrefix is the prefix under which the lock of case c keeps one key
	// per queued Lock call.
	queuePrefix func(c string) string
}

const (
	ours   = 0
	theirs = 1
)

// impls is indexed by ours and theirs.
var impls = [2]impl{
	ours: {
		name: "recipe.Mutex",
		open: func(ctx context.Context, cli *clientv3.Client, c string) (handle, error) {
			s, err := etcdlock.NewSession(ctx, cli, etcdlock.WithTTL(sessionTTL))
			if err != nil {
				return nil, err
			}
			m, err := recipe.NewMutex(s, "bench/"+c)
			if err != nil {
				s.Close(ctx)
				return nil, err
			}
			return &oursHandle{s: s, m: m}, nil
		},
		queuePrefix: func(c string) string { return etcdlock.DefaultPrefix + "bench/" + c + "/@" },
	},
	theirs: {
		name: "concurrency.Mutex",
		open: func(ctx context.Context, cli *clientv3.Client, c string) (handle, error) {
			s, err := concurrency.NewSession(cli, concurrency.WithTTL(int(sessionTTL/time.Second)))
			if err != nil {
				return nil, err
			}
			// NewMutex appends the "/", so the keys live under theirsPrefix(c).
			return &theirsHandle{s: s, m: concurrency.NewMutex(s, "/bench-theirs/"+c)}, nil
		},
		queuePrefix: func(c string) string { return "/bench-theirs/" + c + "/" },
	},
}

type oursHandle struct {
	s    *etcdlock.Session
	m    *recipe.Mutex
	held *distlock.Lease
}

func (h *oursHandle) Lock(ctx context.Context) error {
	l, err := h.m.Lock(ctx)
	if err != nil {
		return err
	}
	h.held = l
	return nil
}

func (h *oursHandle) Unlock(ctx context.Context) error {
	l := h.held
	h.held = nil
	return l.Unlock(ctx)
}

func (h *oursHandle) token() int64 { return h.held.Token().Seq }

func (h *oursHandle) close(ctx context.Context) error { return h.s.Close(ctx) }

type theirsHandle struct {
	s *concurrency.Session
	m *concurrency.Mutex
}

func (h *theirsHandle) Lock(ctx context.Context) error   { return h.m.Lock(ctx) }
func (h *theirsHandle) Unlock(ctx context.Context) error { return h.m.Unlock(ctx) }
func (h *theirsHandle) token() int64                     { return 0 }

// close ignores ctx: concurrency.Session.Close bounds its revoke by the TTL.
func (h *theirsHandle) close(context.Context) error { return h.s.Close() }
