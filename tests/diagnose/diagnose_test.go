package diagnose_test

import (
	"context"
	"crypto/tls"
	"errors"
	"github.com/distlock/distlock/integration"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/diagnose"
	"github.com/distlock/distlock/integration/embedded"
)

// The failures users meet, each made real (a closed port, a listener that
// never answers, HTTP and TLS servers, services that send garbage, the
// other store, real etcd and ZooKeeper servers): each endpoint gets its
// verdict, final ones within a second or two.

// serve accepts connections on a new listener and hands each to f (nil:
// accept and say nothing).
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
				if f == nil {
					io.Copy(io.Discard, c)
					return
				}
				f(c)
			}()
		}
	}()
	return l.Addr().String()
}

func httpServer(t *testing.T) string {
	s := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

func tlsServer(t *testing.T) string {
	s := httptest.NewUnstartedServer(http.NotFoundHandler())
	s.EnableHTTP2 = true
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.StartTLS()
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "https://")
}

func TestProbe(t *testing.T) {
	etcd := embedded.NewEtcd(t)
	zkServer := embedded.NewZooKeeper(t)
	etcdAddr := strings.TrimPrefix(etcd.Endpoints()[0], "http://")
	banner := serve(t, func(c net.Conn) { c.Write([]byte("SSH-2.0-OpenSSH\r\n")); io.Copy(io.Discard, c) })
	silent := serve(t, nil)
	for _, tc := range []struct {
		name    string
		store   diagnose.Store
		ep      string
		tls     bool
		is      error // nil: no verdict
		detail  string
		timeout time.Duration
	}{
		{name: "etcd", store: diagnose.EtcdStore, ep: etcd.Endpoints()[0]},
		{name: "ZooKeeper", store: diagnose.ZooKeeperStore, ep: zkServer.Servers()[0]},
		{name: "etcd refused", store: diagnose.EtcdStore, ep: integration.RefusedAddr(t), is: diagnose.ErrRefused},
		{name: "ZooKeeper refused", store: diagnose.ZooKeeperStore, ep: integration.RefusedAddr(t), is: diagnose.ErrRefused},
		{name: "unknown host", store: diagnose.EtcdStore, ep: "no-such-host.invalid:2379", is: diagnose.ErrUnknownHost, detail: "unknown host"},
		{name: "etcd no port", store: diagnose.EtcdStore, ep: "localhost", is: diagnose.ErrBadEndpoint, detail: "write localhost:2379"},
		{name: "etcd URL no port", store: diagnose.EtcdStore, ep: "http://localhost", is: diagnose.ErrBadEndpoint, detail: "write http://localhost:2379"},
		{name: "unix socket", store: diagnose.EtcdStore, ep: "unix:///tmp/nothing.sock"},
		{name: "ZooKeeper to etcd", store: diagnose.EtcdStore, ep: zkServer.Servers()[0], is: diagnose.ErrNotStore},
		{name: "etcd to ZooKeeper", store: diagnose.ZooKeeperStore, ep: etcdAddr, is: diagnose.ErrNotStore},
		{name: "HTTP to etcd", store: diagnose.EtcdStore, ep: httpServer(t), is: diagnose.ErrNotStore, detail: "HTTP/1"},
		{name: "HTTP to ZooKeeper", store: diagnose.ZooKeeperStore, ep: httpServer(t), is: diagnose.ErrNotStore, detail: "HTTP server"},
		{name: "TLS server, plain etcd client", store: diagnose.EtcdStore, ep: tlsServer(t), is: diagnose.ErrTLSRequired},
		{name: "TLS server, TLS etcd client", store: diagnose.EtcdStore, ep: tlsServer(t), tls: true},
		{name: "TLS server to ZooKeeper", store: diagnose.ZooKeeperStore, ep: tlsServer(t), is: diagnose.ErrTLSRequired},
		{name: "TLS to plain etcd", store: diagnose.EtcdStore, ep: "https://" + etcdAddr, is: diagnose.ErrTLSOffered},
		{name: "banner", store: diagnose.ZooKeeperStore, ep: banner, is: diagnose.ErrNotStore, detail: "spoke first"},
		{name: "silent", store: diagnose.EtcdStore, ep: silent, is: diagnose.ErrTimeout, timeout: time.Second, detail: "nothing answered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			timeout := tc.timeout
			if timeout == 0 {
				timeout = 15 * time.Second // a bound for a starved machine, not the verdict's
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			begin := time.Now()
			var err error
			if tc.store == diagnose.EtcdStore {
				var tc2 *tls.Config
				if tc.tls {
					tc2 = &tls.Config{}
				}
				err = diagnose.Etcd(ctx, []string{tc.ep}, tc2)
			} else {
				err = diagnose.ZooKeeper(ctx, []string{tc.ep})
			}
			took := time.Since(begin)
			t.Logf("%v: %v", took.Round(time.Millisecond), err)
			if tc.is == nil {
				if err != nil {
					t.Fatalf("got %v, want no verdict", err)
				}
				return
			}
			var derr *diagnose.Error
			if !errors.Is(err, tc.is) || !errors.As(err, &derr) {
				t.Fatalf("got %v, want a *diagnose.Error matching %v", err, tc.is)
			}
			if !strings.Contains(err.Error(), tc.ep) || !strings.Contains(err.Error(), tc.detail) {
				t.Errorf("%q does not name %s, or lacks %q", err, tc.ep, tc.detail)
			}
			if final := tc.is != diagnose.ErrTimeout; derr.Final() != final {
				t.Errorf("Final() = %v, want %v", derr.Final(), final)
			}
			if tc.is != diagnose.ErrTimeout && took > 5*time.Second {
				t.Errorf("took %v for a final verdict", took)
			}
		})
	}
}

// TestError: endpoints with the same verdict share one message; mixed
// ones are named one by one; one that answers makes the error not final.
func TestError(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, b := integration.RefusedAddr(t), integration.RefusedAddr(t)
	err := diagnose.ZooKeeper(ctx, []string{a, b})
	if want := "ZooKeeper " + a + "," + b + ": connection refused"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
	err = diagnose.Etcd(ctx, []string{a, "localhost"}, nil)
	if want := "etcd: " + a + ": connection refused; localhost: no port"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("got %v, want %s...", err, want)
	}
	if !errors.Is(err, diagnose.ErrRefused) || !errors.Is(err, diagnose.ErrBadEndpoint) {
		t.Errorf("%v does not match both verdicts", err)
	}
	etcd := embedded.NewEtcd(t)
	err = diagnose.Etcd(ctx, append([]string{a}, etcd.Endpoints()...), nil)
	var derr *diagnose.Error
	if !errors.As(err, &derr) || derr.Final() || len(derr.Endpoints) != 2 || derr.Endpoints[1].Err != nil {
		t.Errorf("one refused, one etcd: %v, want a verdict on the first only, not final", err)
	}
}
