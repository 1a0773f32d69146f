package integration

import (
	"archive/zip"
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
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

// StartZooKeeper finds Java and the ZooKeeper jars (see zooKeeperClasspath),
// starts an ensemble and waits until a majority serves under one leader.
// Close stops it and removes its files.
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

// ZooKeeper's timing, in ticks of zkTick: fast enough that a fault test
// sees elections in about a second, slow enough that a busy machine does
// not make the servers drop each other.
const (
	zkTick      = 200 * time.Millisecond
	zkInitLimit = 20 // ticks a follower has to connect and sync to a leader
	zkSyncLimit = 5  // ticks a follower may lag (or be silent) before it is dropped
)

// ZooKeeperTickTime is the tickTime of the harness's ZooKeeper servers:
// pass it to zklock.WithTickTime so that a Session's client-side deadline
// is as late as these servers allow.
const ZooKeeperTickTime = zkTick

func (e *ZooKeeperEnsemble) start(ctx context.Context, java, cp string) error {
	n := e.cfg.size
	quorum := n > 1
	// Hold the servers' real ports until the proxies have theirs, so that
	// no proxy is given a port a server is about to bind.
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	reserve := func() (string, error) {
		l, err := serverListener()
		if err != nil {
			return "", err
		}
		held = append(held, l)
		return l.Addr().String(), nil
	}
	for i := range n {
		s := &ZooKeeperServer{node: node{Name: fmt.Sprintf("zk%d", i), procs: e.procs}, ID: i + 1, e: e}
		s.dir = filepath.Join(e.dir, s.Name)
		e.Servers = append(e.Servers, s)
		e.nodes = append(e.nodes, &s.node)
		var err error
		if s.clientAddr, err = reserve(); err != nil {
			return err
		}
		if !quorum {
			continue
		}
		if s.quorumAddr, err = reserve(); err != nil {
			return err
		}
		if s.electionAddr, err = reserve(); err != nil {
			return err
		}
	}
	for _, s := range e.Servers {
		var err error
		if s.clientProxy, err = e.newProxy(s.Name, s.clientAddr); err != nil {
			return err
		}
		if !quorum {
			continue
		}
		if s.quorumRelay, err = newPeerRelay(s.quorumAddr, nil); err != nil {
			return err
		}
		if s.quorumProxy, err = e.newProxy(s.Name, s.quorumRelay.Addr()); err != nil {
			return err
		}
		if s.electionRelay, err = newPeerRelay(s.electionAddr, e.electionProxyAddr); err != nil {
			return err
		}
		if s.electionProxy, err = e.newProxy(s.Name, s.electionRelay.Addr()); err != nil {
			return err
		}
	}
	e.mu.Lock()
	e.electionAddrs = map[int64]string{}
	for _, s := range e.Servers {
		if s.electionProxy != nil {
			e.electionAddrs[int64(s.ID)] = s.electionProxy.Addr()
		}
	}
	e.mu.Unlock()
	for _, s := range e.Servers {
		data := filepath.Join(s.dir, "data")
		if err := os.MkdirAll(data, 0o755); err != nil {
			return err
		}
		logCfg, err := writeZooKeeperLogConfigs(s.dir)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(data, "myid"), []byte(strconv.Itoa(s.ID)+"\n"), 0o644); err != nil {
			return err
		}
		zooCfg := filepath.Join(s.dir, "zoo.cfg")
		if err := os.WriteFile(zooCfg, []byte(e.zooCfg(s, data)), 0o644); err != nil {
			return err
		}
		argv := []string{java,
			"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
			"-Djava.net.preferIPv4Stack=true",
			"-Djava.io.tmpdir=" + s.dir,
			"-Dzookeeper.log.dir=" + s.dir,
			"-Dzookeeper.jmx.log4j.disable=true",
			"-Dzookeeper.admin.enableServer=false",
			// A server that has looked for a leader in vain for a while
			// still retries every second, so it rejoins soon after a heal.
			"-Dzookeeper.fastleader.maxNotificationInterval=1000",
		}
		argv = append(argv, logCfg...)
		argv = append(argv, "-cp", cp, "org.apache.zookeeper.server.quorum.QuorumPeerMain", zooCfg)
		srv, err := e.cfg.newServer(serverSpec{
			name: s.Name,
			argv: argv,
			log:  filepath.Join(e.dir, s.Name+".log"),
			dirs: []string{s.dir},
		})
		if err != nil {
			return err
		}
		s.srv = srv
	}
	for _, l := range held {
		l.Close()
	}
	held = nil
	for _, s := range e.Servers {
		if err := s.run(); err != nil {
			return err
		}
	}
	e.cfg.logger.Info("integration: ZooKeeper ensemble starting", "servers", n, "dir", e.dir, "provider", e.cfg.provider)
	wctx, cancel := e.untilExit(ctx)
	defer cancel(nil)
	return e.WaitHealthy(wctx)
}

// zooCfg is server s's configuration: its own entry with the ports it
// binds, the others' with their proxies' ports.
func (e *ZooKeeperEnsemble) zooCfg(s *ZooKeeperServer, data string) string {
	host, port, _ := net.SplitHostPort(s.clientAddr)
	lines := []string{
		"tickTime=" + strconv.Itoa(int(zkTick/time.Millisecond)),
		"initLimit=" + strconv.Itoa(zkInitLimit),
		"syncLimit=" + strconv.Itoa(zkSyncLimit),
		"dataDir=" + data,
		"clientPortAddress=" + host,
		"clientPort=" + port,
		"maxClientCnxns=0",
		"minSessionTimeout=" + strconv.Itoa(int(2*zkTick/time.Millisecond)),
		"maxSessionTimeout=60000",
		"admin.enableServer=false",
		"4lw.commands.whitelist=*",
		// Tests need no fsync: a killed process's writes survive in the
		// page cache, and a machine crash ends the test anyway.
		"forceSync=no",
		"preAllocSize=1024",
	}
	if len(e.Servers) > 1 {
		lines = append(lines,
			"standaloneEnabled=false",
			"reconfigEnabled=false",
			"quorumListenOnAllIPs=false",
		)
		for _, o := range e.Servers {
			q, el := o.quorumProxy.Addr(), o.electionProxy.Addr()
			if o == s {
				q, el = o.quorumAddr, o.electionAddr
			}
			lines = append(lines, fmt.Sprintf("server.%d=%s:%s", o.ID, q, portOf(el)))
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

func portOf(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// electionProxyAddr is the address server sid's peers reach its election
// port at: its election proxy ("" for an unknown sid).
func (e *ZooKeeperEnsemble) electionProxyAddr(sid int64) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.electionAddrs[sid]
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

// peerRelay stands between one of a server's peer proxies (quorum or
// election) and the port the server binds, and does two things a proxy
// does not.
//
// It waits for the port. A follower connects to its leader's quorum port
// the moment it learns who won, which can be before the leader binds it.
// Without proxies that connection is refused and the follower retries; the
// proxy instead accepts it and then, its dial refused, closes it, and the
// follower gives up (and the leader waits initLimit for it). So the relay
// dials until the port answers, for up to peerDialPatience.
//
// On an election port it rewrites one field. A server that opens an
// election connection to a server with a larger id sends its own election
// address first, and the larger one drops the connection and connects back
// to that address (ZooKeeper's QuorumCnxManager): its real port, around
// the proxy. The relay replaces the address with the sender's election
// proxy, so the connection back crosses that proxy like every other.
type peerRelay struct {
	ln        net.Listener
	upstream  string
	advertise func(sid int64) string // nil: no rewriting

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
}

// peerDialPatience is how long a relay waits for a server's peer port.
const peerDialPatience = 3 * time.Second

// ZooKeeper's election protocol versions (QuorumCnxManager): a connection
// starts with the version, then the sender's id, then its address(es).
const (
	zkElectionV1 = -65536
	zkElectionV2 = -65535
)

func newPeerRelay(upstream string, advertise func(int64) string) (*peerRelay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &peerRelay{ln: ln, upstream: upstream, advertise: advertise,
		ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.serve()
	return r, nil
}

func (r *peerRelay) Addr() string { return r.ln.Addr().String() }

func (r *peerRelay) Close() error {
	r.cancel()
	err := r.ln.Close()
	r.mu.Lock()
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
	return err
}

func (r *peerRelay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx.Err() != nil {
		c.Close()
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *peerRelay) untrack(c net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.conns, c)
	c.Close()
}

func (r *peerRelay) serve() {
	defer r.wg.Done()
	for {
		in, err := r.ln.Accept()
		if err != nil {
			return
		}
		if !r.track(in) {
			return
		}
		r.wg.Add(1)
		go r.handle(in)
	}
}

func (r *peerRelay) handle(in net.Conn) {
	defer r.wg.Done()
	defer r.untrack(in)
	var head []byte
	if r.advertise != nil {
		var err error
		if head, err = r.rewriteHeader(in); err != nil {
			return
		}
	}
	out, err := r.dial()
	if err != nil {
		return
	}
	if !r.track(out) {
		return
	}
	defer r.untrack(out)
	if len(head) > 0 {
		if _, err := out.Write(head); err != nil {
			return
		}
	}
	done := make(chan struct{}, 2)
	cp := func(w, rd net.Conn) {
		io.Copy(w, rd)
		if cw, ok := w.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(out, in)
	go cp(in, out)
	<-done
	in.Close()
	out.Close()
	<-done
}

// dial connects to the server's port, retrying while it is refused, for
// up to peerDialPatience.
func (r *peerRelay) dial() (net.Conn, error) {
	ctx, cancel := context.WithTimeout(r.ctx, peerDialPatience)
	defer cancel()
	for {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", r.upstream)
		if err == nil {
			return c, nil
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
}

// rewriteHeader reads a connection's initial message and returns it with
// the sender's address replaced by its election proxy's. ZooKeeper reads
// the message with one read, so it is sent on with one write.
func (r *peerRelay) rewriteHeader(in net.Conn) ([]byte, error) {
	var b [20]byte
	if _, err := io.ReadFull(in, b[:8]); err != nil {
		return nil, err
	}
	version := int64(binary.BigEndian.Uint64(b[:8]))
	if version != zkElectionV1 && version != zkElectionV2 {
		return b[:8], nil // an old-style id only, or unknown: pass it on
	}
	if _, err := io.ReadFull(in, b[8:20]); err != nil {
		return nil, err
	}
	sid := int64(binary.BigEndian.Uint64(b[8:16]))
	n := binary.BigEndian.Uint32(b[16:20])
	if n > 2048 {
		return nil, fmt.Errorf("election message of %d bytes", n)
	}
	addr := make([]byte, n)
	if _, err := io.ReadFull(in, addr); err != nil {
		return nil, err
	}
	if a := r.advertise(sid); a != "" {
		addr = []byte(a)
	}
	head := append([]byte(nil), b[:16]...)
	head = binary.BigEndian.AppendUint32(head, uint32(len(addr)))
	return append(head, addr...), nil
}

// javaBinary finds java: $JAVA_HOME/bin/java, else java on PATH.
func javaBinary() (string, error) {
	if home := os.Getenv("JAVA_HOME"); home != "" {
		if p := filepath.Join(home, "bin", "java"); fileExists(p) {
			return p, nil
		}
	}
	p, err := exec.LookPath("java")
	if err != nil {
		return "", errors.New("integration: ZooKeeper needs Java: no java on PATH (nor in $JAVA_HOME/bin); " +
			"install it with `apt-get install zookeeper` (which brings a JRE) or `apt-get install default-jre-headless`")
	}
	return p, nil
}

// Debian's ZooKeeper package (zookeeper, libzookeeper-java) puts the jars
// here; zookeeper.jar's manifest names the jars it needs.
const debianJavaDir = "/usr/share/java"

// zooKeeperClasspath returns the Java classpath that runs the ZooKeeper
// server:
//
//   - $ZOOKEEPER_CLASSPATH, as given;
//   - else every jar in $ZOOKEEPER_HOME/lib, or in $ZOOKEEPER_HOME itself
//     (an Apache release's lib/ directory);
//   - else Debian's zookeeper package: /usr/share/java/zookeeper.jar, whose
//     manifest lists its dependencies, and the slf4j-log4j12 binding and
//     log4j 1.2 that the package logs with.
//
// It fails, saying what is missing, when the jars are not there.
func zooKeeperClasspath() (string, error) {
	const install = "install ZooKeeper with `apt-get install zookeeper`, or set ZOOKEEPER_HOME to a directory " +
		"with the ZooKeeper jars (an Apache release's lib/), or ZOOKEEPER_CLASSPATH to a Java classpath that has them"
	if cp := os.Getenv("ZOOKEEPER_CLASSPATH"); cp != "" {
		var missing []string
		for _, p := range filepath.SplitList(cp) {
			if p != "" && !strings.HasSuffix(p, "*") && !fileExists(p) {
				missing = append(missing, p)
			}
		}
		if len(missing) > 0 {
			return "", fmt.Errorf("integration: ZOOKEEPER_CLASSPATH names files that do not exist: %s", strings.Join(missing, ", "))
		}
		return cp, nil
	}
	if home := os.Getenv("ZOOKEEPER_HOME"); home != "" {
		for _, dir := range []string{filepath.Join(home, "lib"), home} {
			jars, _ := filepath.Glob(filepath.Join(dir, "*.jar"))
			if hasJar(jars, "zookeeper") && hasJar(jars, "zookeeper-jute") {
				sort.Strings(jars)
				return strings.Join(jars, string(filepath.ListSeparator)), nil
			}
		}
		return "", fmt.Errorf("integration: ZOOKEEPER_HOME=%s: neither it nor its lib/ holds zookeeper-*.jar and zookeeper-jute-*.jar; %s", home, install)
	}
	main := filepath.Join(debianJavaDir, "zookeeper.jar")
	if !fileExists(main) {
		return "", fmt.Errorf("integration: ZooKeeper not found: %s is missing; %s", main, install)
	}
	deps, err := zkJarClassPath(main)
	if err != nil {
		return "", fmt.Errorf("integration: read %s: %w", main, err)
	}
	// The JVM skips a Class-Path entry that is missing, and a server
	// needs only some of them (jline is for the CLI, Jetty and Jackson for
	// the admin server): require those it cannot start without.
	var missing []string
	for _, d := range append(deps, filepath.Join(debianJavaDir, "zookeeper-jute.jar")) {
		b := filepath.Base(d)
		needed := b == "zookeeper-jute.jar" || b == "slf4j-api.jar" || strings.HasPrefix(b, "netty-")
		if needed && !fileExists(d) {
			missing = append(missing, d)
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("integration: ZooKeeper's jars are incomplete, missing: %s; %s", strings.Join(missing, ", "), install)
	}
	cp := []string{main}
	// The server logs through slf4j; without a binding it runs silently.
	for _, j := range []string{"slf4j-log4j12.jar", "log4j-1.2.jar"} {
		if p := filepath.Join(debianJavaDir, j); fileExists(p) {
			cp = append(cp, p)
		}
	}
	return strings.Join(cp, string(filepath.ListSeparator)), nil
}

// hasJar reports whether jars holds name.jar or name-<version>.jar.
func hasJar(jars []string, name string) bool {
	for _, j := range jars {
		b := strings.TrimSuffix(filepath.Base(j), ".jar")
		if b == name {
			return true
		}
		if v, ok := strings.CutPrefix(b, name+"-"); ok && v != "" && v[0] >= '0' && v[0] <= '9' {
			return true
		}
	}
	return false
}

// zkJarClassPath returns the Class-Path entries of a jar's manifest.
func zkJarClassPath(jar string) ([]string, error) {
	zr, err := zip.OpenReader(jar)
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	f, err := zr.Open("META-INF/MANIFEST.MF")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	// Manifest lines are wrapped at 72 bytes; a continuation starts with
	// a space.
	text := strings.ReplaceAll(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n ", "")
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, "Class-Path:"); ok {
			var out []string
			for _, p := range strings.Fields(v) {
				if !filepath.IsAbs(p) {
					p = filepath.Join(filepath.Dir(jar), p)
				}
				out = append(out, p)
			}
			return out, nil
		}
	}
	return nil, nil
}

// writeZooKeeperLogConfigs writes log configurations that send the
// servers' logs to standard output (the server's log file) at WARN, with
// the servers' state changes at INFO: log4j 1.2 for Debian's package,
// logback for an Apache release. It returns the JVM flags that use them.
func writeZooKeeperLogConfigs(dir string) ([]string, error) {
	const pattern = "%d{ISO8601} [myid:%X{myid}] %-5p [%t:%C{1}@%L] - %m%n"
	log4j := strings.Join([]string{
		"log4j.rootLogger=WARN, CONSOLE",
		"log4j.logger.org.apache.zookeeper.server.quorum.QuorumPeer=INFO",
		"log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender",
		"log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout",
		"log4j.appender.CONSOLE.layout.ConversionPattern=" + pattern,
	}, "\n") + "\n"
	logback := `<configuration>
  <appender name="CONSOLE" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>` + pattern + `</pattern></encoder>
  </appender>
  <logger name="org.apache.zookeeper.server.quorum.QuorumPeer" level="INFO"/>
  <root level="WARN"><appender-ref ref="CONSOLE"/></root>
</configuration>
`
	l4, lb := filepath.Join(dir, "log4j.properties"), filepath.Join(dir, "logback.xml")
	if err := os.WriteFile(l4, []byte(log4j), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(lb, []byte(logback), 0o644); err != nil {
		return nil, err
	}
	return []string{"-Dlog4j.configuration=file:" + l4, "-Dlogback.configurationFile=" + lb}, nil
}
