package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/integration"

	"github.com/distlock/distlock/diagnose"
)

// The connection failures users meet, each made real by the test (a
// closed port, a listener that never answers, an HTTP server, a TLS
// server, services that send garbage, etcd's peer port, the other store's
// port, the harness's real etcd and ZooKeeper), on both stores: each gets
// its own one-line message naming the endpoint with a hint, exit 69, and
// an error that matches its sentinel; refused and unknown hosts fail at
// once rather than after --dial-timeout.

// fastBound is how long a refused or unknown endpoint may take to be
// reported: far below the 5s --dial-timeout, far above a loaded
// machine's start-up time.
const fastBound = 3 * time.Second

// silentListener returns the address of a listener that never accepts:
// the kernel completes TCP connects, nothing ever answers.
func silentListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.Addr().String()
}

// serve accepts connections on a new listener and hands each to f.
func serve(t *testing.T, f func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(time.Minute))
				f(c)
			}()
		}
	}()
	return l.Addr().String()
}

// garbageBanner is a service that sends garbage as soon as a client
// connects, and then keeps the connection open.
func garbageBanner(t *testing.T) string {
	return serve(t, func(c net.Conn) {
		c.Write([]byte("\x00\xffSSH-ish \x13garbage\r\n"))
		io.Copy(io.Discard, c)
	})
}

// garbageReply is a service that answers whatever it reads with garbage
// and hangs up.
func garbageReply(t *testing.T) string {
	return serve(t, func(c net.Conn) {
		buf := make([]byte, 64)
		if _, err := c.Read(buf); err == nil {
			c.Write([]byte("\x7fELF\x02\x01garbage garbage"))
		}
	})
}

// httpServer is a plain HTTP/1.1 server.
func httpServer(t *testing.T) string {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }))
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

// tlsServer is an HTTPS server that speaks HTTP/2, as a TLS etcd would
// on the wire.
func tlsServer(t *testing.T) string {
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }))
	s.EnableHTTP2 = true
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // the probes' handshakes
	s.StartTLS()
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "https://")
}

// etcdPeerURL is the peer URL of the run's etcd cluster's first member.
func etcdPeerURL(t *testing.T) string {
	t.Helper()
	cli, err := etcdCluster(t).Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	resp, err := cli.MemberList(testCtx(t))
	if err != nil || len(resp.Members) == 0 || len(resp.Members[0].PeerURLs) == 0 {
		t.Fatalf("member list: %v, %v", resp, err)
	}
	return resp.Members[0].PeerURLs[0]
}

// hostPort is u's host:port.
func hostPort(t *testing.T, u string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return p.Host
}

type connCase struct {
	name    string
	ep      func(t *testing.T) string // the --etcd or --zk value
	extra   []string
	want    []string // in the one-line message
	is      error    // the sentinel the error matches (nil: a usage error)
	fast    bool     // reported within fastBound
	timeout time.Duration
}

func TestConnDiagnosisEtcd(t *testing.T) {
	invalid := fmt.Sprintf("no-such-host-%d.invalid", os.Getpid())
	testConnCases(t, "--etcd", []connCase{
		{name: "refused", ep: refusedAddr, want: []string{"connection refused: is etcd running on 127.0.0.1:", "pass --etcd with etcd's client port"}, is: diagnose.ErrRefused, fast: true},
		{name: "unknown host", ep: func(*testing.T) string { return invalid + ":2379" }, want: []string{`unknown host "` + invalid + `"`, "check the host name in --etcd"}, is: diagnose.ErrUnknownHost, fast: true},
		{name: "no answer", ep: silentListener, timeout: time.Second, want: []string{"the connection was accepted, but nothing answered within --dial-timeout 1s", "hung or overloaded"}, is: diagnose.ErrTimeout},
		{name: "TLS required", ep: tlsServer, want: []string{"speaks TLS", "use an https:// endpoint"}, is: diagnose.ErrTLSRequired},
		{name: "TLS offered to a plain server", ep: func(t *testing.T) string { return "https://" + hostPort(t, etcdCluster(t).Endpoints()[0]) },
			want: []string{"speaks HTTP/2 without TLS", "pass --etcd http://HOST:PORT"}, is: diagnose.ErrTLSOffered},
		{name: "HTTP server", ep: httpServer, want: []string{"not etcd: an HTTP/1 server answered", "not the peer port"}, is: diagnose.ErrNotStore},
		{name: "peer port", ep: func(t *testing.T) string { return etcdPeerURL(t) }, want: []string{"not etcd", "not the peer port (2380)"}, is: diagnose.ErrNotStore},
		{name: "garbage banner", ep: garbageBanner, want: []string{"not etcd: it spoke first"}, is: diagnose.ErrNotStore},
		{name: "garbage reply", ep: garbageReply, want: []string{"not etcd: it answered HTTP/2's greeting with"}, is: diagnose.ErrNotStore},
		{name: "no port", ep: func(*testing.T) string { return "localhost" }, want: []string{`no port in "localhost"`, "write localhost:2379"}, is: diagnose.ErrBadEndpoint, fast: true},
	})
}

func TestConnDiagnosisZooKeeper(t *testing.T) {
	invalid := fmt.Sprintf("no-such-host-%d.invalid", os.Getpid())
	testConnCases(t, "--zk", []connCase{
		{name: "refused", ep: refusedAddr, want: []string{"connection refused: is ZooKeeper running on 127.0.0.1:", "pass --zk with a server's clientPort"}, is: diagnose.ErrRefused, fast: true},
		{name: "unknown host", ep: func(*testing.T) string { return invalid + ":2181" }, want: []string{`unknown host "` + invalid + `"`, "check the host name in --zk"}, is: diagnose.ErrUnknownHost, fast: true},
		{name: "no answer", ep: silentListener, timeout: time.Second, want: []string{"the connection was accepted, but nothing answered within --dial-timeout 1s"}, is: diagnose.ErrTimeout},
		{name: "TLS required", ep: tlsServer, want: []string{"speaks TLS", "distlock talks to ZooKeeper without TLS"}, is: diagnose.ErrTLSRequired},
		// The command has no TLS for ZooKeeper: offering it is refused
		// before connecting, against the harness's real ensemble.
		{name: "TLS offered to a plain server", ep: func(t *testing.T) string { return strings.Join(zkEnsemble(t).Addrs(), ",") }, extra: []string{"--cacert", os.DevNull},
			want: []string{"--cacert, --cert and --key are for etcd: distlock talks to ZooKeeper without TLS"}},
		{name: "HTTP server", ep: httpServer, want: []string{"not ZooKeeper: an HTTP server answered"}, is: diagnose.ErrNotStore},
		{name: "etcd client port", ep: func(t *testing.T) string { return hostPort(t, etcdCluster(t).Endpoints()[0]) }, want: []string{"not ZooKeeper"}, is: diagnose.ErrNotStore},
		{name: "garbage banner", ep: garbageBanner, want: []string{"not ZooKeeper: it spoke first"}, is: diagnose.ErrNotStore},
		{name: "garbage reply", ep: garbageReply, want: []string{"not ZooKeeper: it answered ZooKeeper's srvr with"}, is: diagnose.ErrNotStore},
	})
}

// testConnCases runs each case with the binary (status, and run for the
// fast ones) and in this process (connFlags.open, for the error's type).
func testConnCases(t *testing.T, flagName string, cases []connCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			ep := tc.ep(t)
			timeout := tc.timeout
			if timeout == 0 {
				// A verdict that does not rest on the timeout comes as
				// soon as the probe has read the server; the bound only
				// keeps a starved machine (parallel cases, each a
				// race-built binary) from turning it into "nothing
				// answered".
				timeout = 15 * time.Second
			}
			wantCode := exitUnreachable
			if tc.is == nil {
				wantCode = exitUsage
			}
			env := []string{"ETCDCTL_ENDPOINTS=", "DISTLOCK_ZK=", "ETCDCTL_CACERT=", "ETCDCTL_CERT=", "ETCDCTL_KEY="}
			flags := append([]string{flagName + "=" + ep, "--dial-timeout=" + timeout.String()}, tc.extra...)
			cmds := [][]string{append(append([]string{"status"}, flags...), "x")}
			if tc.fast {
				cmds = append(cmds, append(append([]string{"run"}, flags...), "--lock", "x", "--", "echo", "ran"))
			}
			binary(t) // built before the clock starts
			for _, args := range cmds {
				begin := time.Now()
				r := cli(ctx, t, env, args...)
				took := time.Since(begin)
				t.Logf("%s: %v, exit %d: %s", args[0], took.Round(time.Millisecond), r.code, strings.TrimSpace(r.stderr))
				if r.code != wantCode || strings.Count(r.stderr, "\n") != 1 || strings.Count(r.stderr, "distlock:") != 1 || r.stdout != "" {
					t.Errorf("%s: exit %d, stdout %q, stderr %q; want %d and one line", args[0], r.code, r.stdout, r.stderr, wantCode)
				}
				for _, w := range tc.want {
					if !strings.Contains(r.stderr, w) {
						t.Errorf("%s: stderr %q lacks %q", args[0], r.stderr, w)
					}
				}
				if tc.is != nil && !strings.Contains(r.stderr, strings.TrimPrefix(strings.TrimPrefix(ep, "https://"), "http://")) {
					t.Errorf("%s: stderr %q does not name the endpoint %s", args[0], r.stderr, ep)
				}
				if tc.fast && took > fastBound {
					t.Errorf("%s: took %v, want well under --dial-timeout (< %v)", args[0], took, fastBound)
				}
				if took > timeout+10*time.Second {
					t.Errorf("%s: took %v with --dial-timeout %v", args[0], took, timeout)
				}
			}
			if tc.is == nil {
				return
			}
			// In this process: the error is typed, with the exit code.
			c := connFlags{timeout: timeout, set: map[string]bool{}}
			if flagName == "--etcd" {
				c.etcd = ep
			} else {
				c.zk = ep
			}
			octx, cancel := context.WithTimeout(ctx, 2*timeout)
			defer cancel()
			b, err := c.open(octx)
			if b != nil {
				b.Close()
			}
			var ee *exitError
			if !errors.Is(err, tc.is) || !errors.As(err, &ee) || ee.code != exitUnreachable {
				t.Errorf("open: %v; want exit %d matching %v", err, exitUnreachable, tc.is)
			}
		})
	}
}

// refusedAddr is integration.RefusedAddr as a connCase's endpoint.
func refusedAddr(t *testing.T) string { return integration.RefusedAddr(t) }
