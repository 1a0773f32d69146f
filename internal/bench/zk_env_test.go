package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
	"github.com/go-zookeeper/zk"
)

// The ZooKeeper comparison reuses the etcd one's handle interface, stats,
// handoff extraction and table helpers; what is ZooKeeper-specific lives in
// the zk_*_test.go files.

const (
	zkOursPrefix   = "/bench-zklock"
	zkTheirsPrefix = "/bench-zklock-theirs"
)

// zkImpl is one of the two ZooKeeper mutexes under comparison.
type zkImpl struct {
	name string
	// open makes the handle for the lock of case c on conn: for ours a
	// zklock.Session of its own and a Mutex on it.
	open func(ctx context.Context, conn *zk.Conn, c string) (handle, error)
	// dir is the znode whose children are the lock's queue.
	dir func(c string) string
}

var zkImpls = [2]zkImpl{
	ours: {
		name: "recipe.Mutex",
		open: func(ctx context.Context, conn *zk.Conn, c string) (handle, error) {
			s, err := zklock.NewSession(ctx, conn, recipe.WithPrefix(zkOursPrefix))
			if err != nil {
				return nil, err
			}
			m, err := recipe.NewMutex(s, c)
			if err != nil {
				s.Close(ctx)
				return nil, err
			}
			return &zkOursHandle{s: s, m: m}, nil
		},
		dir: func(c string) string { return zkOursPrefix + "/" + c },
	},
	theirs: {
		name: "zk.Lock",
		open: func(_ context.Context, conn *zk.Conn, c string) (handle, error) {
			return &zkTheirsHandle{l: zk.NewLock(conn, zkTheirsPrefix+"/"+c, zk.WorldACL(zk.PermAll))}, nil
		},
		dir: func(c string) string { return zkTheirsPrefix + "/" + c },
	},
}

type zkOursHandle struct {
	s    *zklock.Session
	m    *recipe.Mutex
	held *distlock.Lease
}

func (h *zkOursHandle) Lock(ctx context.Context) error {
	l, err := h.m.Lock(ctx)
	if err != nil {
		return err
	}
	h.held = l
	return nil
}

func (h *zkOursHandle) Unlock(ctx context.Context) error {
	l := h.held
	h.held = nil
	return l.Unlock(ctx)
}

func (h *zkOursHandle) token() int64 { return h.held.Token().Seq }

func (h *zkOursHandle) close(ctx context.Context) error { return h.s.Close(ctx) }

// zkTheirsHandle ignores ctx: zk.Lock's calls take none. Every run lets
// its Lock calls finish (each waiter acquires and releases in turn).
type zkTheirsHandle struct{ l *zk.Lock }

func (h *zkTheirsHandle) Lock(context.Context) error   { return h.l.Lock() }
func (h *zkTheirsHandle) Unlock(context.Context) error { return h.l.Unlock() }
func (h *zkTheirsHandle) token() int64                 { return 0 }
func (h *zkTheirsHandle) close(context.Context) error  { return nil }

// ---- Byte and request counting ----

// zkXidPing and zkXidWatch are the xids of ping replies and watch
// notifications in ZooKeeper's wire protocol.
const (
	zkXidWatch = -1
	zkXidPing  = -2
	zkOpSync   = 9
)

// zkCounter counts what one *zk.Conn receives and when it sends requests,
// across reconnects: its dial wraps every TCP connection the client makes.
// Keepalives are counted apart: the client's pings (one every third of the
// session timeout, both implementations alike) and Syncs (zklock.Session
// sends one every sixth of the session timeout to confirm it is alive, and
// the lock itself never syncs on its way): they are per connection and per
// second, not per handoff.
type zkCounter struct {
	recv    atomic.Int64 // every byte read
	keep    atomic.Int64 // bytes of ping and Sync replies
	events  atomic.Int64 // watch notifications
	replies atomic.Int64 // replies to requests other than keepalives
	syncs   atomic.Int64 // Sync requests written
	last    atomic.Int64 // UnixNano of the last frame received other than keepalives

	mu      sync.Mutex
	sends   []time.Time        // every request but keepalives, when written; sorted
	pending map[int32]struct{} // xids of Syncs not answered yet
}

func (c *zkCounter) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	nc, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	return &zkCountingConn{Conn: nc, c: c}, nil
}

// bytes returns the bytes received other than ping replies.
func (c *zkCounter) bytes() int64 { return c.recv.Load() - c.keep.Load() }

// answered reports whether xid was a Sync's, forgetting it.
func (c *zkCounter) answered(xid int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.pending[xid]
	delete(c.pending, xid)
	return ok
}

// firstFrom returns when the first request at or after t was written.
func (c *zkCounter) firstFrom(t time.Time) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := sort.Search(len(c.sends), func(i int) bool { return !c.sends[i].Before(t) })
	if i == len(c.sends) {
		return time.Time{}, false
	}
	return c.sends[i], true
}

// requests returns how many requests (keepalives excluded) were written
// in [from, to].
func (c *zkCounter) requests(from, to time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := sort.Search(len(c.sends), func(i int) bool { return !c.sends[i].Before(from) })
	j := sort.Search(len(c.sends), func(j int) bool { return c.sends[j].After(to) })
	return max(j-i, 0)
}

// zkRequests sums requests over counters.
func zkRequests(cs []*zkCounter, from, to time.Time) int {
	n := 0
	for _, c := range cs {
		n += c.requests(from, to)
	}
	return n
}

// zkSyncs sums the Syncs (zklock's keepalives) counters wrote so far.
func zkSyncs(cs []*zkCounter) int64 {
	var n int64
	for _, c := range cs {
		n += c.syncs.Load()
	}
	return n
}

// zkCountingConn parses the frames it reads (a 4-byte length, then the
// reply header, whose first field is the xid) to tell pings and watch
// notifications from replies. go-zookeeper writes each request with one
// Write, and reads with one goroutine at a time.
type zkCountingConn struct {
	net.Conn
	c *zkCounter

	hdr  [8]byte // the frame's length and xid
	hn   int     // bytes of hdr filled
	left int     // bytes of the current frame still to come, after hdr
	size int     // the current frame's size, length prefix included
}

func (z *zkCountingConn) Read(p []byte) (int, error) {
	n, err := z.Conn.Read(p)
	if n > 0 {
		z.c.recv.Add(int64(n))
		z.parse(p[:n])
	}
	return n, err
}

func (z *zkCountingConn) parse(b []byte) {
	for len(b) > 0 {
		if z.hn < len(z.hdr) {
			k := copy(z.hdr[z.hn:], b)
			z.hn += k
			b = b[k:]
			if z.hn < len(z.hdr) {
				return
			}
			z.size = 4 + int(binary.BigEndian.Uint32(z.hdr[:4]))
			z.left = z.size - len(z.hdr)
		}
		k := min(z.left, len(b))
		z.left -= k
		b = b[k:]
		if z.left <= 0 {
			switch xid := int32(binary.BigEndian.Uint32(z.hdr[4:8])); {
			case xid == zkXidPing || xid > 0 && z.c.answered(xid):
				z.c.keep.Add(int64(z.size))
			case xid == zkXidWatch:
				z.c.events.Add(1)
				z.c.last.Store(time.Now().UnixNano())
			default:
				z.c.replies.Add(1)
				z.c.last.Store(time.Now().UnixNano())
			}
			z.hn = 0
		}
	}
}

func (z *zkCountingConn) Write(p []byte) (int, error) {
	// A request is its length, then xid and opcode.
	if len(p) >= 12 {
		xid, op := int32(binary.BigEndian.Uint32(p[4:8])), int32(binary.BigEndian.Uint32(p[8:12]))
		z.c.mu.Lock()
		switch {
		case xid == zkXidPing:
		case op == zkOpSync:
			if z.c.pending == nil {
				z.c.pending = map[int32]struct{}{}
			}
			z.c.pending[xid] = struct{}{}
			z.c.syncs.Add(1)
		default:
			z.c.sends = append(z.c.sends, time.Now())
		}
		z.c.mu.Unlock()
	}
	return z.Conn.Write(p)
}

type zkNopLogger struct{}

func (zkNopLogger) Printf(string, ...any) {}

// ---- The ensemble ----

type zkEnv struct {
	ens      *integration.ZooKeeperEnsemble
	leader   int
	observer *zk.Conn // uncounted, to look at the queues from outside
	progress func(format string, args ...any)
}

// zkClient is one contender: its own connection (and ZooKeeper session),
// its counter, and its handle.
type zkClient struct {
	conn *zk.Conn
	ctr  *zkCounter
	h    handle
}

// connect dials one server only, through the harness's proxy, so that
// where a client sits is chosen by the caller, the same way for both
// implementations. It waits until the connection has a session.
func (e *zkEnv) connect(ctx context.Context, server int) (*zk.Conn, *zkCounter, error) {
	c := &zkCounter{}
	hasSession := make(chan struct{})
	var once sync.Once
	conn, _, err := zk.Connect([]string{e.ens.Servers[server%len(e.ens.Servers)].Addr()}, sessionTTL,
		zk.WithDialer(c.dial), zk.WithLogger(zkNopLogger{}), zk.WithLogInfo(false),
		zk.WithEventCallback(func(ev zk.Event) {
			if ev.Type == zk.EventSession && ev.State == zk.StateHasSession {
				once.Do(func() { close(hasSession) })
			}
		}))
	if err != nil {
		return nil, nil, err
	}
	select {
	case <-hasSession:
	case <-ctx.Done():
		conn.Close()
		return nil, nil, fmt.Errorf("connect to server %d: state %v: %w", server, conn.State(), context.Cause(ctx))
	}
	return conn, c, nil
}

// openClients connects n clients, client i to server server(i), and
// opens a handle on each, closing them all if one fails.
func (e *zkEnv) openClients(im zkImpl, c string, n int, server func(i int) int) ([]*zkClient, error) {
	cs := make([]*zkClient, n)
	err := parallel(n, 16, func(i int) error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		conn, ctr, err := e.connect(ctx, server(i))
		if err != nil {
			return err
		}
		cs[i] = &zkClient{conn: conn, ctr: ctr}
		cs[i].h, err = im.open(ctx, conn, c)
		return err
	})
	if err != nil {
		closeClients(cs)
		return nil, fmt.Errorf("%s: open %d clients: %w", im.name, n, err)
	}
	return cs, nil
}

// closeClients ends every handle's session, then closes its connection
// (which ends the ZooKeeper session and its ephemeral nodes).
func closeClients(cs []*zkClient) error {
	return parallel(len(cs), 64, func(i int) error {
		c := cs[i]
		if c == nil {
			return nil
		}
		var err error
		if c.h != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err = c.h.close(ctx)
			cancel()
		}
		c.conn.Close()
		return err
	})
}

func counters(cs []*zkClient) []*zkCounter {
	out := make([]*zkCounter, len(cs))
	for i, c := range cs {
		out[i] = c.ctr
	}
	return out
}

// sumBytes is the non-ping bytes all counters received so far.
func sumBytes(cs []*zkCounter) (bytes, events int64) {
	for _, c := range cs {
		bytes += c.bytes()
		events += c.events.Load()
	}
	return bytes, events
}

// zkEnqueueSent counts a Lock call as waiting from its first request (the
// create), as enqueueSent does for etcd. counters is indexed by who.
func zkEnqueueSent(cs []*zkCounter) func(acquisition) time.Time {
	return func(a acquisition) time.Time {
		if t, ok := cs[a.who].firstFrom(a.lockStart); ok {
			return t
		}
		return a.lockReturn
	}
}

// zkQuiet waits until none of the counters has received anything but
// pings for d, for at most limit: every waiter has enqueued, listed the
// queue and set its watches.
func zkQuiet(cs []*zkCounter, d, limit time.Duration) (time.Time, error) {
	end := time.Now().Add(limit)
	for {
		var last int64
		for _, c := range cs {
			last = max(last, c.last.Load())
		}
		since := time.Since(time.Unix(0, last))
		if since >= d {
			return time.Unix(0, last), nil
		}
		if time.Now().After(end) {
			return time.Time{}, fmt.Errorf("still receiving after %v (last frame %v ago)", limit, since.Round(time.Millisecond))
		}
		time.Sleep(d / 10)
	}
}

// countChildren returns how many children dir has, 0 if it is gone (our
// directories are container nodes, which the server removes once empty).
func (e *zkEnv) countChildren(dir string) (int, error) {
	ch, _, err := e.observer.Children(dir)
	if errors.Is(err, zk.ErrNoNode) {
		return 0, nil
	}
	return len(ch), err
}

// waitChildren waits until dir has exactly want children, on a child
// watch (an exists watch while dir does not exist).
func (e *zkEnv) waitChildren(ctx context.Context, dir string, want int) error {
	last := -1
	for {
		kids, _, ch, err := e.observer.ChildrenW(dir)
		if errors.Is(err, zk.ErrNoNode) {
			kids = nil
			_, _, ch, err = e.observer.ExistsW(dir)
		}
		if err != nil {
			return fmt.Errorf("waiting for %d children of %s: %w", want, dir, err)
		}
		if last = len(kids); last == want {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d children of %s: %d there when %w", want, dir, last, context.Cause(ctx))
		case <-ch:
		}
	}
}

// leftoverNodes counts the lock nodes under both prefixes, every case's
// directory included.
func (e *zkEnv) leftoverNodes() (map[string]int, error) {
	out := map[string]int{}
	for _, p := range []string{zkOursPrefix, zkTheirsPrefix} {
		dirs, _, err := e.observer.Children(p)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, d := range dirs {
			n, err := e.countChildren(p + "/" + d)
			if err != nil {
				return nil, err
			}
			if n > 0 {
				out[p+"/"+d] = n
			}
		}
	}
	return out, nil
}
