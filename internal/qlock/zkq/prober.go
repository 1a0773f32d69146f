package zkq

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// Liveness is shared per connection. Every Session on one *zk.Conn rests
// on the same ZooKeeper session, so one answered Sync on that connection
// proves it alive for all of them: a Session's deadline is the send time
// of the last Sync answered while the connection had its session, plus its
// timeout less its margin, whichever Session asked for that Sync. So the
// Sessions of a connection share one prober, which sends at most one Sync
// at a time; each Session asks for one when its own interval has passed
// since the last answered one (or on the next poll after a failure), and reads the
// answers. A thousand Sessions on one connection cost what one does; a
// thousand connections still cost a Sync each per interval (go-zookeeper
// does not say when it sent its own pings, so they cannot serve as the
// evidence the deadline counts from).

// prober sends the liveness Syncs of the Sessions on one connection.
type prober struct {
	conn *zk.Conn
	sent atomic.Int64 // Syncs sent, for tests

	mu       sync.Mutex
	subs     map[*Session]chan struct{} // woken after every answer
	inflight bool
	last     probeResult
}

// probeResult is what the prober last learnt.
type probeResult struct {
	ok      time.Time // send time of the latest answered Sync
	okID    int64     // the session ID the connection had at that answer
	err     error     // the latest failed Sync's error
	errSent time.Time // its send time
	errID   int64     // the session ID the connection had when it was sent
}

var probers = struct {
	sync.Mutex
	m map[*zk.Conn]*prober
}{m: map[*zk.Conn]*prober{}}

// join subscribes s to its connection's prober and returns it, with the
// channel that is signalled after every answer.
func join(s *Session) (*prober, <-chan struct{}) {
	probers.Lock()
	defer probers.Unlock()
	p := probers.m[s.conn]
	if p == nil {
		p = &prober{conn: s.conn, subs: map[*Session]chan struct{}{}}
		probers.m[s.conn] = p
	}
	ch := make(chan struct{}, 1)
	p.mu.Lock()
	p.subs[s] = ch
	p.mu.Unlock()
	return p, ch
}

// leave unsubscribes s; the last one to leave drops the prober.
func (p *prober) leave(s *Session) {
	probers.Lock()
	defer probers.Unlock()
	p.mu.Lock()
	delete(p.subs, s)
	empty := len(p.subs) == 0
	p.mu.Unlock()
	if empty && probers.m[p.conn] == p {
		delete(probers.m, p.conn)
	}
}

// state returns what the prober last learnt.
func (p *prober) state() probeResult {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// probe sends a Sync unless one is in flight already (its answer will do:
// it was sent earlier, so the deadline it gives is only earlier).
func (p *prober) probe() {
	p.mu.Lock()
	if p.inflight {
		p.mu.Unlock()
		return
	}
	p.inflight = true
	p.mu.Unlock()
	p.sent.Add(1)
	go func() {
		sentID, sent := p.conn.SessionID(), time.Now()
		_, err := p.conn.Sync("/")
		id := p.conn.SessionID()
		p.mu.Lock()
		defer p.mu.Unlock()
		p.inflight = false
		if err == nil {
			if sent.After(p.last.ok) {
				p.last.ok, p.last.okID = sent, id
			}
		} else if sent.After(p.last.errSent) {
			p.last.err, p.last.errSent, p.last.errID = err, sent, sentID
		}
		for _, ch := range p.subs {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}()
}
