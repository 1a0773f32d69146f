package chaos

import (
	"context"
	"sync"

	"github.com/distlock/distlock"
)

// stallPoint is where a workload's worker can be held inside its critical
// section by a nemesis (staller): the nemesis asks for worker i (Stall),
// the worker hands over its token when it gets there (take) and waits
// until the nemesis lets it go on. The zero value asks for worker 0: reset
// it before use.
type stallPoint struct {
	mu      sync.Mutex
	w       int                 // worker to stall, -1 for none
	stalled chan distlock.Token // gets the stalled worker's token
	resume  chan struct{}       // closed to let it go on
}

// reset asks for no worker.
func (p *stallPoint) reset() {
	p.mu.Lock()
	p.w = -1
	p.mu.Unlock()
}

// take returns, if worker i was asked to stall, the channel that lets it
// go on, after handing tok to the nemesis (and calling handed, if not
// nil, before the nemesis can act on it); nil otherwise.
func (p *stallPoint) take(i int, tok distlock.Token, handed func()) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.w != i {
		return nil
	}
	p.w = -1
	if handed != nil {
		handed()
	}
	select {
	case p.stalled <- tok:
		return p.resume
	default: // the nemesis gave up waiting
		return nil
	}
}

// Stall makes worker i stall inside its next critical section and
// returns its token once it does (false if ctx ended first), and the
// function that lets it go on.
func (p *stallPoint) Stall(ctx context.Context, i int) (distlock.Token, func(), bool) {
	stalled, resume := make(chan distlock.Token), make(chan struct{})
	p.mu.Lock()
	p.w, p.stalled, p.resume = i, stalled, resume
	p.mu.Unlock()
	var once sync.Once
	release := func() { once.Do(func() { close(resume) }) }
	select {
	case tok := <-stalled:
		return tok, release, true
	case <-ctx.Done():
		p.mu.Lock()
		if p.w == i {
			p.w = -1
		}
		p.mu.Unlock()
		// A worker that took the stall just now hands its token over.
		select {
		case tok := <-stalled:
			return tok, release, true
		default:
		}
		return distlock.Token{}, release, false
	}
}

// successors tracks the newest token that finished a critical section
// (wrote the "unfenced" register, the last one each writes), for a
// stall nemesis to wait until a successor of the stalled holder did its
// work. Reset it before use.
type successors struct {
	mu       sync.Mutex
	newest   distlock.Token
	progress chan struct{} // closed and replaced when newest grows
}

// resetSuccessors forgets every write.
func (s *successors) resetSuccessors() {
	s.mu.Lock()
	s.newest, s.progress = distlock.Token{}, make(chan struct{})
	s.mu.Unlock()
}

// noteWrite notes a write on register reg with token t.
func (s *successors) noteWrite(reg string, t distlock.Token) {
	if reg != "unfenced" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.newest.IsZero() || t.Newer(s.newest) {
		s.newest = t
		close(s.progress)
		s.progress = make(chan struct{})
	}
}

// waitNewer waits until a critical section with a token newer than t
// finished, or ctx ends.
func (s *successors) waitNewer(ctx context.Context, t distlock.Token) bool {
	for {
		s.mu.Lock()
		newer, ch := s.newest.Newer(t), s.progress
		s.mu.Unlock()
		if newer {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}
