package zkfence_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
	"github.com/distlock/distlock/fencing/fencetest"
	"github.com/distlock/distlock/fencing/zkfence"
	"github.com/distlock/distlock/integration"
	"github.com/go-zookeeper/zk"
)

func tok(seq int64) distlock.Token { return fencetest.Tok(seq) }

func newFence(t *testing.T, conn *zk.Conn, path, lock string, opts ...zkfence.Option) *zkfence.Fence {
	t.Helper()
	f, err := zkfence.New(conn, path, lock, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// connect opens a connection (to the given servers only, if any), its
// events drained, closed when the test ends.
func connect(t *testing.T, ens *integration.ZooKeeperEnsemble, servers ...int) *zk.Conn {
	t.Helper()
	conn, events, err := ens.Connect(fencetest.Ctx(t), servers...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	go func() {
		for range events {
		}
	}()
	return conn
}

// absent fails the test if path exists, as the leader sees it.
func absent(t *testing.T, conn *zk.Conn, path string) {
	t.Helper()
	if _, err := conn.Sync(path); err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatal(err)
	}
	ok, _, err := conn.Exists(path)
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		t.Fatalf("%s exists, want it absent", path)
	}
}

// TestZooKeeperFence runs everything on one real 3-server ensemble, each
// case under paths of its own.
func TestZooKeeperFence(t *testing.T) {
	ens := integration.NewZooKeeper(t)
	conn := connect(t, ens)

	t.Run("Contract", func(t *testing.T) {
		fencetest.Run(t, func(t *testing.T, resource, lock string, opts ...fencing.Option) fencing.Fence {
			return newFence(t, conn, "/fences/"+resource, lock, zkfence.WithTelemetry(opts...))
		})
	})

	t.Run("WriteAll", func(t *testing.T) { testWriteAll(t, ens, conn) })

	t.Run("WriteOps", func(t *testing.T) {
		ctx := fencetest.Ctx(t)
		f := newFence(t, conn, "/w/deep/fence", "ledger") // parents created on the way
		if n, err := f.Newest(ctx); err != nil || !n.IsZero() {
			t.Fatalf("Newest of an unused fence: %v, %v", n, err)
		}
		rs, err := f.Write(ctx, tok(5), &zk.CreateRequest{Path: "/w/data", Data: []byte("5"), Acl: zk.WorldACL(zk.PermAll)})
		if err != nil {
			t.Fatalf("first write: %v", err)
		}
		if len(rs) != 1 || rs[0].String != "/w/data" {
			t.Fatalf("responses %+v, want the create's", rs)
		}
		if data, _, err := conn.Get("/w/deep/fence"); err != nil || string(data) != "5.694d7f0c8a1b2c3d" {
			t.Fatalf("stored %q, %v", data, err)
		}

		_, err = f.Write(ctx, tok(4),
			&zk.CreateRequest{Path: "/w/stale", Acl: zk.WorldACL(zk.PermAll)},
			&zk.SetDataRequest{Path: "/w/data", Data: []byte("4"), Version: -1})
		var stale *fencing.StaleError
		if !errors.As(err, &stale) || stale.Token != tok(4) || stale.Newest != tok(5) {
			t.Fatalf("stale write: %v, want a *StaleError naming 4 and 5", err)
		}
		absent(t, conn, "/w/stale")
		if _, err := f.Write(ctx, tok(5), &zk.SetDataRequest{Path: "/w/data", Data: []byte("5b"), Version: -1}); err != nil {
			t.Fatalf("write with the same token again: %v", err)
		}
		if _, err := f.Write(ctx, tok(10)); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(ctx, tok(9), &zk.CreateRequest{Path: "/w/nine", Acl: zk.WorldACL(zk.PermAll)}); !errors.Is(err, fencing.ErrStale) {
			t.Fatalf("write 9 after 10: %v", err)
		}
		absent(t, conn, "/w/nine")
		if data, _, err := conn.Get("/w/data"); err != nil || string(data) != "5b" {
			t.Fatalf("/w/data = %q, %v, want 5b", data, err)
		}

		// An op that fails makes the whole multi fail: the token is not
		// recorded either.
		if _, err := f.Write(ctx, tok(11), &zk.CreateRequest{Path: "/w/data", Acl: zk.WorldACL(zk.PermAll)}); !errors.Is(err, zk.ErrNodeExists) {
			t.Fatalf("write with a failing op: %v, want zk.ErrNodeExists", err)
		}
		if n, err := f.Newest(ctx); err != nil || n != tok(10) {
			t.Fatalf("Newest: %v, %v, want %v", n, err, tok(10))
		}
		// A version check among the ops guards against concurrent
		// writers of the resource that do not use the fence.
		_, st, err := conn.Get("/w/data")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(ctx, tok(10), &zk.CheckVersionRequest{Path: "/w/data", Version: st.Version + 1}); !errors.Is(err, zk.ErrBadVersion) {
			t.Fatalf("write with a failing version check: %v", err)
		}
		if _, err := f.Write(ctx, tok(10), &zk.CheckVersionRequest{Path: "/w/data", Version: st.Version}, &zk.DeleteRequest{Path: "/w/data", Version: st.Version}); err != nil {
			t.Fatal(err)
		}
		absent(t, conn, "/w/data")
	})

	// Writers race with tokens in random order (few admitted, most
	// refused at once) and in rising order per writer (most admitted, many
	// conflicting commits).
	for _, name := range []string{"Shuffled", "Rising"} {
		t.Run("ConcurrentLedger/"+name, func(t *testing.T) {
			dir := "/ledger-" + name
			ctx := fencetest.Ctx(t)
			if _, err := conn.Create(dir, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Create(dir+"/entries", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatal(err)
			}
			const workers, each = 6, 15
			order := fencetest.Shuffled(workers, each)
			if name == "Rising" {
				order = fencetest.Rising(workers, each)
			}
			fences := make([]*zkfence.Fence, workers)
			for w := range fences {
				// Each writer has its own connection (to one server, so that
				// reads come from followers that may lag) and Fence value:
				// they share only the path.
				fences[w] = newFence(t, connect(t, ens, w%len(ens.Servers)), dir+"/fence", "ledger")
			}
			admitted := fencetest.Race(t, workers, each, order, func(w int, seq int64) error {
				_, err := fences[w].Write(ctx, tok(seq), &zk.CreateRequest{
					Path: dir + "/entries/e-", Data: []byte(strconv.FormatInt(seq, 10)),
					Acl: zk.WorldACL(zk.PermAll), Flags: zk.FlagSequence})
				return err
			})
			// The ledger, in commit order (the sequence numbers of its
			// entries), holds exactly the admitted tokens, increasing.
			if _, err := conn.Sync(dir + "/entries"); err != nil {
				t.Fatal(err)
			}
			children, _, err := conn.Children(dir + "/entries")
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(children) // e-<10 digits>: name order is creation order
			var ledger []int64
			for _, c := range children {
				data, _, err := conn.Get(dir + "/entries/" + c)
				if err != nil {
					t.Fatal(err)
				}
				seq, _ := strconv.ParseInt(string(data), 10, 64)
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
			if err := ctx.Err(); err != nil {
				t.Fatal(err)
			}
		})
	}

	t.Run("Nested", func(t *testing.T) {
		// The fence of lock "ledger" is the parent of lock "ledger/eu"'s:
		// whichever is written first, both work on their own.
		ctx := fencetest.Ctx(t)
		inner := newFence(t, conn, "/nest/ledger/eu", "ledger/eu")
		outer := newFence(t, conn, "/nest/ledger", "ledger")
		if err := inner.Admit(ctx, distlock.Token{Name: "ledger/eu", Seq: 100, Owner: fencetest.Owner}); err != nil {
			t.Fatal(err)
		}
		if n, err := outer.Newest(ctx); err != nil || !n.IsZero() {
			t.Fatalf("Newest of a fence node created as a parent: %v, %v", n, err)
		}
		if err := outer.Admit(ctx, tok(3)); err != nil {
			t.Fatalf("admit on a fence node created as a parent: %v", err)
		}
		if err := outer.Admit(ctx, tok(2)); !errors.Is(err, fencing.ErrStale) {
			t.Fatalf("admit 2 after 3: %v", err)
		}
		if n, err := inner.Newest(ctx); err != nil || n.Seq != 100 {
			t.Fatalf("inner Newest: %v, %v", n, err)
		}
	})

	t.Run("ContextEnds", func(t *testing.T) {
		// Replies held back: the call blocks, and only the context can
		// end the Admit.
		c := connect(t, ens)
		f := newFence(t, c, "/ctx/fence", "ledger")
		release, err := ens.HoldReplies(c)
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		// No reply can come, so only the deadline can end the Admit: the
		// short timeout decides how long the test waits, not what it sees.
		ctx, cancel := context.WithTimeout(fencetest.Ctx(t), 300*time.Millisecond)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- f.Admit(ctx, tok(1)) }()
		select {
		case err := <-done:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Admit past its deadline: %v", err)
			}
		case <-fencetest.Ctx(t).Done():
			t.Fatal("Admit did not return when its context ended")
		}
		if err := f.Admit(ctx, tok(1)); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Admit with an ended context: %v", err)
		}
	})

	t.Run("Legacy", func(t *testing.T) {
		// Data stored by a version before tokens named their owner: the
		// number alone. It orders tokens as before, and refuses its own
		// number as a fork, since its owner is unknown.
		ctx := fencetest.Ctx(t)
		if _, err := conn.Create("/legacy", []byte("5"), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		f := newFence(t, conn, "/legacy", "ledger")
		legacy := distlock.Token{Name: "ledger", Seq: 5}
		if n, err := f.Newest(ctx); err != nil || n != legacy {
			t.Fatalf("Newest: %#v, %v, want %#v", n, err, legacy)
		}
		var stale *fencing.StaleError
		if err := f.Admit(ctx, tok(4)); !errors.As(err, &stale) || stale.Newest != legacy {
			t.Fatalf("admit 4: %v, want a *StaleError naming %#v", err, legacy)
		}
		var fork *fencing.ForkError
		x := &zk.CreateRequest{Path: "/legacy-data", Acl: zk.WorldACL(zk.PermAll)}
		if _, err := f.Write(ctx, tok(5), x); !errors.As(err, &fork) || fork.Admitted != legacy {
			t.Fatalf("write 5: %v, want a *ForkError naming %#v", err, legacy)
		}
		absent(t, conn, "/legacy-data")
		if err := f.Admit(ctx, tok(6)); err != nil {
			t.Fatalf("admit 6: %v", err)
		}
		if n, err := f.Newest(ctx); err != nil || n != tok(6) {
			t.Fatalf("Newest: %v, %v, want %v", n, err, tok(6))
		}
		for i, v := range []string{"5.0", "5.A", "05", "+5", "5.01", "05.1", "5.1.1", "-5", "0"} {
			p := fmt.Sprintf("/legacy-bad%d", i)
			if _, err := conn.Create(p, []byte(v), 0, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatal(err)
			}
			if n, err := newFence(t, conn, p, "ledger").Newest(ctx); err == nil {
				t.Errorf("stored %q: Newest = %v, want an error", v, n)
			}
		}
	})

	t.Run("BadInput", func(t *testing.T) {
		ctx := fencetest.Ctx(t)
		if _, err := zkfence.New(nil, "/k", "ledger"); !errors.Is(err, distlock.ErrNilClient) {
			t.Errorf("nil conn: %v", err)
		}
		for _, p := range []string{"", "/", "k", "/k/", "/a//b", "/a/./b", "/a/.."} {
			if _, err := zkfence.New(conn, p, "ledger"); !errors.Is(err, fencing.ErrInvalidArgument) {
				t.Errorf("path %q: %v, want ErrInvalidArgument", p, err)
			}
		}
		if _, err := zkfence.New(conn, "/k", "bad name"); !errors.Is(err, distlock.ErrInvalidName) {
			t.Errorf("bad lock name: %v", err)
		}
		f := newFence(t, conn, "/bad/fence", "ledger")
		x := &zk.CreateRequest{Path: "/bad-x", Acl: zk.WorldACL(zk.PermAll)}
		if _, err := f.Write(ctx, distlock.Token{Name: "other", Seq: 3, Owner: fencetest.Owner}, x); !errors.Is(err, fencing.ErrForeignToken) {
			t.Errorf("foreign token: %v", err)
		}
		if _, err := f.Write(ctx, distlock.Token{Name: "ledger", Seq: 3}, x); !errors.Is(err, distlock.ErrInvalidToken) {
			t.Errorf("token without owner: %v", err)
		}
		if _, err := f.Write(ctx, distlock.Token{Name: "ledger"}, x); !errors.Is(err, distlock.ErrInvalidToken) {
			t.Errorf("invalid token: %v", err)
		}
		for _, op := range []any{"create", zk.CreateRequest{Path: "/bad-x"}, (*zk.SetDataRequest)(nil),
			&zk.SetDataRequest{Path: "/bad/fence", Version: -1}, &zk.DeleteRequest{Path: "/bad/fence", Version: -1}} {
			if _, err := f.Write(ctx, tok(3), op); !errors.Is(err, fencing.ErrInvalidArgument) {
				t.Errorf("op %#v: %v, want ErrInvalidArgument", op, err)
			}
		}
		if _, err := zkfence.WriteAll(ctx, []distlock.Token{tok(3)}, []*zkfence.Fence{nil}); !errors.Is(err, fencing.ErrInvalidArgument) {
			t.Errorf("WriteAll with a nil fence: %v, want ErrInvalidArgument", err)
		}
		absent(t, conn, "/bad")
		absent(t, conn, "/bad-x")

		// Data not written by this package is reported, not taken for a
		// token.
		if _, err := conn.Create("/garbage", []byte("xyz"), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		g := newFence(t, conn, "/garbage", "ledger")
		if err := g.Admit(ctx, tok(3)); err == nil || errors.Is(err, fencing.ErrStale) {
			t.Errorf("admit over foreign data: %v", err)
		}
		if _, err := g.Newest(ctx); err == nil {
			t.Error("Newest of foreign data: no error")
		}
	})
}
