package bench

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
)

// rpcKind classifies what a request costs the cluster.
type rpcKind uint8

const (
	kindRead        rpcKind = iota // KV Range
	kindWrite                      // KV Txn, Put, DeleteRange: each goes through raft
	kindWatchCreate                // a WatchCreateRequest on a watch stream
	kindWatchCancel                // a WatchCancelRequest on a watch stream
	kindOther                      // any other unary RPC
	kindLease                      // lease grant/revoke: session setup, not per acquisition
)

const watchMethod = "/etcdserverpb.Watch/Watch"

// classify maps a unary method to its kind.
func classify(method string) rpcKind {
	switch method {
	case "/etcdserverpb.KV/Range":
		return kindRead
	case "/etcdserverpb.KV/Txn", "/etcdserverpb.KV/Put", "/etcdserverpb.KV/DeleteRange":
		return kindWrite
	case "/etcdserverpb.Lease/LeaseGrant", "/etcdserverpb.Lease/LeaseRevoke":
		return kindLease
	}
	return kindOther
}

// rpcEvent is one request, stamped when the client issued it.
type rpcEvent struct {
	at   time.Time
	dur  time.Duration // unary calls only: until the response came back
	kind rpcKind
}

// reqCount is a number of requests by kind.
type reqCount struct {
	reads, writes, watchCreates, watchCancels, other int
}

func (c *reqCount) add(k rpcKind) {
	switch k {
	case kindRead:
		c.reads++
	case kindWrite:
		c.writes++
	case kindWatchCreate:
		c.watchCreates++
	case kindWatchCancel:
		c.watchCancels++
	case kindOther:
		c.other++
	}
}

// rpcCounter records the requests of one client. Its interceptors sit
// inside clientv3's retry interceptor, so every attempt is counted, which is
// what the cluster sees. Keepalive streams are not counted: they are per
// session, not per acquisition, and both implementations keep one up.
type rpcCounter struct {
	mu      sync.Mutex
	events  []rpcEvent // in the order issued, so sorted by time
	methods map[string]int
	streams []*watchStream
}

func newRPCCounter() *rpcCounter { return &rpcCounter{methods: map[string]int{}} }

func (c *rpcCounter) dialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(c.unary),
		grpc.WithChainStreamInterceptor(c.stream),
	}
}

// record logs a request and returns its index in events.
func (c *rpcCounter) record(name string, k rpcKind) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	// Stamped under the lock so that events stay sorted by time.
	c.events = append(c.events, rpcEvent{at: time.Now(), kind: k})
	c.methods[name]++
	return len(c.events) - 1
}

func (c *rpcCounter) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	i := c.record(method, classify(method))
	err := invoker(ctx, method, req, reply, cc, opts...)
	c.mu.Lock()
	c.events[i].dur = time.Since(c.events[i].at)
	c.mu.Unlock()
	return err
}

func (c *rpcCounter) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || method != watchMethod {
		return cs, err
	}
	ws := &watchStream{ClientStream: cs, c: c}
	c.mu.Lock()
	c.streams = append(c.streams, ws)
	c.mu.Unlock()
	return ws, nil
}

// watchStream counts the requests multiplexed on a watch stream: clientv3
// shares one stream among many watches, so the stream itself says nothing.
type watchStream struct {
	grpc.ClientStream
	c *rpcCounter
	// Guarded by c.mu. A creation sent on a stream that then breaks (as
	// streams requiring a leader do in an election) is never confirmed
	// there; clientv3 sends it again on the next stream.
	pending int
	ended   bool
}

func (s *watchStream) SendMsg(m any) error {
	if r, ok := m.(*pb.WatchRequest); ok {
		switch {
		case r.GetCreateRequest() != nil:
			s.c.mu.Lock()
			s.pending++
			s.c.mu.Unlock()
			s.c.record(watchMethod+" create", kindWatchCreate)
		case r.GetCancelRequest() != nil:
			s.c.record(watchMethod+" cancel", kindWatchCancel)
		default:
			s.c.record(watchMethod+" progress", kindOther)
		}
	}
	return s.ClientStream.SendMsg(m)
}

// RecvMsg notes the server's confirmation of each watch creation: clientv3
// sends one creation at a time per stream and the next only after that
// confirmation, so until then a waiter may not be watching yet.
func (s *watchStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if err != nil {
		s.ended = true
	} else if r, ok := m.(*pb.WatchResponse); ok && r.Created {
		s.pending--
	}
	return err
}

// between returns the requests issued in [from, to].
func (c *rpcCounter) between(from, to time.Time) []rpcEvent {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := sort.Search(len(c.events), func(i int) bool { return !c.events[i].at.Before(from) })
	j := sort.Search(len(c.events), func(j int) bool { return c.events[j].at.After(to) })
	if j <= i {
		return nil
	}
	return slices.Clone(c.events[i:j])
}

// firstFrom returns when the first request at or after t was issued.
func (c *rpcCounter) firstFrom(t time.Time) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := sort.Search(len(c.events), func(i int) bool { return !c.events[i].at.Before(t) })
	if i == len(c.events) {
		return time.Time{}, false
	}
	return c.events[i].at, true
}

// activity returns when the latest request was issued (zero if none was)
// and how many watch creations the server has not confirmed yet.
func (c *rpcCounter) activity() (last time.Time, pendingCreates int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.events) > 0 {
		last = c.events[len(c.events)-1].at
	}
	for _, ws := range c.streams {
		if !ws.ended {
			pendingCreates += ws.pending
		}
	}
	return last, pendingCreates
}

// pathStats aggregates the requests on the critical paths of handoffs.
type pathStats struct {
	count  reqCount
	reads  []time.Duration // how long each read took
	writes []time.Duration // how long each write took
}

func (p *pathStats) String() string {
	return fmt.Sprintf("%+v; writes took %v; reads took %v", p.count, summarize(p.writes), summarize(p.reads))
}

func (p *pathStats) add(events []rpcEvent) {
	for _, e := range events {
		p.count.add(e.kind)
		switch e.kind {
		case kindRead:
			p.reads = append(p.reads, e.dur)
		case kindWrite:
			p.writes = append(p.writes, e.dur)
		}
	}
}

// methodCounts returns how often each method was called, for the details.
func (c *rpcCounter) methodCounts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.methods))
	for k, v := range c.methods {
		out[k] = v
	}
	return out
}
