package main

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/cmd/internal/backend"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/internal/proc"
)

// holderEnv starts a cluster of store ("etcd" or "zk") and returns the
// spec of a holder process of lock (its session asking for ttl, the
// holder's default if 0; with permits above 0, a permit of that
// semaphore), and a client of the same cluster for the test's own
// sessions, Revoke and the rest, closed when the test ends.
func holderEnv(ctx context.Context, t *testing.T, store, lock string, ttl time.Duration, permits int) (integration.HolderSpec, *backend.Client) {
	t.Helper()
	spec := integration.HolderSpec{Backend: store, Lock: lock, TTL: ttl, Permits: permits}
	if store == "etcd" {
		spec.Endpoints = integration.NewEtcd(t).Endpoints()
	} else {
		spec.Endpoints = integration.NewZooKeeper(t).Addrs()
	}
	kind, err := backend.ParseKind(store)
	if err != nil {
		t.Fatal(err)
	}
	// The test's own sessions outlive its steps comfortably.
	cli, err := backend.Dial(ctx, backend.Config{Kind: kind, Endpoints: spec.Endpoints, TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cli.Close)
	return spec, cli
}

// newSession opens a lock session on cli, closed when the test ends.
func newSession(ctx context.Context, t *testing.T, cli *backend.Client) *backend.Session {
	t.Helper()
	s, err := cli.NewSession(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// semaphoreOn returns semaphore name of n permits on a session of its own.
func semaphoreOn(ctx context.Context, t *testing.T, cli *backend.Client, name string, n int) distlock.Locker {
	t.Helper()
	m, err := newSession(ctx, t, cli).SemaphoreLocker(name, n)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// ctxFor returns a context that ends after d or with the test.
func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// procState returns the state letter of process pid (T: stopped).
func procState(t *testing.T, pid int) byte {
	t.Helper()
	st, err := proc.State(pid)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
