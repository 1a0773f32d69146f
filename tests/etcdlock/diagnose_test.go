package etcdlock_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/recipe"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/diagnose"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/integration/embedded"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// fastFail bounds how long NewSession takes to report an endpoint that
// cannot be used: a second alone, then the probe.
const fastFail = 3 * time.Second

func lazyClient(t *testing.T, endpoints ...string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// TestNewSessionDiagnosis: NewSession on endpoints that cannot be used
// fails within seconds, even without a deadline, naming each endpoint and
// why; on a silent one it waits for ctx and says so; a good one works.
func TestNewSessionDiagnosis(t *testing.T) {
	zkServer := embedded.NewZooKeeper(t)
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	refused := integration.RefusedAddr(t)
	for _, tc := range []struct {
		name     string
		eps      []string
		is       error
		want     []string
		deadline time.Duration // 0: context.Background()
	}{
		{name: "refused", eps: []string{refused}, is: diagnose.ErrRefused, want: []string{refused, "connection refused"}},
		{name: "two refused", eps: []string{refused, "http://" + integration.RefusedAddr(t)}, is: diagnose.ErrRefused, want: []string{refused, "connection refused"}},
		{name: "ZooKeeper", eps: zkServer.Servers(), is: diagnose.ErrNotStore, want: []string{zkServer.Servers()[0], "not etcd"}},
		{name: "unknown host", eps: []string{"no-such-host.invalid:2379"}, is: diagnose.ErrUnknownHost, want: []string{"no-such-host.invalid"}},
		{name: "TLS to a plain server", eps: []string{"https://" + zkServer.Servers()[0]}, is: diagnose.ErrNotStore},
		{name: "no port", eps: []string{"localhost"}, is: diagnose.ErrBadEndpoint, want: []string{"no port", "localhost:2379"}},
		{name: "silent", eps: []string{silent.Addr().String()}, deadline: 2 * time.Second, is: diagnose.ErrTimeout, want: []string{silent.Addr().String(), "nothing answered", "deadline exceeded"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			if tc.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.deadline)
				defer cancel()
			}
			begin := time.Now()
			s, err := etcdlock.NewSession(ctx, lazyClient(t, tc.eps...))
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
		etcd := embedded.NewEtcd(t)
		s, err := etcdlock.NewSession(context.Background(), lazyClient(t, append([]string{refused}, etcd.Endpoints()...)...))
		if err != nil {
			t.Fatal(err)
		}
		s.Close(context.Background())
	})
}

// TestWithPrefixValidation: an etcd prefix must end in "/".
func TestWithPrefixValidation(t *testing.T) {
	cli := lazyClient(t, integration.RefusedAddr(t))
	for _, p := range []string{"myapp", "", "/a/b"} {
		_, err := etcdlock.NewSession(context.Background(), cli, recipe.WithPrefix(p))
		if !errors.Is(err, distlock.ErrInvalidName) {
			t.Errorf("prefix %q: %v, want ErrInvalidName", p, err)
		}
		if p != "" && !strings.Contains(err.Error(), `"`+p+`/"`) {
			t.Errorf("prefix %q: %q does not say what to write", p, err)
		}
	}
	etcd := embedded.NewEtcd(t)
	s, err := etcdlock.NewSession(context.Background(), lazyClient(t, etcd.Endpoints()...), recipe.WithPrefix("myapp/"))
	if err != nil {
		t.Fatal(err)
	}
	s.Close(context.Background())
}

// TestNewSessionShortDeadline: a deadline under a second still gets the
// endpoints probed, at half of it.
func TestNewSessionShortDeadline(t *testing.T) {
	addr := integration.RefusedAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 800*time.Millisecond)
	defer cancel()
	_, err := etcdlock.NewSession(ctx, lazyClient(t, addr))
	if !errors.Is(err, diagnose.ErrRefused) || !strings.Contains(err.Error(), addr) {
		t.Errorf("got %v, want a refusal naming %s", err, addr)
	}
}
