package interop_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/integration/interop"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
)

// zkPrefix is distlock's prefix in these tests: its lock N is the znode
// directory zkPrefix/N, where the foreign clients are pointed too.
const zkPrefix = "/interop"

// maker returns a holder of the lock name.
type maker func(name string) interop.Holder

// TestInteropZooKeeper runs the ZooKeeper matrix on one real server.
func TestInteropZooKeeper(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cur, err := interop.FindCurator(ctx)
	need(t, err)
	kz, err := interop.FindKazoo(ctx)
	need(t, err)

	ens := integration.NewZooKeeper(t, integration.WithSize(1))
	addrs := ens.Addrs()
	connect := strings.Join(addrs, ",")
	admin, events, err := ens.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range events {
		}
	}()
	t.Cleanup(admin.Close)

	dir := func(name string) string { return zkPrefix + "/" + name }
	curator := func(recipe string) maker {
		return func(name string) interop.Holder { return cur.Holder(connect, dir(name), recipe) }
	}
	kazoo := func(recipe string) maker {
		return func(name string) interop.Holder { return kz.Holder(connect, dir(name), recipe) }
	}
	gozk := func(name string) interop.Holder { return interop.GoZK(addrs, dir(name)) }
	// dlc is distlock's holder of kind, in compatibility mode c (none
	// for "").
	dlc := func(kind interop.Kind, c distlock.Compat) maker {
		return func(name string) interop.Holder {
			return interop.DistlockCompat("zk", kind, name, c, func(ctx context.Context) (recipe.Backend, func(), error) {
				conn, events, err := ens.Connect(ctx)
				if err != nil {
					return nil, nil, err
				}
				go func() {
					for range events {
					}
				}()
				s, err := zklock.NewSession(ctx, conn, zklock.WithTickTime(integration.ZooKeeperTickTime), recipe.WithPrefix(zkPrefix))
				if err != nil {
					conn.Close()
					return nil, nil, err
				}
				return s, func() {
					s.Close(context.Background())
					conn.Close()
				}, nil
			})
		}
	}

	dl := func(kind interop.Kind) maker { return dlc(kind, "") }

	type pairSpec struct {
		holder, contender maker
		expect            expect
	}
	var specs []pairSpec
	both := func(foreign, ours maker) {
		specs = append(specs,
			pairSpec{foreign, ours, waits},
			pairSpec{ours, foreign, knownOneWay})
	}
	// Mutexes.
	for _, f := range []maker{curator("mutex"), kazoo("lock")} {
		both(f, dl(interop.KindMutex))
	}
	specs = append(specs,
		pairSpec{gozk, dl(interop.KindMutex), waits},
		pairSpec{dl(interop.KindMutex), gozk, knownFails})
	// Readers-writer locks: writer against writer, writer against
	// reader, reader against writer.
	for _, f := range []struct{ w, r maker }{{curator("write"), curator("read")}, {kazoo("write"), kazoo("read")}} {
		both(f.w, dl(interop.KindWrite))
		both(f.w, dl(interop.KindRead))
		both(f.r, dl(interop.KindWrite))
		specs = append(specs,
			pairSpec{f.r, dl(interop.KindRead), shares},
			pairSpec{dl(interop.KindRead), f.r, shares})
	}
	// Elections and latches.
	for _, f := range []maker{curator("latch"), curator("selector"), kazoo("election")} {
		both(f, dl(interop.KindElection))
	}
	// In a compatibility mode distlock's entries carry the foreign
	// recipe's names, so the foreign client waits for them too: both
	// directions wait.
	compat := func(foreign, ours maker) {
		specs = append(specs, pairSpec{foreign, ours, waits}, pairSpec{ours, foreign, waits})
	}
	compat(curator("mutex"), dlc(interop.KindMutex, distlock.CompatCurator))
	compat(kazoo("lock"), dlc(interop.KindMutex, distlock.CompatKazoo))
	compat(gozk, dlc(interop.KindMutex, distlock.CompatGoZookeeper))
	for _, f := range []struct {
		w, r maker
		c    distlock.Compat
	}{{curator("write"), curator("read"), distlock.CompatCurator}, {kazoo("write"), kazoo("read"), distlock.CompatKazoo}} {
		compat(f.w, dlc(interop.KindWrite, f.c))
		compat(f.w, dlc(interop.KindRead, f.c))
		compat(f.r, dlc(interop.KindWrite, f.c))
	}
	compat(curator("selector"), dlc(interop.KindElection, distlock.CompatCurator))
	compat(curator("latch"), dlc(interop.KindElection, distlock.CompatCuratorLatch))
	compat(kazoo("election"), dlc(interop.KindElection, distlock.CompatKazoo))

	// Each client against itself: the controls.
	for _, f := range []maker{curator("mutex"), curator("latch"), kazoo("lock"), kazoo("election"), gozk, dl(interop.KindMutex)} {
		specs = append(specs, pairSpec{f, f, waits})
	}

	for _, s := range specs {
		name := newName()
		p := pair{holder: s.holder(name), contender: s.contender(name), expect: s.expect}
		t.Run(strings.ReplaceAll(p.holder.Name()+"→"+p.contender.Name(), " ", "_"), func(t *testing.T) {
			runPair(t, "ZooKeeper", interop.ZKObserver(admin, dir(name)), p)
		})
	}
	logReport(t, "ZooKeeper")
}
