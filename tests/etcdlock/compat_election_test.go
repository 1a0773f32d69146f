package etcdlock_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/recipe"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// TestCompatEtcdElection: an Election in CompatEtcd shares the election
// with etcd's concurrency.Election both ways, by the rule "the oldest
// leads": etcd's candidate waits for distlock's leader and reports it as
// the leader; a priority and a HandOff are refused.
func TestCompatEtcdElection(t *testing.T) {
	clus := newCluster(t)
	cli := newClient(t, clus, 0)
	ctx := testCtx(t)
	s := newSession(t, cli)
	e, err := recipe.NewElection(s, "ce", distlock.WithElectionCompat(distlock.CompatEtcd))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Campaign(ctx, "prio", distlock.WithPriority(5)); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Campaign with a priority: %v, want errors.ErrUnsupported", err)
	}
	l, err := e.Campaign(ctx, "ours")
	if err != nil {
		t.Fatal(err)
	}

	ce := concurrency.NewElection(concSession(t, cli), fpfx+"ce")
	camp := async(func() error { return ce.Campaign(ctx, "etcd") })
	waitMixed(t, mustAdmin(t, cli), "ce")
	notYet(t, camp, "etcd's Campaign while distlock leads")
	resp, err := ce.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(resp.Kvs[0].Value); got != "ours" {
		t.Errorf("etcd's Leader while distlock leads: %q, want distlock's value", got)
	}
	if _, err := l.HandOff(ctx, "etcd"); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("HandOff: %v, want errors.ErrUnsupported", err)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("the leader after a refused HandOff: %v, want still leading", err)
	}
	if err := l.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	mustNil(t, recv(t, camp, "etcd's Campaign after distlock resigned"), "etcd's Campaign")

	// And the other way: distlock's candidate waits for etcd's leader.
	res := async(func() error {
		l, err := e.Campaign(ctx, "ours again")
		if err == nil {
			err = l.Resign(ctx)
		}
		return err
	})
	waitMixed(t, mustAdmin(t, cli), "ce")
	notYet(t, res, "distlock's Campaign while etcd's candidate leads")
	mustNil(t, ce.Resign(ctx), "etcd's Resign")
	mustNil(t, recv(t, res, "distlock's Campaign after etcd resigned"), "distlock's Campaign")
	noKeys(t, cli, "ce")
}

// waitMixed waits, on admin's WatchQueue, until election name's queue
// shows one of etcd's keys and one distlock candidate.
func waitMixed(t *testing.T, admin *recipe.Admin, name string) {
	t.Helper()
	enough := errors.New("enough")
	err := admin.WatchQueue(testCtx(t), name, func(q []distlock.QueueEntry) error {
		etcd := slices.ContainsFunc(q, func(e distlock.QueueEntry) bool { return e.Client == distlock.ClientEtcd })
		ours := slices.ContainsFunc(q, func(e distlock.QueueEntry) bool { return e.Client == "" && e.Kind == distlock.Candidate })
		if etcd && ours {
			return enough
		}
		return nil
	})
	if !errors.Is(err, enough) {
		t.Fatalf("waiting for etcd's and distlock's candidates of %s: %v", name, err)
	}
}
