package etcdfence_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/fencing"
	"github.com/distlock/distlock/fencing/etcdfence"
	"github.com/distlock/distlock/fencing/fencetest"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/recipe"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdMulti is WriteAll for the multi contract: the ledger's entries are
// keys put by the write, read back in mod revision order.
type etcdMulti struct {
	cli    *clientv3.Client
	fences []*etcdfence.Fence
	ledger string
	n      *atomic.Int64
}

func (m etcdMulti) Write(ctx context.Context, tokens []distlock.Token, entry int64) error {
	key := fmt.Sprintf("%s/%06d", m.ledger, m.n.Add(1))
	_, err := etcdfence.WriteAll(ctx, tokens, m.fences, clientv3.OpPut(key, strconv.FormatInt(entry, 10)))
	return err
}

func (m etcdMulti) Newest(ctx context.Context) ([]distlock.Token, error) {
	ts := make([]distlock.Token, len(m.fences))
	for i, f := range m.fences {
		var err error
		if ts[i], err = f.Newest(ctx); err != nil {
			return nil, err
		}
	}
	return ts, nil
}

func (m etcdMulti) Ledger(ctx context.Context) ([]int64, error) {
	resp, err := m.cli.Get(ctx, m.ledger+"/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortAscend))
	if err != nil {
		return nil, err
	}
	var entries []int64
	for _, kv := range resp.Kvs {
		e, err := strconv.ParseInt(string(kv.Value), 10, 64)
		if err != nil {
			return nil, err
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// testWriteAll runs the multi contract and WriteAll's own cases on cluster.
func testWriteAll(t *testing.T, cluster *integration.EtcdCluster, cli *clientv3.Client) {
	t.Run("Contract", func(t *testing.T) {
		// Each Multi's fences share a client, a client of one member in
		// turn: writers of overlapping fences go through different members.
		clients := make([]*clientv3.Client, len(cluster.Members))
		for i := range clients {
			c, err := cluster.Client(i)
			if err != nil {
				t.Fatal(err)
			}
			clients[i] = c
		}
		var made int
		n := new(atomic.Int64)
		fencetest.RunMulti(t, func(t *testing.T, ledger string, resources, locks []string, opts ...fencing.Option) fencetest.Multi {
			c := clients[made%len(clients)]
			made++
			m := etcdMulti{cli: cli, ledger: "/multi-ledger/" + ledger, n: n}
			for i, r := range resources {
				m.fences = append(m.fences, newFence(t, c, "/multi/"+r, locks[i], etcdfence.WithTelemetry(opts...)))
			}
			return m
		})
	})

	t.Run("Ops", func(t *testing.T) {
		ctx := fencetest.Ctx(t)
		a := newFence(t, cli, "/wa/fence-a", "ledger/a")
		b := newFence(t, cli, "/wa/fence-b", "ledger/b")
		fs := []*etcdfence.Fence{a, b}
		resp, err := etcdfence.WriteAll(ctx, fencetest.MultiToks(5, "ledger/a", "ledger/b"), fs,
			clientv3.OpPut("/wa/data", "5"), clientv3.OpGet("/wa/data"))
		if err != nil {
			t.Fatalf("first write: %v", err)
		}
		if len(resp.Responses) != 2 || resp.Responses[0].GetResponsePut() == nil ||
			string(resp.Responses[1].GetResponseRange().Kvs[0].Value) != "5" {
			t.Fatalf("responses %v, want the put's and the get's", resp.Responses)
		}
		raw, err := cli.Get(ctx, "/wa/fence-b")
		if err != nil {
			t.Fatal(err)
		}
		if v := string(raw.Kvs[0].Value); v != "00000000000000000005.694d7f0c8a1b2c3d" {
			t.Fatalf("stored %q", v)
		}
		// b alone moves on; then a's 6 with b's 5... b's 6 is fine, 5 is stale.
		if err := b.Admit(ctx, fencetest.MultiTok("ledger/b", 7)); err != nil {
			t.Fatal(err)
		}
		_, err = etcdfence.WriteAll(ctx, fencetest.MultiToks(6, "ledger/a", "ledger/b"), fs, clientv3.OpPut("/wa/six", "6"))
		var stale *fencing.StaleError
		if !errors.As(err, &stale) || !strings.Contains(stale.Resource, "/wa/fence-b") || stale.Newest != fencetest.MultiTok("ledger/b", 7) {
			t.Fatalf("write 6 after b's 7: %v, want a *StaleError of %q naming 7", err, "/wa/fence-b")
		}
		absent(t, cli, "/wa/six")
		if n, err := a.Newest(ctx); err != nil || n.Seq != 5 {
			t.Fatalf("a's newest %v, %v: the refused write changed it", n, err)
		}

		// An op the server refuses fails the whole Txn: no token recorded.
		if _, err := etcdfence.WriteAll(ctx, fencetest.MultiToks(8, "ledger/a", "ledger/b"), fs,
			clientv3.OpPut("/wa/x", "1"), clientv3.OpPut("/wa/x", "2")); err == nil {
			t.Fatal("a Txn putting one key twice was accepted")
		}
		if n, err := a.Newest(ctx); err != nil || n.Seq != 5 {
			t.Fatalf("a's newest %v, %v", n, err)
		}

		// More puts and ops than the server's limit (128): refused whole,
		// saying so.
		many := make([]clientv3.Op, 127)
		for i := range many {
			many[i] = clientv3.OpPut(fmt.Sprintf("/wa/many/%03d", i), "1")
		}
		_, err = etcdfence.WriteAll(ctx, fencetest.MultiToks(8, "ledger/a", "ledger/b"), fs, many...)
		if !errors.Is(err, rpctypes.ErrTooManyOps) || !strings.Contains(err.Error(), "max-txn-ops") {
			t.Fatalf("2 fences and 127 ops: %v, want ErrTooManyOps", err)
		}
		absent(t, cli, "/wa/many/000")
		if _, err := etcdfence.WriteAll(ctx, fencetest.MultiToks(8, "ledger/a", "ledger/b"), fs, many[:126]...); err != nil {
			t.Fatalf("2 fences and 126 ops: %v", err)
		}
	})

	t.Run("MultiMutex", func(t *testing.T) {
		// The tokens of a real multi-lock: the successor's acquisition
		// makes the first holder's write stale at every fence.
		ctx := fencetest.Ctx(t)
		sess, err := etcdlock.NewSession(ctx, cli)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sess.Close(fencetest.Ctx(t)) })
		mm, err := recipe.NewMultiMutex(sess, "jobs/usd", "jobs/eur")
		if err != nil {
			t.Fatal(err)
		}
		eur := newFence(t, cli, "/wam/eur", "jobs/eur")
		usd := newFence(t, cli, "/wam/usd", "jobs/usd")
		fs := []*etcdfence.Fence{usd, eur}
		first, err := mm.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		old := first.Tokens()
		if _, err := etcdfence.WriteAll(ctx, old, fs, clientv3.OpPut("/wam/data", "1")); err != nil {
			t.Fatalf("holder's write: %v", err)
		}
		if err := first.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		second, err := mm.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer second.Unlock(ctx)
		if _, err := etcdfence.WriteAll(ctx, second.Tokens(), fs, clientv3.OpPut("/wam/data", "2")); err != nil {
			t.Fatalf("successor's write: %v", err)
		}
		if _, err := etcdfence.WriteAll(ctx, old, fs, clientv3.OpPut("/wam/late", "1")); !errors.Is(err, fencing.ErrStale) {
			t.Fatalf("first holder's late write: %v, want ErrStale", err)
		}
		absent(t, cli, "/wam/late")
		for _, f := range fs {
			if n, err := f.Newest(ctx); err != nil || n.Seq != second.Token().Seq {
				t.Errorf("%s: newest %v, %v, want the successor's", f.Key(), n, err)
			}
		}
	})

	t.Run("BadInput", func(t *testing.T) {
		ctx := fencetest.Ctx(t)
		a := newFence(t, cli, "/wab/fence-a", "ledger/a")
		b := newFence(t, cli, "/wab/fence-b", "ledger/b")
		toks := fencetest.MultiToks(3, "ledger/a", "ledger/b")
		other, err := cluster.Client(0)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			why    string
			fences []*etcdfence.Fence
			ops    []clientv3.Op
		}{
			{"nil fence", []*etcdfence.Fence{a, nil}, nil},
			{"two clients", []*etcdfence.Fence{a, newFence(t, other, "/wab/fence-b", "ledger/b")}, nil},
			{"one key twice", []*etcdfence.Fence{a, newFence(t, cli, "/wab/fence-a", "ledger/b")}, nil},
			{"op puts a fence key", []*etcdfence.Fence{a, b}, []clientv3.Op{clientv3.OpPut("/wab/fence-b", "1")}},
			{"op deletes a fence key", []*etcdfence.Fence{a, b}, []clientv3.Op{clientv3.OpDelete("/wab/fence-a")}},
		} {
			if _, err := etcdfence.WriteAll(ctx, toks, c.fences, append(c.ops, clientv3.OpPut("/wab/x", "1"))...); err == nil {
				t.Errorf("%s: accepted", c.why)
			}
		}
		if _, err := etcdfence.WriteAll(ctx, toks[:1], []*etcdfence.Fence{a, b}, clientv3.OpPut("/wab/x", "1")); !errors.Is(err, fencing.ErrUnmatched) {
			t.Errorf("no token of b: %v", err)
		}
		absent(t, cli, "/wab/fence-a")
		absent(t, cli, "/wab/fence-b")
		absent(t, cli, "/wab/x")
		// A value not written by this package is reported, not a refusal.
		if _, err := cli.Put(ctx, "/wab/fence-b", "xyz"); err != nil {
			t.Fatal(err)
		}
		if _, err := etcdfence.WriteAll(ctx, toks, []*etcdfence.Fence{a, b}, clientv3.OpPut("/wab/x", "1")); err == nil || fencing.Reason(err) != "" {
			t.Errorf("over a foreign value: %v", err)
		}
		absent(t, cli, "/wab/x")
	})
}
