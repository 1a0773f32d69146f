package zklock_test

import (
	"errors"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
	"github.com/distlock/distlock/fencing/zkfence"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
	"github.com/go-zookeeper/zk"
)

// TestForeignToken fences the holders of one lock made by go-zookeeper's
// zk.Lock and by distlock with one zkfence.Fence: each holder's token is
// admitted in the order they held, and the older one is refused once a
// newer one was admitted.
func TestForeignToken(t *testing.T) {
	ens := integration.NewZooKeeper(t)
	admin, events := connect(t, ens)
	drain(events)
	ctx := testCtx(t)
	const name = "ledger"
	acl := zk.WorldACL(zk.PermAll)

	newFence := func(t *testing.T) *zkfence.Fence {
		t.Helper()
		f, err := zkfence.New(admin, newPrefix()+"/fence", name)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	foreign := func(t *testing.T) *zk.Conn {
		t.Helper()
		conn, events := connect(t, ens)
		drain(events)
		return conn
	}
	// only is the one child of dir.
	only := func(t *testing.T, dir string) string {
		t.Helper()
		children, _, err := admin.Children(dir)
		if err != nil || len(children) != 1 {
			t.Fatalf("children of %s: %v, %v; want one", dir, children, err)
		}
		return dir + "/" + children[0]
	}
	inspect := func(t *testing.T, prefix, key string, want distlock.Token) {
		t.Helper()
		a, err := zklock.NewAdmin(admin, prefix)
		if err != nil {
			t.Fatal(err)
		}
		q, err := a.Inspect(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range q {
			if e.Key == key {
				if e.Token != want {
					t.Errorf("Inspect lists %s with token %v, the helper says %v", key, e.Token, want)
				}
				return
			}
		}
		t.Logf("Inspect does not list the foreign entry %s", key)
	}

	t.Run("ForeignThenDistlock", func(t *testing.T) {
		prefix, fence, conn := newPrefix(), newFence(t), foreign(t)
		dir := prefix + "/" + name
		l := zk.NewLock(conn, dir, acl)
		if err := l.Lock(); err != nil {
			t.Fatal(err)
		}
		ftok, err := zklock.HolderToken(ctx, conn, prefix, name)
		if err != nil {
			t.Fatal(err)
		}
		node := only(t, dir)
		_, st, err := admin.Exists(node)
		if err != nil {
			t.Fatal(err)
		}
		want := distlock.Token{Name: name, Seq: st.Czxid, Owner: uint64(conn.SessionID())}
		if ftok != want {
			t.Fatalf("HolderToken = %v, want %v (node %s)", ftok, want, node)
		}
		if ntok, err := zklock.EntryToken(ctx, admin, prefix, node); err != nil || ntok != ftok {
			t.Fatalf("EntryToken(%s) = %v, %v; want %v", node, ntok, err, ftok)
		}
		inspect(t, prefix, node, ftok)
		if err := fence.Admit(ctx, ftok); err != nil {
			t.Fatalf("foreign holder refused: %v", err)
		}
		if err := l.Unlock(); err != nil {
			t.Fatal(err)
		}
		if _, err := zklock.HolderToken(ctx, conn, prefix, name); !errors.Is(err, zklock.ErrNoEntry) {
			t.Errorf("HolderToken after Unlock: %v, want ErrNoEntry", err)
		}
		if _, err := zklock.EntryToken(ctx, admin, prefix, node); !errors.Is(err, zklock.ErrNoEntry) {
			t.Errorf("EntryToken after Unlock: %v, want ErrNoEntry", err)
		}

		s := newSession(t, foreign(t), recipe.WithPrefix(prefix))
		dl, err := newMutex(t, s, name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer dl.Unlock(ctx)
		if !dl.Token().Newer(ftok) {
			t.Fatalf("distlock's token %v is not newer than the foreign one %v", dl.Token(), ftok)
		}
		if err := fence.Admit(ctx, dl.Token()); err != nil {
			t.Fatalf("distlock holder refused: %v", err)
		}
		var stale *fencing.StaleError
		if err := fence.Admit(ctx, ftok); !errors.As(err, &stale) || stale.Newest != dl.Token() {
			t.Fatalf("stale foreign token: %v, want a StaleError naming %v", err, dl.Token())
		}
		// HolderToken finds distlock's own entries too.
		if htok, err := zklock.HolderToken(ctx, s.Conn(), prefix, name); err != nil || htok != dl.Token() {
			t.Errorf("HolderToken of distlock's holder = %v, %v; want %v", htok, err, dl.Token())
		}
	})

	t.Run("DistlockThenForeign", func(t *testing.T) {
		prefix, fence := newPrefix(), newFence(t)
		s := newSession(t, foreign(t), recipe.WithPrefix(prefix))
		dl, err := newMutex(t, s, name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := fence.Admit(ctx, dl.Token()); err != nil {
			t.Fatal(err)
		}
		if err := dl.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		conn := foreign(t)
		l := zk.NewLock(conn, prefix+"/"+name, acl)
		if err := l.Lock(); err != nil {
			t.Fatal(err)
		}
		defer l.Unlock()
		ftok, err := zklock.HolderToken(ctx, conn, prefix, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := fence.Admit(ctx, ftok); err != nil {
			t.Fatalf("foreign holder after distlock refused: %v", err)
		}
		if err := fence.Admit(ctx, dl.Token()); !errors.Is(err, fencing.ErrStale) {
			t.Fatalf("distlock's stale token: %v, want ErrStale", err)
		}
	})

	t.Run("OldestOfSession", func(t *testing.T) {
		// Two zk.Lock values on one connection: the second queues behind
		// the first (zk.Lock does not know they share a session), and
		// the session's token is the first's, the one it holds by.
		prefix, conn := newPrefix(), foreign(t)
		dir := prefix + "/" + name
		first := zk.NewLock(conn, dir, acl)
		if err := first.Lock(); err != nil {
			t.Fatal(err)
		}
		node := only(t, dir)
		second := zk.NewLock(conn, dir, acl)
		locked := make(chan error, 1)
		go func() { locked <- second.Lock() }()
		waitChildren(t, admin, dir, 2, func(string) bool { return true })
		want, err := zklock.EntryToken(ctx, admin, prefix, node)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := zklock.HolderToken(ctx, conn, prefix, name); err != nil || got != want {
			t.Errorf("HolderToken = %v, %v; want the oldest entry's %v", got, err, want)
		}
		if err := first.Unlock(); err != nil {
			t.Fatal(err)
		}
		if err := recv(t, locked, "second zk.Lock"); err != nil {
			t.Fatal(err)
		}
		defer second.Unlock()
		if got, err := zklock.HolderToken(ctx, conn, prefix, name); err != nil || !got.Newer(want) {
			t.Errorf("HolderToken after the first's Unlock = %v, %v; want one newer than %v", got, err, want)
		}
	})

	t.Run("BadInput", func(t *testing.T) {
		prefix := newPrefix()
		if _, err := zklock.HolderToken(ctx, admin, prefix, name); !errors.Is(err, zklock.ErrNoEntry) {
			t.Errorf("HolderToken without a directory: %v, want ErrNoEntry", err)
		}
		if _, err := zklock.HolderToken(ctx, admin, prefix+"/", name); !errors.Is(err, distlock.ErrInvalidName) {
			t.Errorf("bad prefix: %v, want ErrInvalidName", err)
		}
		if _, err := zklock.HolderToken(ctx, admin, prefix, "a@b"); !errors.Is(err, distlock.ErrInvalidName) {
			t.Errorf("bad name: %v, want ErrInvalidName", err)
		}
		if _, err := zklock.HolderToken(ctx, nil, prefix, name); !errors.Is(err, distlock.ErrNilClient) {
			t.Errorf("nil conn: %v, want ErrNilClient", err)
		}
		if _, err := zklock.EntryToken(ctx, admin, "/elsewhere", prefix+"/"+name+"/x"); !errors.Is(err, distlock.ErrInvalidName) {
			t.Errorf("node outside the prefix: %v, want ErrInvalidName", err)
		}
		if _, err := zklock.EntryToken(ctx, admin, prefix, prefix+"/"+name); !errors.Is(err, distlock.ErrInvalidName) {
			t.Errorf("a lock's directory: %v, want ErrInvalidName", err)
		}
		persistent := prefix + "/" + name + "/lock-0000000001"
		if _, err := admin.Create(prefix, nil, 0, acl); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.Create(prefix+"/"+name, nil, 0, acl); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.Create(persistent, nil, 0, acl); err != nil {
			t.Fatal(err)
		}
		if _, err := zklock.EntryToken(ctx, admin, prefix, persistent); !errors.Is(err, distlock.ErrInvalidToken) {
			t.Errorf("persistent node: %v, want ErrInvalidToken", err)
		}
		if _, err := zklock.HolderToken(ctx, admin, prefix, name); !errors.Is(err, zklock.ErrNoEntry) {
			t.Errorf("HolderToken beside a persistent node: %v, want ErrNoEntry", err)
		}
	})
}
