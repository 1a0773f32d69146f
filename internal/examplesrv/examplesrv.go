// Package examplesrv serves the addresses that distlock's Example
// functions name literally — etcd on localhost:2379, ZooKeeper on
// localhost:2181, PostgreSQL on localhost:5432 — so that the examples read
// as code a user can paste and still run, with their output checked, in
// the module's tests. It is imported only by test files, from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(examplesrv.Main(m, examplesrv.Etcd)) }
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
// A fixed port that another process holds fails the test binary under CI
// (CI set in the environment); elsewhere the examples are skipped with a
// message, and the tests run.
package examplesrv

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
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

// Main binds the servers' fixed addresses, runs the tests and examples,
// then stops every server that was started; it returns the exit code for
// os.Exit.
func Main(m *testing.M, servers ...Server) int {
	flag.Parse()
	var relays []*relay
	defer func() {
		for _, r := range relays {
			r.close()
		}
	}()
	var busy []string
	for _, s := range servers {
		r, err := listen(s)
		if err != nil {
			busy = append(busy, fmt.Sprintf("localhost:%d, the examples' %s, is taken by another process (%v)", s.Port, s.Name, err))
			continue
		}
		relays = append(relays, r)
		go r.serve()
	}
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
	r.once.Do(func() {}) // none started now
	if r.stop != nil {
		if err := r.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "examplesrv: stop the examples' %s: %v\n", r.srv.Name, err)
		}
	}
	r.wg.Wait()
}
