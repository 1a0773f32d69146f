package zklock_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/recipe"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/diagnose"
	"github.com/distlock/distlock/integration/embedded"
	"github.com/distlock/distlock/zklock"
	"github.com/go-zookeeper/zk"
)

// fastFail bounds how long NewSession takes to report servers that
// cannot be used: a second alone, then the probe.
const fastFail = 3 * time.Second

type quiet struct{}

func (quiet) Printf(string, ...any) {}

func dialZK(t *testing.T, servers ...string) *zk.Conn {
	t.Helper()
	conn, _, err := zk.Connect(servers, 10*time.Second, zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return conn
}

// TestNewSessionDiagnosis: NewSession on servers that cannot be used
// fails within seconds, even without a deadline, naming each server and
// why; on a silent one it waits for ctx and says so; a good one works.
func TestNewSessionDiagnosis(t *testing.T) {
	// An HTTP server stands for the wrong kind of server (etcd's client
	// port is one too, but an etcd member that go-zookeeper dialed takes
	// a minute to Close).
	web := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(web.Close)
	u, err := url.Parse(web.URL)
	if err != nil {
		t.Fatal(err)
	}
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	refused, refused2 := integration.RefusedAddr(t), integration.RefusedAddr(t)
	for _, tc := range []struct {
		name     string
		servers  []string
		is       error
		want     []string
		deadline time.Duration // 0: context.Background()
	}{
		{name: "refused", servers: []string{refused}, is: diagnose.ErrRefused, want: []string{refused, "connection refused"}},
		{name: "two refused", servers: []string{refused, refused2}, is: diagnose.ErrRefused, want: []string{refused, refused2, "connection refused"}},
		{name: "HTTP", servers: []string{u.Host}, is: diagnose.ErrNotStore, want: []string{u.Host, "not ZooKeeper"}},
		{name: "silent", servers: []string{silent.Addr().String()}, deadline: 3 * time.Second, is: diagnose.ErrTimeout, want: []string{silent.Addr().String(), "deadline exceeded"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			if tc.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.deadline)
				defer cancel()
			}
			conn := dialZK(t, tc.servers...)
			begin := time.Now()
			s, err := zklock.NewSession(ctx, conn)
			took := time.Since(begin)
			t.Logf("%v: %v", took.Round(time.Millisecond), err)
			if err == nil {
				s.Close(context.Background())
				t.Fatal("NewSession succeeded")
			}
			if !errors.Is(err, tc.is) {
				t.Errorf("error %v does not match %v", err, tc.is)
			}
			var derr *diagnose.Error
			if !errors.As(err, &derr) {
				t.Errorf("error %v is no *diagnose.Error", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if tc.deadline > 0 {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("error %v does not match context.DeadlineExceeded", err)
				}
			} else if took > fastFail {
				t.Errorf("took %v, want < %v", took, fastFail)
			}
		})
	}
	t.Run("good", func(t *testing.T) {
		t.Parallel()
		srv := embedded.NewZooKeeper(t)
		s, err := zklock.NewSession(context.Background(), dialZK(t, append([]string{refused}, srv.Servers()...)...))
		if err != nil {
			t.Fatal(err)
		}
		s.Close(context.Background())
	})
}

// TestWithPrefixValidation: a znode prefix must be an absolute path
// without a trailing "/"; the error says what to write.
func TestWithPrefixValidation(t *testing.T) {
	conn := dialZK(t, integration.RefusedAddr(t))
	for p, fix := range map[string]string{"distlock": "/distlock", "/a/": "/a", "/a//b": "/a/b", "": "/distlock", "/": "/distlock"} {
		_, err := zklock.NewSession(context.Background(), conn, recipe.WithPrefix(p))
		if !errors.Is(err, distlock.ErrInvalidName) {
			t.Errorf("prefix %q: %v, want ErrInvalidName", p, err)
		}
		if err != nil && !strings.Contains(err.Error(), `"`+fix+`"`) {
			t.Errorf("prefix %q: %q does not suggest %q", p, err, fix)
		}
	}
}
