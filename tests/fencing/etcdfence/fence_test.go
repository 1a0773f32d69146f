package etcdfence_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/fencing"
	"github.com/distlock/distlock/fencing/etcdfence"
	"github.com/distlock/distlock/fencing/fencetest"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/recipe"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func tok(seq int64) distlock.Token { return fencetest.Tok(seq) }

func newFence(t *testing.T, cli *clientv3.Client, key, lock string, opts ...etcdfence.Option) *etcdfence.Fence {
	t.Helper()
	f, err := etcdfence.New(cli, key, lock, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// absent fails the test if key exists.
func absent(t *testing.T, cli *clientv3.Client, key string) {
	t.Helper()
	resp, err := cli.Get(fencetest.Ctx(t), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 0 {
		t.Fatalf("%s exists (%q), want it absent", key, resp.Kvs[0].Value)
	}
}

// TestEtcdFence runs everything on one real 3-member cluster, each case
// under keys of its own.
func TestEtcdFence(t *testing.T) {
	cluster := integration.NewEtcd(t)
	cli, err := cluster.Client()
	if err != nil {
		t.Fatal(err)
	}

	t.Run("Contract", func(t *testing.T) {
		fencetest.Run(t, func(t *testing.T, resource, lock string, opts ...fencing.Option) fencing.Fence {
			return newFence(t, cli, "/fences/"+resource, lock, etcdfence.WithTelemetry(opts...))
		})
	})

	t.Run("WriteAll", func(t *testing.T) { testWriteAll(t, cluster, cli) })

	t.Run("WriteOps", func(t *testing.T) {
		ctx := fencetest.Ctx(t)
		f := newFence(t, cli, "/w/fence", "ledger")
		if n, err := f.Newest(ctx); err != nil || !n.IsZero() {
			t.Fatalf("Newest of an unused fence: %v, %v", n, err)
		}
		resp, err := f.Write(ctx, tok(5), clientv3.OpPut("/w/data", "5"), clientv3.OpGet("/w/data"))
		if err != nil {
			t.Fatalf("first write: %v", err)
		}
		if len(resp.Responses) != 2 || resp.Responses[0].GetResponsePut() == nil ||
			string(resp.Responses[1].GetResponseRange().Kvs[0].Value) != "5" {
			t.Fatalf("responses %v, want the put's and the get's", resp.Responses)
		}
		raw, err := cli.Get(ctx, "/w/fence")
		if err != nil {
			t.Fatal(err)
		}
		if v := string(raw.Kvs[0].Value); v != "00000000000000000005.694d7f0c8a1b2c3d" {
			t.Fatalf("stored %q", v)
		}

		_, err = f.Write(ctx, tok(4), clientv3.OpPut("/w/stale", "4"), clientv3.OpPut("/w/data", "4"))
		var stale *fencing.StaleError
		if !errors.As(err, &stale) || stale.Token != tok(4) || stale.Newest != tok(5) {
			t.Fatalf("stale write: %v, want a *StaleError naming 4 and 5", err)
		}
		absent(t, cli, "/w/stale")
		if _, err := f.Write(ctx, tok(5), clientv3.OpPut("/w/data", "5b")); err != nil {
			t.Fatalf("write with the same token again: %v", err)
		}
		// Byte order of the stored value is numeric order: 10 > 9.
		if _, err := f.Write(ctx, tok(10)); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(ctx, tok(9), clientv3.OpPut("/w/nine", "9")); !errors.Is(err, fencing.ErrStale) {
			t.Fatalf("write 9 after 10: %v", err)
		}
		absent(t, cli, "/w/nine")
		got, err := cli.Get(ctx, "/w/data")
		if err != nil {
			t.Fatal(err)
		}
		if v := string(got.Kvs[0].Value); v != "5b" {
			t.Fatalf("/w/data = %q, want 5b", v)
		}
		if n, err := f.Newest(ctx); err != nil || n != tok(10) {
			t.Fatalf("Newest: %v, %v", n, err)
		}

		// An op the server refuses makes the whole Txn fail: no token
		// recorded either.
		g := newFence(t, cli, "/w/fence2", "ledger")
		if _, err := g.Write(ctx, tok(3), clientv3.OpPut("/w/x", "1"), clientv3.OpPut("/w/x", "2")); err == nil {
			t.Fatal("a Txn putting one key twice was accepted")
		}
		absent(t, cli, "/w/fence2")
	})

	// Writers race with tokens in random order (few admitted, most
	// refused at once) and in rising order per writer (most admitted, many
	// conflicting commits).
	for _, name := range []string{"Shuffled", "Rising"} {
		t.Run("ConcurrentLedger/"+name, func(t *testing.T) {
			dir := "/ledger-" + name
			ctx := fencetest.Ctx(t)
			const workers, each = 6, 15
			order := fencetest.Shuffled(workers, each)
			if name == "Rising" {
				order = fencetest.Rising(workers, each)
			}
			fences := make([]*etcdfence.Fence, workers)
			for w := range fences {
				// Each writer has its own client and Fence value: they share
				// only the key.
				c, err := cluster.Client(w % len(cluster.Members))
				if err != nil {
					t.Fatal(err)
				}
				fences[w] = newFence(t, c, dir+"/fence", "ledger")
			}
			admitted := fencetest.Race(t, workers, each, order, func(w int, seq int64) error {
				_, err := fences[w].Write(ctx, tok(seq), clientv3.OpPut(fmt.Sprintf("%s/entries/%03d", dir, seq), strconv.FormatInt(seq, 10)))
				return err
			})
			// The ledger, in commit order, holds exactly the admitted tokens,
			// increasing.
			resp, err := cli.Get(ctx, dir+"/entries/", clientv3.WithPrefix(),
				clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortAscend))
			if err != nil {
				t.Fatal(err)
			}
			var ledger []int64
			for _, kv := range resp.Kvs {
				seq, _ := strconv.ParseInt(string(kv.Value), 10, 64)
				if len(ledger) > 0 && seq < ledger[len(ledger)-1] {
					t.Errorf("ledger in commit order has %d after %d", seq, ledger[len(ledger)-1])
				}
				if !admitted[seq] {
					t.Errorf("ledger has the refused token %d", seq)
				}
				ledger = append(ledger, seq)
			}
			if len(ledger) != len(admitted) {
				t.Errorf("ledger has %d entries, %d tokens were admitted", len(ledger), len(admitted))
			}
		})
	}

	t.Run("WriteHeld", func(t *testing.T) {
		ctx := fencetest.Ctx(t)
		sess, err := etcdlock.NewSession(ctx, cli)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sess.Close(fencetest.Ctx(t)) })
		mu, err := recipe.NewMutex(sess, "jobs/held")
		if err != nil {
			t.Fatal(err)
		}
		lease, err := mu.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t1 := lease.Token()
		key, err := etcdfence.HolderKey(ctx, cli, etcdlock.DefaultPrefix, t1)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(key, etcdlock.DefaultPrefix+"jobs/held/@") {
			t.Fatalf("holder key %q", key)
		}
		f := newFence(t, cli, "/held/fence", "jobs/held")
		// The key's create revision with another lease (another session
		// of a forked history) is not the holder's either.
		forged := distlock.Token{Name: t1.Name, Seq: t1.Seq, Owner: t1.Owner ^ 0xff}
		if _, err := etcdfence.HolderKey(ctx, cli, etcdlock.DefaultPrefix, forged); !errors.Is(err, etcdfence.ErrNotHeld) {
			t.Fatalf("HolderKey of %v: %v, want ErrNotHeld", forged, err)
		}
		if _, err := f.WriteHeld(ctx, forged, key, clientv3.OpPut("/held/forged", "1")); !errors.Is(err, etcdfence.ErrNotHeld) {
			t.Fatalf("write with %v: %v, want ErrNotHeld", forged, err)
		}
		absent(t, cli, "/held/forged")
		absent(t, cli, "/held/fence")
		if _, err := f.WriteHeld(ctx, t1, key, clientv3.OpPut("/held/data", "1")); err != nil {
			t.Fatalf("write while held: %v", err)
		}
		// A key of the same lock with another create revision is not the
		// holder's.
		if _, err := f.WriteHeld(ctx, t1, etcdlock.DefaultPrefix+"jobs/held/@w-other", clientv3.OpPut("/held/other", "1")); !errors.Is(err, etcdfence.ErrNotHeld) {
			t.Fatalf("write with another key: %v, want ErrNotHeld", err)
		}
		absent(t, cli, "/held/other")

		// The holder's key is deleted (an operator, a revoked lease): the
		// holder does not know yet, but its writes are refused at once.
		if _, err := cli.Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
		_, err = f.WriteHeld(ctx, t1, key, clientv3.OpPut("/held/after", "1"))
		if !errors.Is(err, etcdfence.ErrNotHeld) || !errors.Is(err, distlock.ErrLost) {
			t.Fatalf("write after the key was deleted: %v, want ErrNotHeld and ErrLost", err)
		}
		absent(t, cli, "/held/after")
		if _, err := etcdfence.HolderKey(ctx, cli, etcdlock.DefaultPrefix, t1); !errors.Is(err, etcdfence.ErrNotHeld) {
			t.Fatalf("HolderKey of a deleted key: %v", err)
		}
		if n, err := f.Newest(ctx); err != nil || n != t1 {
			t.Fatalf("Newest: %v, %v, want %v", n, err, t1)
		}
		select {
		case <-lease.Done():
		case <-ctx.Done():
			t.Fatal("the lease did not notice its key was deleted")
		}

		// The next holder writes; the old token is then stale, which is
		// reported before the missing key.
		lease2, err := mu.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer lease2.Unlock(ctx)
		t2 := lease2.Token()
		key2, err := etcdfence.HolderKey(ctx, cli, etcdlock.DefaultPrefix, t2)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteHeld(ctx, t2, key2, clientv3.OpPut("/held/data", "2")); err != nil {
			t.Fatalf("successor's write: %v", err)
		}
		var stale *fencing.StaleError
		if _, err := f.WriteHeld(ctx, t1, key, clientv3.OpPut("/held/late", "1")); !errors.As(err, &stale) || stale.Newest != t2 {
			t.Fatalf("old holder after the successor: %v, want a *StaleError naming %v", err, t2)
		}
		absent(t, cli, "/held/late")
	})

	t.Run("Legacy", func(t *testing.T) {
		// A value stored by a version before tokens named their owner: 20
		// digits alone. It orders tokens as before, and refuses its own
		// number as a fork, since its owner is unknown.
		ctx := fencetest.Ctx(t)
		if _, err := cli.Put(ctx, "/legacy/fence", "00000000000000000005"); err != nil {
			t.Fatal(err)
		}
		f := newFence(t, cli, "/legacy/fence", "ledger")
		legacy := distlock.Token{Name: "ledger", Seq: 5}
		if n, err := f.Newest(ctx); err != nil || n != legacy {
			t.Fatalf("Newest: %#v, %v, want %#v", n, err, legacy)
		}
		var stale *fencing.StaleError
		if err := f.Admit(ctx, tok(4)); !errors.As(err, &stale) || stale.Newest != legacy {
			t.Fatalf("admit 4: %v, want a *StaleError naming %#v", err, legacy)
		}
		var fork *fencing.ForkError
		if _, err := f.Write(ctx, tok(5), clientv3.OpPut("/legacy/data", "5")); !errors.As(err, &fork) || fork.Admitted != legacy || !strings.Contains(err.Error(), "owner not recorded") {
			t.Fatalf("write 5: %v, want a *ForkError naming %#v", err, legacy)
		}
		absent(t, cli, "/legacy/data")
		if err := f.Admit(ctx, tok(6)); err != nil {
			t.Fatalf("admit 6: %v", err)
		}
		if n, err := f.Newest(ctx); err != nil || n != tok(6) {
			t.Fatalf("Newest: %v, %v, want %v", n, err, tok(6))
		}
		// Values that are neither form are reported, not decoded.
		for i, v := range []string{
			"00000000000000000005.0000000000000000", // owner 0
			"00000000000000000005.694D7F0C8A1B2C3D", // upper case
			"00000000000000000005.694d7f0c8a1b2c3",  // short
			"00000000000000000005.",
			"0000000000000000005.694d7f0c8a1b2c3d", // short number
			"99999999999999999999.694d7f0c8a1b2c3d",
		} {
			key := fmt.Sprintf("/legacy/bad%d", i)
			if _, err := cli.Put(ctx, key, v); err != nil {
				t.Fatal(err)
			}
			if n, err := newFence(t, cli, key, "ledger").Newest(ctx); err == nil {
				t.Errorf("stored %q: Newest = %v, want an error", v, n)
			}
		}
	})

	t.Run("BadInput", func(t *testing.T) {
		ctx := fencetest.Ctx(t)
		if _, err := etcdfence.New(nil, "/k", "ledger"); !errors.Is(err, distlock.ErrNilClient) {
			t.Errorf("nil client: %v", err)
		}
		if _, err := etcdfence.New(cli, "", "ledger"); !errors.Is(err, fencing.ErrInvalidArgument) {
			t.Errorf("empty key: %v, want ErrInvalidArgument", err)
		}
		if _, err := etcdfence.New(cli, "/k", "bad name"); !errors.Is(err, distlock.ErrInvalidName) {
			t.Errorf("bad lock name: %v", err)
		}
		f := newFence(t, cli, "/bad/fence", "ledger")
		if _, err := f.Write(ctx, distlock.Token{Name: "other", Seq: 3, Owner: fencetest.Owner}, clientv3.OpPut("/bad/x", "1")); !errors.Is(err, fencing.ErrForeignToken) {
			t.Errorf("foreign token: %v", err)
		}
		for _, bad := range []distlock.Token{{Name: "ledger"}, {Name: "ledger", Seq: 3}} {
			if _, err := f.Write(ctx, bad, clientv3.OpPut("/bad/x", "1")); !errors.Is(err, distlock.ErrInvalidToken) {
				t.Errorf("invalid token %#v: %v", bad, err)
			}
		}
		if _, err := f.Write(ctx, tok(3), clientv3.OpPut("/bad/fence", "1")); !errors.Is(err, fencing.ErrInvalidArgument) {
			t.Errorf("an op on the fence's key: %v, want ErrInvalidArgument", err)
		}
		if _, err := f.WriteHeld(ctx, tok(3), ""); !errors.Is(err, fencing.ErrInvalidArgument) {
			t.Errorf("WriteHeld with an empty lock key: %v, want ErrInvalidArgument", err)
		}
		if _, err := etcdfence.WriteAll(ctx, []distlock.Token{tok(3)}, []*etcdfence.Fence{nil}); !errors.Is(err, fencing.ErrInvalidArgument) {
			t.Errorf("WriteAll with a nil fence: %v, want ErrInvalidArgument", err)
		}
		if _, err := etcdfence.HolderKey(ctx, nil, etcdlock.DefaultPrefix, tok(3)); !errors.Is(err, distlock.ErrNilClient) {
			t.Errorf("HolderKey with a nil client: %v", err)
		}
		absent(t, cli, "/bad/fence")
		absent(t, cli, "/bad/x")

		// A value not written by this package is reported, not taken
		// for a token.
		if _, err := cli.Put(ctx, "/bad/garbage", "xyz"); err != nil {
			t.Fatal(err)
		}
		g := newFence(t, cli, "/bad/garbage", "ledger")
		if err := g.Admit(ctx, tok(3)); err == nil || errors.Is(err, fencing.ErrStale) {
			t.Errorf("admit over a foreign value: %v", err)
		}
		if _, err := g.Newest(ctx); err == nil {
			t.Error("Newest of a foreign value: no error")
		}

		// A context that has ended stops the write.
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := f.Admit(cctx, tok(3)); err == nil {
			t.Error("admit with a cancelled context succeeded")
		}
	})
}
