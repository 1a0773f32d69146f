package integration

import (
	"context"
	"sync"
	"time"
)

// Direction says which bytes of a node a Fault applies to.
type Direction int

const (
	// Both applies a fault to bytes sent to the node and bytes it sends.
	Both Direction = iota
	// Inbound applies a fault only to bytes sent to the node.
	Inbound
	// Outbound applies a fault only to bytes the node sends.
	Outbound
)

// Fault is what the harness's proxies do to a node's traffic.
type Fault struct {
	// Hold stops bytes in the proxies until the fault is cleared, then
	// delivers them in order. To TCP on both ends this is a partition: the
	// connections stay open, writes back up, nothing arrives, and healing
	// resumes the streams where they stopped. Cut uses it.
	Hold bool
	// Drop reads bytes and discards them (a blackhole). Streams that lose
	// bytes are usually corrupt afterwards, so peers reset them.
	Drop bool
	// Delay holds every chunk of bytes this long before passing it on.
	Delay time.Duration
	// Dir says which of the node's bytes the fault applies to.
	Dir Direction
}

// Network is the set of faults that the proxies of one cluster apply. Its
// zero value is not usable; clusters make one.
type Network struct {
	mu      sync.Mutex
	faults  map[string]Fault
	changed chan struct{} // closed and replaced on every change
}

func newNetwork() *Network {
	return &Network{faults: map[string]Fault{}, changed: make(chan struct{})}
}

// Set applies f to node's traffic, replacing any fault set before.
func (n *Network) Set(node string, f Fault) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.faults[node] = f
	close(n.changed)
	n.changed = make(chan struct{})
}

// Clear removes node's fault; held bytes flow again.
func (n *Network) Clear(node string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.faults, node)
	close(n.changed)
	n.changed = make(chan struct{})
}

// applies returns the fault that applies to bytes from src to dst: the
// stronger of src's outbound and dst's inbound faults.
func (n *Network) applies(src, dst string) (f Fault, changed <-chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if s, ok := n.faults[src]; ok && src != "" && s.Dir != Inbound {
		f = merge(f, s)
	}
	if d, ok := n.faults[dst]; ok && dst != "" && d.Dir != Outbound {
		f = merge(f, d)
	}
	return f, n.changed
}

func merge(a, b Fault) Fault {
	a.Hold = a.Hold || b.Hold
	a.Drop = a.Drop || b.Drop
	a.Delay = max(a.Delay, b.Delay)
	return a
}

// admit decides the fate of one chunk of bytes from src to dst: it blocks
// while the chunk is held or delayed, and reports whether to deliver it
// (false: drop it). It returns ctx's error when ctx ends first.
func (n *Network) admit(ctx context.Context, src, dst string) (bool, error) {
	for {
		f, changed := n.applies(src, dst)
		switch {
		case f.Drop:
			return false, nil
		case f.Hold:
			select {
			case <-changed:
				continue
			case <-ctx.Done():
				return false, ctx.Err()
			}
		}
		if f.Delay > 0 {
			t := time.NewTimer(f.Delay)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return false, ctx.Err()
			}
		}
		return true, nil
	}
}
