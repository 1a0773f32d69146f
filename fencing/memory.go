package fencing

import (
	"context"
	"fmt"
	"sync"

	"github.com/distlock/distlock"
)

// Memory is a fence for an in-process resource (a cache, a file this
// process owns, a connection it multiplexes), safe for concurrent use.
// It forgets everything when the process exits: a resource that outlives
// the process needs a fence stored with it.
type Memory struct {
	lock string
	// mu is held by Do for the whole write: the check and the write are
	// one atomic step for everyone using the fence.
	mu     sync.Mutex
	newest distlock.Token
	tel    *Telemetry
}

var _ Doer = (*Memory)(nil)

// NewMemory returns a fence for a resource guarded by the lock called
// lock; opts say where it reports its decisions.
func NewMemory(lock string, opts ...Option) (*Memory, error) {
	if err := distlock.ValidateName(lock); err != nil {
		return nil, fmt.Errorf("fencing: new memory fence: %w", err)
	}
	return &Memory{lock: lock, tel: NewTelemetry("memory", lock, opts...)}, nil
}

func (m *Memory) resource() string { return "memory fence of lock " + m.lock }

// Admit admits t if no newer token was admitted before, nor another
// acquisition with t's sequence number.
func (m *Memory) Admit(ctx context.Context, t distlock.Token) error {
	return m.Do(ctx, t, nil)
}

// Do runs write (if not nil) only if t is admitted, holding the fence for
// the whole write, so that no older holder's write can start meanwhile. A
// token is admitted even if write then fails: the holder of a newer token
// has shown up, and older ones stay refused.
func (m *Memory) Do(ctx context.Context, t distlock.Token, write func(ctx context.Context) error) error {
	if err := Check(m.resource(), m.lock, t); err != nil {
		m.tel.Record(ctx, t, err)
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	err := Compare(m.resource(), t, m.newest)
	m.tel.Record(ctx, t, err)
	if err != nil {
		return err
	}
	m.newest = t
	if write == nil {
		return nil
	}
	return write(ctx)
}

// Newest returns the newest token admitted, or the zero Token.
func (m *Memory) Newest() distlock.Token {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.newest
}
