package etcdq

import (
	"fmt"
	"strings"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestElectionLeaderDeletedClearsTerm: a leader whose entry someone else
// deletes loses its Leadership, and the held entry's cleanup (the
// engine's abandonLost hook) deletes the term record that still names
// the gone entry, which etcd would otherwise keep until the session ends.
func TestElectionLeaderDeletedClearsTerm(t *testing.T) {
	s, cli, ctx := followTestSession(t, nil)
	el, err := qlock.NewElection(s.Engine(), "gone", distlock.ElectionConfig{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := el.Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	key := l.(fmt.Stringer).String()
	term := key[:strings.LastIndex(key, "/@")+2] + termMark
	resp, err := cli.Get(ctx, term)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != key {
		t.Fatalf("term record %s: %v, want it naming %s", term, resp.Kvs, key)
	}
	w := cli.Watch(ctx, term, clientv3.WithRev(resp.Header.Revision+1))
	if _, err := cli.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	<-l.Done()
	for wr := range w {
		for _, ev := range wr.Events {
			if ev.Type == mvccpb.DELETE {
				return
			}
			t.Fatalf("term record changed instead of deleted: %v", ev)
		}
	}
	t.Fatalf("the watch on the term record ended (%v) before the record was deleted", ctx.Err())
}
