package zkfence_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
	"github.com/distlock/distlock/fencing/fencetest"
	"github.com/distlock/distlock/fencing/zkfence"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
	"github.com/go-zookeeper/zk"
)

// zkMulti is WriteAll for the multi contract: the ledger's entries are
// sequential nodes created by the write, in creation order.
type zkMulti struct {
	conn   *zk.Conn
	fences []*zkfence.Fence
	ledger string
}

func (m zkMulti) Write(ctx context.Context, tokens []distlock.Token, entry int64) error {
	_, err := zkfence.WriteAll(ctx, tokens, m.fences, &zk.CreateRequest{
		Path: m.ledger + "/e-", Data: []byte(strconv.FormatInt(entry, 10)),
		Acl: zk.WorldACL(zk.PermAll), Flags: zk.FlagSequence})
	return err
}

func (m zkMulti) Newest(ctx context.Context) ([]distlock.Token, error) {
	ts := make([]distlock.Token, len(m.fences))
	for i, f := range m.fences {
		var err error
		if ts[i], err = f.Newest(ctx); err != nil {
			return nil, err
		}
	}
	return ts, nil
}

func (m zkMulti) Ledger(context.Context) ([]int64, error) {
	if _, err := m.conn.Sync(m.ledger); err != nil {
		return nil, err
	}
	children, _, err := m.conn.Children(m.ledger)
	if err != nil {
		return nil, err
	}
	slices.Sort(children) // e-<10 digits>: name order is creation order
	var entries []int64
	for _, c := range children {
		data, _, err := m.conn.Get(m.ledger + "/" + c)
		if err != nil {
			return nil, err
		}
		e, err := strconv.ParseInt(string(data), 10, 64)
		if err != nil {
			return nil, err
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// mkdirs creates path and its missing parents.
func mkdirs(t *testing.T, conn *zk.Conn, path string) {
	t.Helper()
	for i := 1; i <= len(path); i++ {
		if i < len(path) && path[i] != '/' {
			continue
		}
		if _, err := conn.Create(path[:i], nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
}

// testWriteAll runs the multi contract and WriteAll's own cases on ens.
func testWriteAll(t *testing.T, ens *integration.ZooKeeperEnsemble, conn *zk.Conn) {
	t.Run("Contract", func(t *testing.T) {
		// Each Multi's fences share a connection, to one server in turn:
		// writers of overlapping fences read from different servers, some
		// of them followers that may lag.
		conns := make([]*zk.Conn, len(ens.Servers))
		for i := range conns {
			conns[i] = connect(t, ens, i)
		}
		var made int
		fencetest.RunMulti(t, func(t *testing.T, ledger string, resources, locks []string, opts ...fencing.Option) fencetest.Multi {
			c := conns[made%len(conns)]
			made++
			m := zkMulti{conn: conn, ledger: "/multi-ledger/" + ledger}
			mkdirs(t, conn, m.ledger)
			for i, r := range resources {
				m.fences = append(m.fences, newFence(t, c, "/multi/"+r, locks[i], zkfence.WithTelemetry(opts...)))
			}
			return m
		})
	})

	t.Run("Ops", func(t *testing.T) {
		ctx := fencetest.Ctx(t)
		// Fence b's node is below a's, and comes first: b's creation finds
		// no parent, which is created empty, and a's node is then set.
		b := newFence(t, conn, "/wa/fence-a/b", "ledger/b")
		a := newFence(t, conn, "/wa/fence-a", "ledger/a")
		fs := []*zkfence.Fence{b, a}
		rs, err := zkfence.WriteAll(ctx, fencetest.MultiToks(5, "ledger/a", "ledger/b"), fs,
			&zk.CreateRequest{Path: "/wa-data", Data: []byte("5"), Acl: zk.WorldACL(zk.PermAll)})
		if err != nil {
			t.Fatalf("first write: %v", err)
		}
		if len(rs) != 1 || rs[0].String != "/wa-data" {
			t.Fatalf("responses %+v, want the create's", rs)
		}
		for _, f := range fs {
			if n, err := f.Newest(ctx); err != nil || n.Seq != 5 {
				t.Fatalf("%s: newest %v, %v", f.Path(), n, err)
			}
		}
		if data, _, err := conn.Get("/wa/fence-a/b"); err != nil || string(data) != "5.694d7f0c8a1b2c3d" {
			t.Fatalf("stored %q, %v", data, err)
		}
		// b alone moves on; then 6 is stale at b, and nothing is written.
		if err := b.Admit(ctx, fencetest.MultiTok("ledger/b", 7)); err != nil {
			t.Fatal(err)
		}
		_, err = zkfence.WriteAll(ctx, fencetest.MultiToks(6, "ledger/a", "ledger/b"), fs,
			&zk.CreateRequest{Path: "/wa-six", Acl: zk.WorldACL(zk.PermAll)})
		var stale *fencing.StaleError
		if !errors.As(err, &stale) || !strings.Contains(stale.Resource, "/wa/fence-a/b") || stale.Newest != fencetest.MultiTok("ledger/b", 7) {
			t.Fatalf("write 6 after b's 7: %v, want a *StaleError of /wa/fence-a/b naming 7", err)
		}
		absent(t, conn, "/wa-six")
		if n, err := a.Newest(ctx); err != nil || n.Seq != 5 {
			t.Fatalf("a's newest %v, %v: the refused write changed it", n, err)
		}
		// An op that fails makes the whole multi fail: no token recorded.
		_, err = zkfence.WriteAll(ctx, fencetest.MultiToks(8, "ledger/a", "ledger/b"), fs,
			&zk.CreateRequest{Path: "/wa-data", Acl: zk.WorldACL(zk.PermAll)})
		if !errors.Is(err, zk.ErrNodeExists) {
			t.Fatalf("write with a failing op: %v, want zk.ErrNodeExists", err)
		}
		if n, err := a.Newest(ctx); err != nil || n.Seq != 5 {
			t.Fatalf("a's newest %v, %v", n, err)
		}
		if _, err := zkfence.WriteAll(ctx, fencetest.MultiToks(8, "ledger/a", "ledger/b"), fs,
			&zk.SetDataRequest{Path: "/wa-data", Data: []byte("8"), Version: -1}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("MultiMutex", func(t *testing.T) {
		// The tokens of a real multi-lock: the successor's acquisition
		// makes the first holder's write stale at every fence.
		ctx := fencetest.Ctx(t)
		sess, err := zklock.NewSession(ctx, conn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sess.Close(fencetest.Ctx(t)) })
		mm, err := recipe.NewMultiMutex(sess, "jobs/usd", "jobs/eur")
		if err != nil {
			t.Fatal(err)
		}
		eur := newFence(t, conn, "/wam/eur", "jobs/eur")
		usd := newFence(t, conn, "/wam/usd", "jobs/usd")
		fs := []*zkfence.Fence{usd, eur}
		data := func(v string) *zk.SetDataRequest {
			return &zk.SetDataRequest{Path: "/wam", Data: []byte(v), Version: -1}
		}
		first, err := mm.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		old := first.Tokens()
		if _, err := zkfence.WriteAll(ctx, old, fs); err != nil { // creates /wam
			t.Fatalf("holder's write: %v", err)
		}
		if _, err := zkfence.WriteAll(ctx, old, fs, data("1")); err != nil {
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
		if _, err := zkfence.WriteAll(ctx, second.Tokens(), fs, data("2")); err != nil {
			t.Fatalf("successor's write: %v", err)
		}
		if _, err := zkfence.WriteAll(ctx, old, fs, data("late")); !errors.Is(err, fencing.ErrStale) {
			t.Fatalf("first holder's late write: %v, want ErrStale", err)
		}
		if got, _, err := conn.Get("/wam"); err != nil || string(got) != "2" {
			t.Fatalf("/wam = %q, %v, want 2", got, err)
		}
		for _, f := range fs {
			if n, err := f.Newest(ctx); err != nil || n.Seq != second.Token().Seq {
				t.Errorf("%s: newest %v, %v, want the successor's", f.Path(), n, err)
			}
		}
	})

	t.Run("BadInput", func(t *testing.T) {
		ctx := fencetest.Ctx(t)
		a := newFence(t, conn, "/wab/fence-a", "ledger/a")
		b := newFence(t, conn, "/wab/fence-b", "ledger/b")
		toks := fencetest.MultiToks(3, "ledger/a", "ledger/b")
		x := &zk.CreateRequest{Path: "/wab-x", Acl: zk.WorldACL(zk.PermAll)}
		for _, c := range []struct {
			why    string
			fences []*zkfence.Fence
			ops    []any
		}{
			{"nil fence", []*zkfence.Fence{a, nil}, nil},
			{"two connections", []*zkfence.Fence{a, newFence(t, connect(t, ens), "/wab/fence-b", "ledger/b")}, nil},
			{"one path twice", []*zkfence.Fence{a, newFence(t, conn, "/wab/fence-a", "ledger/b")}, nil},
			{"op on a fence node", []*zkfence.Fence{a, b}, []any{&zk.SetDataRequest{Path: "/wab/fence-b", Version: -1}}},
			{"op of another type", []*zkfence.Fence{a, b}, []any{"create"}},
		} {
			if _, err := zkfence.WriteAll(ctx, toks, c.fences, append(c.ops, x)...); err == nil {
				t.Errorf("%s: accepted", c.why)
			}
		}
		if _, err := zkfence.WriteAll(ctx, toks[:1], []*zkfence.Fence{a, b}, x); !errors.Is(err, fencing.ErrUnmatched) {
			t.Errorf("no token of b: %v", err)
		}
		absent(t, conn, "/wab")
		absent(t, conn, "/wab-x")
	})
}
