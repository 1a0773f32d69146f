package etcdlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/recipe"
	"go.etcd.io/etcd/client/v3/concurrency"
	rcp "go.etcd.io/etcd/client/v3/experimental/recipes"
)

// TestCompatCancelBehindForeign: in every mode, an acquisition waiting
// behind one of etcd's clients returns ctx's cause when ctx ends and
// leaves no key behind (a moved writer's included).
func TestCompatCancelBehindForeign(t *testing.T) {
	clus := newCluster(t)
	cli := newClient(t, clus, 0)
	for _, c := range []struct {
		what    string
		foreign func(ctx context.Context, s *concurrency.Session, pfx string) error
		take    func(s recipe.Backend, name string) (func(ctx context.Context) error, error)
	}{
		{"etcd mutex", func(ctx context.Context, s *concurrency.Session, pfx string) error {
			return concurrency.NewMutex(s, pfx).Lock(ctx)
		}, func(s recipe.Backend, name string) (func(ctx context.Context) error, error) {
			m, err := recipe.NewMutex(s, name, distlock.WithCompat(distlock.CompatEtcd))
			return func(ctx context.Context) error { _, err := m.Lock(ctx); return err }, err
		}},
		{"etcd election", func(ctx context.Context, s *concurrency.Session, pfx string) error {
			return concurrency.NewElection(s, pfx).Campaign(ctx, "etcd")
		}, func(s recipe.Backend, name string) (func(ctx context.Context) error, error) {
			e, err := recipe.NewElection(s, name, distlock.WithElectionCompat(distlock.CompatEtcd))
			return func(ctx context.Context) error { _, err := e.Campaign(ctx, "ours"); return err }, err
		}},
		{"recipes writer", func(ctx context.Context, s *concurrency.Session, pfx string) error {
			return rcp.NewRWMutex(s, pfx).Lock()
		}, func(s recipe.Backend, name string) (func(ctx context.Context) error, error) {
			rw, err := recipe.NewRWMutex(s, name, withRecipes)
			return func(ctx context.Context) error { _, err := rw.Lock(ctx); return err }, err
		}},
	} {
		t.Run(c.what, func(t *testing.T) {
			name := "cc-" + strings.ReplaceAll(c.what, " ", "-")
			cs := concSession(t, cli)
			if err := c.foreign(testCtx(t), cs, fpfx+name); err != nil {
				t.Fatal(err)
			}
			s := newSession(t, cli)
			take, err := c.take(s, name)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancelCause(testCtx(t))
			done := make(chan error, 1)
			go func() { done <- take(ctx) }()
			waitMixedQueue(t, mustAdmin(t, cli), name)
			stop := errors.New("the caller gave up")
			cancel(stop)
			if err := recv(t, done, "the cancelled acquisition"); !errors.Is(err, stop) {
				t.Fatalf("cancelled behind %s: %v, want the ctx's cause", c.what, err)
			}
			if err := cs.Close(); err != nil {
				t.Fatal(err)
			}
			noKeys(t, cli, name)
		})
	}
}

// waitMixedQueue waits until lock name's queue lists an entry of
// distlock's own beside one of another client.
func waitMixedQueue(t *testing.T, admin *recipe.Admin, name string) {
	t.Helper()
	enough := errors.New("enough")
	err := admin.WatchQueue(testCtx(t), name, func(q []distlock.QueueEntry) error {
		ours, theirs := false, false
		for _, e := range q {
			ours = ours || e.Client == ""
			theirs = theirs || e.Client != ""
		}
		if ours && theirs {
			return enough
		}
		return nil
	})
	if !errors.Is(err, enough) {
		t.Fatalf("waiting for a mixed queue of %s: %v", name, err)
	}
}
