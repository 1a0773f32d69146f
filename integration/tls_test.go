package integration_test

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/integration"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestEtcdTLS: a 3-member cluster with client and peer TLS and client
// certificate auth. The harness's client gets in (and a member killed and
// restarted rejoins over peer TLS); every bad credential is refused, and
// the refusal is a TLS error, not a timeout.
func TestEtcdTLS(t *testing.T) {
	t.Parallel()
	c := integration.NewEtcd(t, integration.WithTLS())
	ctx := ctxFor(t, 2*time.Minute)
	for _, ep := range c.Endpoints() {
		if !strings.HasPrefix(ep, "https://") {
			t.Fatalf("endpoint %s: want https://", ep)
		}
	}
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	if err := putGet(ctx, cli, "tls"); err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(2); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}

	// A lock holder in another process connects with the cluster's files.
	h := integration.NewHolder(t, integration.HolderSpec{Endpoints: c.Endpoints(), Lock: "tls", TLS: c.TLS, TTL: 5 * time.Second})
	if tok := h.Token(); tok.IsZero() {
		t.Fatal("holder over TLS has no token")
	}
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	f := c.TLS
	for _, tc := range []struct {
		name, ca, cert, key string
		plain               bool
	}{
		{name: "wrong CA", ca: f.OtherCA, cert: f.Cert, key: f.Key},
		{name: "expired client certificate", ca: f.CA, cert: f.ExpiredCert, key: f.ExpiredKey},
		{name: "client certificate of another CA", ca: f.CA, cert: f.OtherCert, key: f.OtherKey},
		{name: "no client certificate", ca: f.CA},
		{name: "no TLS", plain: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop()}
			if tc.plain {
				cfg.Endpoints = nil
				for _, ep := range c.Endpoints() {
					cfg.Endpoints = append(cfg.Endpoints, "http://"+strings.TrimPrefix(ep, "https://"))
				}
			} else {
				tcfg, err := f.Config(tc.ca, tc.cert, tc.key)
				if err != nil {
					t.Fatal(err)
				}
				cfg.TLS = tcfg
			}
			bad, err := clientv3.New(cfg)
			if err != nil {
				return // refused at dial: fine
			}
			defer bad.Close()
			gctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			if _, err := bad.Get(gctx, "tls"); err == nil {
				t.Fatal("read succeeded with bad credentials")
			}
		})
	}
	// The raw handshake says why: what a command can tell its user.
	for _, tc := range []struct {
		name, ca, cert, key, want string
	}{
		{"wrong CA", f.OtherCA, f.Cert, f.Key, "certificate signed by unknown authority"},
		{"expired", f.CA, f.ExpiredCert, f.ExpiredKey, "expired certificate"},
		// Go offers no certificate the server's CA did not sign.
		{"other CA client", f.CA, f.OtherCert, f.OtherKey, "certificate required"},
		{"no client certificate", f.CA, "", "", "certificate required"},
	} {
		tcfg, err := f.Config(tc.ca, tc.cert, tc.key)
		if err != nil {
			t.Fatal(err)
		}
		err = handshake(c.Members[0].ClientURL(), tcfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: handshake error %v, want %q", tc.name, err, tc.want)
		}
	}
	good, _ := f.ClientConfig()
	if err := handshake(c.Members[0].ClientURL(), good); err != nil {
		t.Errorf("good credentials: %v", err)
	}
}

// handshake completes a TLS handshake with url and waits briefly for the
// server's verdict on the client certificate (TLS 1.3 sends it after the
// client's side of the handshake is done).
func handshake(url string, cfg *tls.Config) error {
	cfg.NextProtos = []string{"h2"}
	conn, err := tls.Dial("tcp", strings.TrimPrefix(url, "https://"), cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := conn.Read(make([]byte, 1)); err != nil && !isTimeout(err) {
		return err
	}
	return nil
}

func isTimeout(err error) bool {
	t, ok := err.(interface{ Timeout() bool })
	return ok && t.Timeout()
}

// TestEtcdTLSAuth: TLS and etcd's authentication together. The harness's
// clients log in as root; a wrong password is refused.
func TestEtcdTLSAuth(t *testing.T) {
	t.Parallel()
	c := integration.NewEtcd(t, integration.WithSize(1), integration.WithTLS(), integration.WithAuth("rootpw"))
	ctx := ctxFor(t, time.Minute)
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	if err := putGet(ctx, cli, "auth"); err != nil {
		t.Fatal(err)
	}
	st, err := cli.AuthStatus(ctx)
	if err != nil || !st.Enabled {
		t.Fatalf("auth status %v, %v; want enabled", st, err)
	}
	cfg := clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		TLS: c.TLSConfig(), Username: integration.RootUser, Password: "wrong"}
	bad, err := clientv3.New(cfg)
	if err == nil {
		defer bad.Close()
		_, err = bad.Get(ctx, "auth")
	}
	if err == nil || !strings.Contains(err.Error(), "authentication failed") {
		t.Fatalf("wrong password: %v, want authentication failed", err)
	}
}
