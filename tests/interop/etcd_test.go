package interop_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/integration/interop"
	"github.com/distlock/distlock/recipe"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdPrefix is distlock's prefix in these tests: its lock N has keys
// etcdPrefix+N+"/...", the prefix the foreign clients are given as N's.
const etcdPrefix = "/interop/"

// TestInteropEtcd runs the etcd matrix on one real member.
func TestInteropEtcd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ctl, err := interop.FindEtcdctl(ctx)
	need(t, err)

	c := integration.NewEtcd(t, integration.WithSize(1))
	eps := c.Endpoints()
	admin, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })

	pfx := func(name string) string { return etcdPrefix + name }
	etcdctlLock := func(name string) interop.Holder { return ctl.Lock(eps, pfx(name)) }
	etcdctlElect := func(name string) interop.Holder { return ctl.Elect(eps, pfx(name)) }
	mutex := func(name string) interop.Holder { return interop.EtcdMutex(eps, pfx(name)) }
	election := func(name string) interop.Holder { return interop.EtcdElection(eps, pfx(name)) }
	rwWrite := func(name string) interop.Holder { return interop.EtcdRWMutex(eps, pfx(name), true) }
	rwRead := func(name string) interop.Holder { return interop.EtcdRWMutex(eps, pfx(name), false) }
	v3lock := func(name string) interop.Holder { return interop.V3Lock(eps, pfx(name)) }
	v3election := func(name string) interop.Holder { return interop.V3Election(eps, pfx(name)) }
	// dlc is distlock's holder of kind, in compatibility mode c (none
	// for "").
	dlc := func(kind interop.Kind, c distlock.Compat) maker {
		return func(name string) interop.Holder {
			return interop.DistlockCompat("etcd", kind, name, c, func(ctx context.Context) (recipe.Backend, func(), error) {
				cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
				if err != nil {
					return nil, nil, err
				}
				s, err := etcdlock.NewSession(ctx, cli, recipe.WithPrefix(etcdPrefix))
				if err != nil {
					cli.Close()
					return nil, nil, err
				}
				return s, func() {
					s.Close(context.Background())
					cli.Close()
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
			pairSpec{ours, foreign, waits})
	}
	for _, f := range []maker{etcdctlLock, mutex, v3lock} {
		both(f, dl(interop.KindMutex))
	}
	both(rwWrite, dl(interop.KindWrite))
	both(rwWrite, dl(interop.KindRead))
	// The recipes reader waits only for keys under <lock>/write, the
	// recipe's own writers' keys, and distlock's writer has none there:
	// that direction is one-way on etcd too.
	specs = append(specs,
		pairSpec{rwRead, dl(interop.KindWrite), waits},
		pairSpec{dl(interop.KindWrite), rwRead, knownOneWay},
		pairSpec{rwRead, dl(interop.KindRead), shares},
		pairSpec{dl(interop.KindRead), rwRead, shares})
	for _, f := range []maker{etcdctlElect, election, v3election} {
		both(f, dl(interop.KindElection))
	}
	// In a compatibility mode distlock's keys are the foreign recipe's
	// own form, so the recipes reader waits for distlock's writer too.
	for _, f := range []maker{etcdctlLock, mutex, v3lock} {
		both(f, dlc(interop.KindMutex, distlock.CompatEtcd))
	}
	both(rwWrite, dlc(interop.KindWrite, distlock.CompatEtcdRecipes))
	both(rwWrite, dlc(interop.KindRead, distlock.CompatEtcdRecipes))
	both(rwRead, dlc(interop.KindWrite, distlock.CompatEtcdRecipes))
	specs = append(specs,
		pairSpec{rwRead, dlc(interop.KindRead, distlock.CompatEtcdRecipes), shares},
		pairSpec{dlc(interop.KindRead, distlock.CompatEtcdRecipes), rwRead, shares})

	for _, f := range []maker{etcdctlLock, etcdctlElect, mutex, election, rwWrite, v3lock, v3election, dl(interop.KindMutex)} {
		specs = append(specs, pairSpec{f, f, waits})
	}

	for _, s := range specs {
		name := newName()
		p := pair{holder: s.holder(name), contender: s.contender(name), expect: s.expect}
		t.Run(strings.ReplaceAll(p.holder.Name()+"→"+p.contender.Name(), " ", "_"), func(t *testing.T) {
			runPair(t, "etcd", interop.EtcdObserver(admin, pfx(name)+"/"), p)
		})
	}
	logReport(t, "etcd")
}
