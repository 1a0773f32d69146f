package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// ZooKeeperEnsemble is a real ZooKeeper ensemble run by the harness: N
// servers (JVMs), each behind three proxies the harness owns — one for
// clients, one for the quorum (peer) port and one for the leader-election
// port — so that a server can be cut off without resetting any connection.
//
// Each server's zoo.cfg lists its own entry with the ports it binds and
// the other servers' entries with their proxies' ports, so every byte
// between two servers crosses a proxy of the server it goes to, and the
// proxy names the server it comes from by the socket's owner (procnet.go):
// faults on one server apply to its traffic in both directions. Behind
// each peer proxy a relay (peerRelay) keeps ZooKeeper from connecting
// around the proxies and from giving up on a leader whose port is not
// bound yet.
type ZooKeeperEnsemble struct {
	cluster
	Servers []*ZooKeeperServer

	mu            sync.Mutex
	sessions      map[*zk.Conn]*zkSession
	electionAddrs map[int64]string // election proxies by myid, for the relays
	closed        bool
	stop          chan struct{} // closed by Close
}

// ZooKeeperServer is one server of a ZooKeeperEnsemble.
type ZooKeeperServer struct {
	node
	// ID is the server's myid (its index in Servers plus one).
	ID int

	e             *ZooKeeperEnsemble
	dir           string // the server's directory: zoo.cfg, log configs, data/
	clientAddr    string // where the server really listens for clients
	quorumAddr    string // where it really listens for followers (2888-style)
	electionAddr  string // where it really listens for election (3888-style)
	clientProxy   *Proxy
	quorumProxy   *Proxy
	electionProxy *Proxy
	quorumRelay   *peerRelay
	electionRelay *peerRelay
}

// Addr returns the address, host:port, clients use to reach the server
// (through its proxy).
func (s *ZooKeeperServer) Addr() string { return s.clientProxy.Addr() }

// Mode asks the server directly (not through its proxy, so faults do not
// blind the harness) what it is, with the four-letter word srvr: "leader",
// "follower", "observer" or "standalone"; "" when it answers but serves
// nothing (it is looking for a leader). It fails when the server does not
// answer.
func (s *ZooKeeperServer) Mode(ctx context.Context) (string, error) {
	out, err := fourLetterWord(ctx, s.clientAddr, "srvr")
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if m, ok := strings.CutPrefix(sc.Text(), "Mode: "); ok {
			return strings.TrimSpace(m), nil
		}
	}
	if strings.Contains(out, "not currently serving") {
		return "", nil
	}
	return "", fmt.Errorf("integration: %s: unexpected srvr answer %q", s.Name, out)
}

// serverIsolated reports whether server i, cut off, has noticed: it
// stops serving. A follower that hears nothing from its leader for
// syncLimit ticks, and a leader that hears from no quorum for as long,
// leave the quorum and look for a leader, serving no client meanwhile. A
// server that still serves long after the cut still hears from a quorum:
// the cut leaks.
func (e *ZooKeeperEnsemble) serverIsolated(ctx context.Context, i int) (bool, string, error) {
	m, err := e.Servers[i].Mode(ctx)
	if err != nil {
		return false, "", err
	}
	if !serves(m) {
		return true, "", nil
	}
	return false, "serves as " + m, nil
}

// serves reports whether a Mode means the server serves clients.
func serves(mode string) bool {
	return mode == "leader" || mode == "follower" || mode == "standalone" || mode == "observer"
}

// NewZooKeeper starts a ZooKeeper ensemble for a test and stops it when the
// test ends. It fails the test if the ensemble cannot start: under CI a
// missing server is a failure, never a skip.
func NewZooKeeper(t testing.TB, opts ...Option) *ZooKeeperEnsemble {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e, err := StartZooKeeper(ctx, append([]Option{WithLogger(testLogger(t))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	e.t = t
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	return e
}

// StartZooKeeper finds Java and the ZooKeeper jars, starts an ensemble and
// waits until a majority serves under one leader. Close stops it and
// removes its files.
//
// The jars are taken from $ZOOKEEPER_CLASSPATH (a Java classpath, as
// given); else every jar in $ZOOKEEPER_HOME/lib or in $ZOOKEEPER_HOME (an
// Apache release); else Debian's zookeeper package (/usr/share/java:
// zookeeper.jar, whose manifest lists its dependencies, and the log4j
// binding it logs with). It fails, saying what is missing, when none is
// there.
func StartZooKeeper(ctx context.Context, opts ...Option) (*ZooKeeperEnsemble, error) {
	cfg := newConfig(opts)
	if cfg.size < 1 {
		return nil, fmt.Errorf("integration: ZooKeeper ensemble of %d servers", cfg.size)
	}
	java, err := javaBinary()
	if err != nil {
		return nil, err
	}
	cp, err := zooKeeperClasspath()
	if err != nil {
		return nil, err
	}
	return startWithRetry(ctx, cfg, "zookeeper", func() (*ZooKeeperEnsemble, error) {
		dir, err := makeTempDir("zk")
		if err != nil {
			return nil, err
		}
		e := &ZooKeeperEnsemble{cluster: newCluster(cfg, dir),
			sessions: map[*zk.Conn]*zkSession{}, stop: make(chan struct{})}
		e.isolated = e.serverIsolated
		if err := e.start(ctx, java, cp); err != nil {
			e.Close()
			return nil, err
		}
		return e, nil
	})
}

// Addrs returns every server's client address (through the proxies).
func (e *ZooKeeperEnsemble) Addrs() []string {
	addrs := make([]string, len(e.Servers))
	for i, s := range e.Servers {
		addrs[i] = s.Addr()
	}
	return addrs
}

// modes asks every server for its Mode at once; a server that does not
// answer gets the error's text prefixed with "!".
func (e *ZooKeeperEnsemble) modes(ctx context.Context) []string {
	out := make([]string, len(e.Servers))
	var wg sync.WaitGroup
	for i, s := range e.Servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := s.Mode(ctx)
			if err != nil {
				m = "!" + err.Error()
			}
			out[i] = m
		}()
	}
	wg.Wait()
	return out
}

// Leader returns the index of the server that leads while a majority of
// the servers serve (as leader or followers); it waits until there is
// one. It asks each server directly, not through its proxy.
func (e *ZooKeeperEnsemble) Leader(ctx context.Context) (int, error) {
	lead := -1
	err := poll(ctx, 50*time.Millisecond, func(ctx context.Context) error {
		modes := e.modes(ctx)
		var leaders []int
		serving := 0
		for i, m := range modes {
			if m == "leader" || m == "standalone" {
				leaders = append(leaders, i)
			}
			if serves(m) {
				serving++
			}
		}
		if len(leaders) == 1 && serving > len(e.Servers)/2 {
			lead = leaders[0]
			return nil
		}
		return fmt.Errorf("no leader served by a majority (modes %q)", modes)
	})
	if err != nil {
		return -1, fmt.Errorf("integration: ZooKeeper leader: %w", err)
	}
	return lead, nil
}

// WaitHealthy waits until a majority serves under one leader and every
// running server serves.
func (e *ZooKeeperEnsemble) WaitHealthy(ctx context.Context) error {
	if _, err := e.Leader(ctx); err != nil {
		return e.explain(err)
	}
	for _, s := range e.Servers {
		if s.srv.pid() == 0 {
			continue
		}
		if err := s.waitServing(ctx); err != nil {
			return e.explain(err)
		}
	}
	e.cfg.logger.Info("integration: ZooKeeper ensemble healthy")
	return nil
}

func (s *ZooKeeperServer) waitServing(ctx context.Context) error {
	err := poll(ctx, 50*time.Millisecond, func(ctx context.Context) error {
		m, err := s.Mode(ctx)
		if err == nil && !serves(m) {
			err = errors.New("not serving")
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("integration: %s not serving: %w", s.Name, err)
	}
	return nil
}

// Restart starts a killed server again, with its data directory and myid,
// and waits until it answers; when a majority of the servers runs, until
// it serves (has joined the quorum).
func (e *ZooKeeperEnsemble) Restart(ctx context.Context, i int) error {
	s := e.Servers[i]
	if err := s.run(); err != nil {
		return err
	}
	err := poll(ctx, 50*time.Millisecond, func(ctx context.Context) error {
		_, err := s.Mode(ctx)
		return err
	})
	if err == nil {
		running := 0
		for _, o := range e.Servers {
			if o.srv.pid() != 0 {
				running++
			}
		}
		if running > len(e.Servers)/2 {
			err = s.waitServing(ctx)
		}
	}
	if err != nil {
		return e.explain(fmt.Errorf("integration: restart %s: %w", s.Name, err))
	}
	return nil
}

// StopLeader kills the current leader and returns its index.
func (e *ZooKeeperEnsemble) StopLeader(ctx context.Context) (int, error) {
	i, err := e.Leader(ctx)
	if err != nil {
		return -1, err
	}
	return i, e.Kill(i)
}

// Close closes the connections made by Connect, stops every server, closes
// the proxies and removes the ensemble's files. It is safe to call more
// than once.
func (e *ZooKeeperEnsemble) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	close(e.stop)
	var conns []*zk.Conn
	for c := range e.sessions {
		conns = append(conns, c)
	}
	e.mu.Unlock()
	// zk.Conn.Close waits up to a second for the server to close the
	// session; close them all at once.
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Close()
		}()
	}
	wg.Wait()
	var errs []error
	for _, s := range e.Servers {
		if s.srv != nil {
			errs = append(errs, s.srv.kill())
			e.procs.set(s.Name, 0)
		}
	}
	for _, s := range e.Servers {
		for _, p := range []*Proxy{s.clientProxy, s.quorumProxy, s.electionProxy} {
			if p != nil {
				p.Close()
			}
		}
		for _, r := range []*peerRelay{s.quorumRelay, s.electionRelay} {
			if r != nil {
				r.Close()
			}
		}
	}
	errs = append(errs, os.RemoveAll(e.dir))
	return errors.Join(errs...)
}

// fourLetterWord sends a four-letter word to a server's client port and
// returns what it answers.
func fourLetterWord(ctx context.Context, addr, word string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	if _, err := io.WriteString(c, word); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	if err != nil {
		return "", err
	}
	return string(b), nil
}
