// Package examplesrv serves the addresses that distlock's Example
// functions name literally — etcd on localhost:2379, ZooKeeper on
// localhost:2181, PostgreSQL on localhost:5432 — so that the examples read
// as code a user can paste and still run, with their output checked, in
// the module's tests. A test file of this module runs it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(examplesrv.Main(m, examplesrv.Etcd)) }
//
// The root module's examples, which must not import the harness, get the
// same servers from internal/testserve, which runs Serve in the command
// integration/cmd/testservers.
//
// Main binds each address at once (so a busy port is known before any
// test runs) and starts the real server behind it only when a first
// client connects: a run of a package's tests alone never starts it. The
// server is a real one — an embedded etcd member, a ZooKeeper process, a
// PostgreSQL process, as package integration runs them — on a free port,
// reached through a TCP relay on the fixed address. One server serves
// every example of the test binary, so examples use lock names of their
// own rather than rely on an empty store.
//
// The relay and the servers run in a child process (the test binary run
// again, in a mode of this package), not in the tests' process: etcd's
// test framework fails, or skips, a test while any goroutine it does not
// know is alive, and a relay needs goroutines for as long as the binary
// runs. The child ends when the test binary closes its end of a pipe,
// or exits.
//
// A fixed port that another process holds fails the test binary under CI
// (CI set in the environment); elsewhere the examples are skipped with a
// message, and the tests run.
package examplesrv

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/integration/embedded"
)

// Server is one fixed address and how to start the real server behind it.
type Server struct {
	// Name says which server it is, in messages.
	Name string
	// Port is the fixed port, on loopback.
	Port int
	// start starts the real server and returns its address and its stop.
	start func(ctx context.Context) (addr string, stop func() error, err error)
}

// Etcd is one embedded etcd member, on localhost:2379.
var Etcd = Server{Name: "etcd", Port: 2379, start: func(ctx context.Context) (string, func() error, error) {
	e, err := embedded.StartEtcd(ctx)
	if err != nil {
		return "", nil, err
	}
	return trimScheme(e.Endpoints()[0]), e.Close, nil
}}

// ZooKeeper is one ZooKeeper server, on localhost:2181.
var ZooKeeper = Server{Name: "ZooKeeper", Port: 2181, start: func(ctx context.Context) (string, func() error, error) {
	e, err := integration.StartZooKeeper(ctx, integration.WithSize(1))
	if err != nil {
		return "", nil, err
	}
	return e.Addrs()[0], e.Close, nil
}}

// Postgres is one PostgreSQL server, on localhost:5432, with the superuser
// "postgres" admitted without a password (the examples' DSN is
// postgres://postgres@localhost:5432/postgres?sslmode=disable).
var Postgres = Server{Name: "PostgreSQL", Port: 5432, start: func(ctx context.Context) (string, func() error, error) {
	p, err := integration.StartPostgres(ctx)
	if err != nil {
		return "", nil, err
	}
	return p.Addr(), p.Close, nil
}}

func trimScheme(u string) string {
	for _, s := range []string{"http://", "https://"} {
		if len(u) > len(s) && u[:len(s)] == s {
			return u[len(s):]
		}
	}
	return u
}

// relay is a fixed address's listeners and its server, started once.
type relay struct {
	srv       Server
	listeners []net.Listener

	once sync.Once
	addr string
	stop func() error
	err  error

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// childEnv, set in the child's environment, names the servers it serves.
const childEnv = "DISTLOCK_EXAMPLESRV_CHILD"

// Main binds the servers' fixed addresses (in a child process), runs the
// tests and examples, then stops the child and every server it started;
// it returns the exit code for os.Exit.
func Main(m *testing.M, servers ...Server) int {
	if names, ok := os.LookupEnv(childEnv); ok {
		return child(names, servers)
	}
	flag.Parse()
	stop, busy, err := startChild(servers)
	if err != nil {
		fmt.Fprintf(os.Stderr, "examplesrv: %v\n", err)
		return 1
	}
	defer stop()
	if len(busy) > 0 {
		for _, b := range busy {
			fmt.Fprintf(os.Stderr, "examplesrv: %s\n", b)
		}
		if ci := os.Getenv("CI"); ci != "" {
			fmt.Fprintf(os.Stderr, "examplesrv: CI=%s, so the package fails: stop what listens there to run the examples\n", ci)
			return 1
		}
		skip := "^Example"
		if s := flag.Lookup("test.skip"); s != nil && s.Value.String() != "" {
			skip = s.Value.String() + "|" + skip
		}
		flag.Set("test.skip", skip)
		fmt.Fprintln(os.Stderr, "examplesrv: the examples are skipped (under CI=true the package fails)")
	}
	return m.Run()
}

// startChild runs the test binary again as the relay's child and reads
// its report: one line per server, "ok" or why its port cannot be bound.
// It starts no goroutine in this process. stop closes the child's stdin,
// which makes it stop its servers and exit, and waits for it.
func startChild(servers []Server) (stop func(), busy []string, err error) {
	var names []string
	for _, s := range servers {
		names = append(names, s.Name)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"="+strings.Join(names, ","))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start the examples' servers: %w", err)
	}
	inR.Close()
	outW.Close()
	stop = func() {
		inW.Close()
		cmd.Wait()
		outR.Close() // only now: a write to a closed stdout would kill the child
	}
	rd := bufio.NewReader(outR)
	for range servers {
		line, err := rd.ReadString('\n')
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("the examples' servers did not report: %v", err)
		}
		if line = strings.TrimSpace(line); line != "ok" {
			busy = append(busy, line)
		}
	}
	return stop, busy, nil
}

// Serve is the relay's process for test binaries that do not import this
// package (the root module's, through internal/testserve): it serves the
// servers named (Etcd.Name, ZooKeeper.Name, Postgres.Name) as Main's child
// does, and returns the exit code.
func Serve(names []string) int {
	return child(strings.Join(names, ","), []Server{Etcd, ZooKeeper, Postgres})
}

// child is the relay's process: it binds every fixed address, reports on
// stdout, relays until stdin closes, then stops the servers it started.
func child(names string, servers []Server) int {
	var relays []*relay
	for _, s := range servers {
		if !slices.Contains(strings.Split(names, ","), s.Name) {
			continue
		}
		r, err := listen(s)
		if err != nil {
			fmt.Printf("localhost:%d, the examples' %s, is taken by another process (%v)\n", s.Port, s.Name, err)
			continue
		}
		fmt.Println("ok")
		relays = append(relays, r)
		r.serve()
	}
	os.Stdout = os.Stderr         // the report is done: anything else goes to the test's stderr
	io.Copy(io.Discard, os.Stdin) // until the test binary closes it, or exits
	for _, r := range relays {
		r.close()
	}
	return 0
}

// listen binds the port on 127.0.0.1, and on ::1 where the host has it,
// since "localhost" may resolve to either.
func listen(s Server) (*relay, error) {
	r := &relay{srv: s, conns: map[net.Conn]struct{}{}}
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", s.Port))
	if err != nil {
		return nil, err
	}
	r.listeners = append(r.listeners, l)
	l6, err := net.Listen("tcp", fmt.Sprintf("[::1]:%d", s.Port))
	switch {
	case err == nil:
		r.listeners = append(r.listeners, l6)
	case errors.Is(err, syscall.EADDRINUSE):
		l.Close()
		return nil, err
	}
	return r, nil
}

func (r *relay) serve() {
	for _, l := range r.listeners {
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				r.wg.Add(1)
				go r.pipe(c)
			}
		}()
	}
}

// pipe relays one client connection to the server, starting the server
// for the first one.
func (r *relay) pipe(c net.Conn) {
	defer r.wg.Done()
	defer c.Close()
	r.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		r.addr, r.stop, r.err = r.srv.start(ctx)
		if r.err != nil {
			fmt.Fprintf(os.Stderr, "examplesrv: start the examples' %s: %v\n", r.srv.Name, r.err)
		}
	})
	if r.err != nil {
		return
	}
	s, err := net.Dial("tcp", r.addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "examplesrv: reach the examples' %s at %s: %v\n", r.srv.Name, r.addr, err)
		return
	}
	defer s.Close()
	r.mu.Lock()
	r.conns[c], r.conns[s] = struct{}{}, struct{}{}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.conns, c)
		delete(r.conns, s)
		r.mu.Unlock()
	}()
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(s, c)
	go cp(c, s)
	<-done
	<-done
}

// close stops accepting, cuts the relayed connections and stops the
// server if it was started.
func (r *relay) close() {
	for _, l := range r.listeners {
		l.Close()
	}
	r.mu.Lock()
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.once.Do(func() {}) // waits for a start under way; none starts after it
	if r.stop != nil {
		if err := r.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "examplesrv: stop the examples' %s: %v\n", r.srv.Name, err)
		}
	}
	r.wg.Wait()
}
