package etcdq

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/distlock/internal/qlock"
	"github.com/distlock/distlock/internal/testserve"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestGuardRefusesLatePut plays, in a fixed order on a real cluster, what
// a deadline makes happen by chance: an enqueue Txn built (and, as far as
// its caller knows, sent) before its cleanup, and applied by the server
// after it. The cleanup must win: the late Txn writes nothing, and the
// guard's compare is what refuses it.
func TestGuardRefusesLatePut(t *testing.T) {
	eps := testserve.EtcdCluster(t, 3)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{eps[1]}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := NewSession(ctx, cli, Config{TTL: 30 * time.Second, Options: qlock.Options{Prefix: "/distlock/"}.Defaults()})
	if err != nil {
		t.Fatal(err)
	}
	u := s.User()
	defer u.Close(ctx)

	dir := s.Dir("late")
	qkey, qend := conflictRange(dir, qlock.Exclusive)
	reads := []clientv3.Op{clientv3.OpGet(qkey, clientv3.WithRange(qend), clientv3.WithKeysOnly())}
	entry := func(n int) (string, clientv3.Op) {
		key := dir + exclusiveMark + "late_" + string(rune('a'+n))
		return key, clientv3.OpPut(key, "", clientv3.WithLease(s.id))
	}
	exists := func(key string) bool {
		t.Helper()
		resp, err := cli.Get(ctx, key, clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return resp.Count > 0
	}
	commit := func(txn clientv3.Txn) bool {
		t.Helper()
		resp, err := txn.Commit()
		if err != nil {
			t.Fatal(err)
		}
		return resp.Succeeded
	}

	if s.guardRev() != 0 {
		t.Fatalf("a new session has a guard at revision %d", s.guardRev())
	}
	// The first cleanup of a session, before any guard exists.
	key, put := entry(0)
	late := s.enqueueTxn(ctx, []clientv3.Op{put}, reads, false)
	s.abandon(key)
	if commit(late) || exists(key) {
		t.Fatal("an enqueue applied after its cleanup (no guard before) put its key")
	}
	// And again, with the guard the first cleanup made.
	key, put = entry(1)
	late = s.enqueueTxn(ctx, []clientv3.Op{put}, reads, false)
	s.abandon(key)
	if commit(late) || exists(key) {
		t.Fatal("an enqueue applied after its cleanup put its key")
	}
	// An enqueue applied before its cleanup is deleted by it.
	key, put = entry(2)
	if !commit(s.enqueueTxn(ctx, []clientv3.Op{put}, reads, false)) {
		t.Fatal("enqueue refused with the guard as seen")
	}
	s.abandon(key)
	if exists(key) {
		t.Fatal("the cleanup left an applied enqueue's key")
	}
	// A retry after an attempt of unknown outcome moves the guard: the
	// first attempt, applied late, cannot bring the key back after the
	// entry is released.
	key, put = entry(3)
	first := s.enqueueTxn(ctx, []clientv3.Op{put}, reads, false)
	if !commit(s.enqueueTxn(ctx, []clientv3.Op{put}, reads, true)) {
		t.Fatal("retried enqueue refused")
	}
	if _, err := cli.Delete(ctx, key); err != nil { // the release
		t.Fatal(err)
	}
	if commit(first) || exists(key) {
		t.Fatal("the first attempt of a retried enqueue, applied after the release, put its key")
	}
	// A guard moved by someone else's cleanup makes an enqueue of the
	// session fail its compare, writing nothing, and tells the new
	// revision: the next attempt goes through.
	key, put = entry(4)
	stale := s.guardRev()
	other, _ := entry(5)
	s.abandon(other)
	s.sawGuard(stale, 0) // older than what the cleanup saw: ignored
	if s.guardRev() == stale {
		t.Fatal("an older observation of the guard replaced a newer one")
	}
	s.guard.mu.Lock()
	s.guard.mod = stale // as if the cleanup's answer had not come yet
	s.guard.mu.Unlock()
	resp, err := s.enqueueTxn(ctx, []clientv3.Op{put}, reads, false).Commit()
	if err != nil {
		t.Fatal(err)
	}
	if resp.Succeeded || exists(key) {
		t.Fatal("an enqueue with a stale guard revision wrote")
	}
	s.sawGuardIn(resp.Responses[0].GetResponseRange(), resp.Header.Revision)
	if !commit(s.enqueueTxn(ctx, []clientv3.Op{put}, reads, false)) || !exists(key) {
		t.Fatal("the enqueue after learning the guard's revision did not go through")
	}
}
