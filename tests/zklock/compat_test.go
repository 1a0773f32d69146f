package zklock_test

import (
	"errors"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/integration/locktest"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
	"github.com/go-zookeeper/zk"
)

// Compatibility modes: distlock's entries named as another client's
// recipe names its own, so that exclusion holds both ways. go-zookeeper's
// zk.Lock runs for real; Curator's and kazoo's rules are applied, as
// their sources state them, to the directory's real listing.

// compatName matches an entry of distlock's in a compatibility mode;
// group 1 is the foreign recipe's marker.
var compatName = regexp.MustCompile(`^@[wre]-[0-9a-f]{32}(-lock-|-__WRIT__|-__READ__|-latch-|__lock__|__rlock__)\d{10}$`)

// listing returns dir's children, after a sync.
func listing(t *testing.T, conn *zk.Conn, dir string) []string {
	t.Helper()
	if _, err := conn.Sync(dir); err != nil {
		t.Fatal(err)
	}
	kids, _, err := conn.Children(dir)
	if err != nil {
		t.Fatal(err)
	}
	return kids
}

// waitAll blocks until dir has at least n children of any name.
func waitAll(t *testing.T, conn *zk.Conn, dir string, n int) {
	t.Helper()
	waitChildren(t, conn, dir, n, func(string) bool { return true })
}

// ownCompat returns the one child of dir that is distlock's entry in a
// mode, failing unless its marker is want.
func ownCompat(t *testing.T, kids []string, want string) string {
	t.Helper()
	var own []string
	for _, k := range kids {
		if m := compatName.FindStringSubmatch(k); m != nil {
			if m[1] != want {
				t.Errorf("entry %s: marker %q, want %q", k, m[1], want)
			}
			own = append(own, k)
		}
	}
	if len(own) != 1 {
		t.Fatalf("children %v: %d entries of distlock's in a mode, want 1", kids, len(own))
	}
	return own[0]
}

// curatorSort is Curator's fixForSorting: what follows the last of the
// markers (InterProcessReadWriteLock strips "__READ__", then
// "__WRIT__"), or the whole name.
func curatorSort(s string, markers ...string) string {
	for _, m := range markers {
		if i := strings.LastIndex(s, m); i >= 0 {
			s = s[i+len(m):]
		}
	}
	return s
}

// curatorSorted is LockInternals.getSortedChildren: the children whose
// name contains the lock's name (the latch's), sorted by curatorSort.
func curatorSorted(kids []string, markers ...string) []string {
	out := slices.Clone(kids)
	slices.SortStableFunc(out, func(a, b string) int { return strings.Compare(curatorSort(a, markers...), curatorSort(b, markers...)) })
	return out
}

// curatorHolds is StandardLockInternalsDriver.getsTheLock (one lease):
// node is first once sorted.
func curatorHolds(kids []string, node string, markers ...string) bool {
	return slices.Index(curatorSorted(kids, markers...), node) == 0
}

// curatorReadHolds is InterProcessReadWriteLock's read predicate: no
// child containing "__WRIT__" sorts before node.
func curatorReadHolds(kids []string, node string) bool {
	for _, k := range curatorSorted(kids, "__READ__", "__WRIT__") {
		if strings.Contains(k, "__WRIT__") {
			return false
		}
		if k == node {
			return true
		}
	}
	return false
}

var (
	kazooLockContenders = regexp.MustCompile(`(?:__lock__|__rlock__)(-?\d{10})$`)
	kazooReadContenders = regexp.MustCompile(`(?:__lock__)(-?\d{10})$`)
)

// kazooHolds is kazoo's Lock._get_predecessor finding none: no child the
// recipe's regex matches has a smaller sequence than node.
func kazooHolds(kids []string, node string, re *regexp.Regexp) bool {
	mine := node[len(node)-10:]
	for _, k := range kids {
		if m := re.FindStringSubmatch(k); m != nil && m[1] < mine {
			return false
		}
	}
	return true
}

// compatSession returns a session on its own connection under prefix.
func compatSession(t *testing.T, ens *integration.ZooKeeperEnsemble, prefix string, server int) *zklock.Session {
	t.Helper()
	conn, events := connect(t, ens, server%3)
	drain(events)
	return newSession(t, conn, recipe.WithPrefix(prefix))
}

// wantOwn checks that Inspect lists node as distlock's own entry, at
// position pos, holding or not.
func wantOwn(t *testing.T, admin *zk.Conn, prefix, name, node string, pos int, holding bool) {
	t.Helper()
	q, err := mustAdmin(t, admin, prefix).Inspect(testCtx(t), name)
	if err != nil {
		t.Fatal(err)
	}
	e, ok := queueEntry(q, node)
	if !ok || e.Client != "" || e.Position != pos || e.Holding != holding {
		t.Errorf("Inspect: %s is %+v (listed %v) in %+v; want distlock's own at %d, holding %v", node, e, ok, q, pos, holding)
	}
}

// TestCompatZkLock: a Mutex in CompatGoZookeeper (or CompatCurator, the
// same names) and go-zookeeper's real zk.Lock exclude each other both
// ways, and zk.Lock never fails on distlock's entries.
func TestCompatZkLock(t *testing.T) {
	ens := integration.NewZooKeeper(t)
	admin, events := connect(t, ens)
	drain(events)
	for _, mode := range []distlock.Compat{distlock.CompatGoZookeeper, distlock.CompatCurator} {
		t.Run(string(mode), func(t *testing.T) {
			t.Run("DistlockHolds", func(t *testing.T) {
				prefix := newPrefix()
				dir := prefix + "/jobs"
				m, err := recipe.NewMutex(compatSession(t, ens, prefix, 0), "jobs", distlock.WithCompat(mode))
				if err != nil {
					t.Fatal(err)
				}
				l, err := m.Lock(testCtx(t))
				if err != nil {
					t.Fatal(err)
				}
				node := ownCompat(t, listing(t, admin, dir), "-lock-")
				zconn, events := connect(t, ens, 1)
				drain(events)
				zl := zk.NewLock(zconn, dir, zk.WorldACL(zk.PermAll))
				zres := make(chan error, 1)
				go func() { zres <- zl.Lock() }()
				waitAll(t, admin, dir, 2)
				select {
				case err := <-zres:
					t.Fatalf("zk.Lock returned while distlock holds: %v", err)
				case <-time.After(300 * time.Millisecond):
				}
				wantOwn(t, admin, prefix, "jobs", node, 1, true)
				mustUnlock(t, l)
				if err := recv(t, zres, "zk.Lock after distlock's Unlock"); err != nil {
					t.Fatalf("zk.Lock: %v", err)
				}
				// While zk.Lock holds, distlock waits, and zk.Lock's
				// Unlock lets it in.
				res := lockAsync(testCtx(t), m)
				waitAll(t, admin, dir, 2)
				notAcquired(t, "behind zk.Lock", 300*time.Millisecond, res)
				if err := zl.Unlock(); err != nil {
					t.Fatal(err)
				}
				r := recv(t, res, "the lock after zk.Lock's Unlock")
				if r.Err != nil {
					t.Fatal(r.Err)
				}
				mustUnlock(t, r.Lease)
				noEphemerals(t, admin, dir)
			})
			t.Run("ZkLockHolds", func(t *testing.T) {
				prefix := newPrefix()
				dir := prefix + "/jobs"
				zconn, events := connect(t, ens, 2)
				drain(events)
				zl := zk.NewLock(zconn, dir, zk.WorldACL(zk.PermAll))
				if err := zl.Lock(); err != nil {
					t.Fatal(err)
				}
				m, err := recipe.NewMutex(compatSession(t, ens, prefix, 1), "jobs", distlock.WithCompat(mode))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := m.TryLock(testCtx(t)); !errors.Is(err, distlock.ErrLocked) {
					t.Errorf("TryLock while zk.Lock holds: %v, want ErrLocked", err)
				}
				res := lockAsync(testCtx(t), m)
				waitAll(t, admin, dir, 2)
				node := ownCompat(t, listing(t, admin, dir), "-lock-")
				wantOwn(t, admin, prefix, "jobs", node, 2, false)
				// A second zk.Lock behind distlock's waiting entry parses
				// it and waits for it.
				z2conn, events := connect(t, ens, 0)
				drain(events)
				z2 := zk.NewLock(z2conn, dir, zk.WorldACL(zk.PermAll))
				z2res := make(chan error, 1)
				go func() { z2res <- z2.Lock() }()
				waitAll(t, admin, dir, 3)
				notAcquired(t, "behind zk.Lock", 300*time.Millisecond, res)
				if err := zl.Unlock(); err != nil {
					t.Fatal(err)
				}
				r := recv(t, res, "the lock after zk.Lock's Unlock")
				if r.Err != nil {
					t.Fatal(r.Err)
				}
				select {
				case err := <-z2res:
					t.Fatalf("the second zk.Lock returned while distlock holds: %v", err)
				case <-time.After(300 * time.Millisecond):
				}
				mustUnlock(t, r.Lease)
				if err := recv(t, z2res, "the second zk.Lock after distlock's Unlock"); err != nil {
					t.Fatalf("zk.Lock: %v", err)
				}
				if err := z2.Unlock(); err != nil {
					t.Fatal(err)
				}
				noEphemerals(t, admin, dir)
			})
		})
	}
}

// TestCompatForeignRules: by Curator's and kazoo's rules applied to the
// real listing, their entry made after distlock's holder waits for it;
// and distlock's entries stay its own (Inspect).
func TestCompatForeignRules(t *testing.T) {
	ens := integration.NewZooKeeper(t)
	admin, events := connect(t, ens)
	drain(events)
	fconn, events := connect(t, ens, 2)
	drain(events)
	type foreign struct {
		base  string
		holds func(kids []string, node string) bool // the foreign recipe's rule
		waits bool                                  // for distlock's holder
	}
	curatorLock := func(kids []string, n string) bool { return curatorHolds(kids, n, "lock-") }
	curatorWrite := func(kids []string, n string) bool { return curatorHolds(kids, n, "__READ__", "__WRIT__") }
	kazooLock := func(kids []string, n string) bool { return kazooHolds(kids, n, kazooLockContenders) }
	kazooRead := func(kids []string, n string) bool { return kazooHolds(kids, n, kazooReadContenders) }
	for _, c := range []struct {
		what    string
		mode    distlock.Compat
		rw      bool
		shared  bool
		marker  string
		foreign []foreign
	}{
		{"CuratorMutex", distlock.CompatCurator, false, false, "-lock-", []foreign{
			{"_c_" + curatorUUID + "-lock-", curatorLock, true},
			{"lock-", curatorLock, true},
		}},
		{"CuratorWriter", distlock.CompatCurator, true, false, "-__WRIT__", []foreign{
			{"_c_" + curatorUUID + "-__WRIT__", curatorWrite, true},
			{"_c_" + curatorUUID + "-__READ__", curatorReadHolds, true},
		}},
		{"CuratorReader", distlock.CompatCurator, true, true, "-__READ__", []foreign{
			{"_c_" + curatorUUID + "-__WRIT__", curatorWrite, true},
			{"_c_" + curatorUUID + "-__READ__", curatorReadHolds, false},
		}},
		{"KazooMutex", distlock.CompatKazoo, false, false, "__lock__", []foreign{
			{kazooHex + "__lock__", kazooLock, true},
			{kazooHex + "__rlock__", kazooRead, true},
		}},
		{"KazooWriter", distlock.CompatKazoo, true, false, "__lock__", []foreign{
			{kazooHex + "__lock__", kazooLock, true},
			{kazooHex + "__rlock__", kazooRead, true},
		}},
		{"KazooReader", distlock.CompatKazoo, true, true, "__rlock__", []foreign{
			{kazooHex + "__lock__", kazooLock, true},
			{kazooHex + "__rlock__", kazooRead, false},
		}},
	} {
		t.Run(c.what, func(t *testing.T) {
			prefix := newPrefix()
			dir := prefix + "/jobs"
			s := compatSession(t, ens, prefix, 0)
			var l *distlock.Lease
			var err error
			switch {
			case !c.rw:
				var m *recipe.Mutex
				if m, err = recipe.NewMutex(s, "jobs", distlock.WithCompat(c.mode)); err == nil {
					l, err = m.Lock(testCtx(t))
				}
			default:
				var rw *recipe.RWMutex
				if rw, err = recipe.NewRWMutex(s, "jobs", distlock.WithCompat(c.mode)); err == nil {
					if c.shared {
						l, err = rw.RLock(testCtx(t))
					} else {
						l, err = rw.Lock(testCtx(t))
					}
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			node := ownCompat(t, listing(t, admin, dir), c.marker)
			wantOwn(t, admin, prefix, "jobs", node, 1, true)
			for _, f := range c.foreign {
				p := foreignNode(t, fconn, dir, f.base)
				kids := listing(t, admin, dir)
				if holds := f.holds(kids, path.Base(p)); holds == f.waits {
					t.Errorf("%s beside distlock's %s (children %v): by its rule it holds %v, want %v", path.Base(p), node, kids, holds, !f.waits)
				}
				if err := fconn.Delete(p, -1); err != nil {
					t.Fatal(err)
				}
			}
			mustUnlock(t, l)
			noEphemerals(t, admin, dir)
		})
	}
}

// TestCompatElection: an election in a compatibility mode refuses what
// breaks "the oldest leads", and its candidates and the foreign ones
// take turns by age.
func TestCompatElection(t *testing.T) {
	ens := integration.NewZooKeeper(t)
	admin, events := connect(t, ens)
	drain(events)
	fconn, events := connect(t, ens, 2)
	drain(events)
	for _, c := range []struct {
		mode   distlock.Compat
		marker string
		base   string
		leads  func(kids []string, node string) bool
	}{
		{distlock.CompatCuratorLatch, "-latch-", "_c_" + curatorUUID + "-latch-", func(k []string, n string) bool { return curatorHolds(k, n, "latch-") }},
		{distlock.CompatCurator, "-lock-", "_c_" + curatorUUID + "-lock-", func(k []string, n string) bool { return curatorHolds(k, n, "lock-") }},
		{distlock.CompatKazoo, "__lock__", kazooHex + "__lock__", func(k []string, n string) bool { return kazooHolds(k, n, kazooLockContenders) }},
	} {
		t.Run(string(c.mode), func(t *testing.T) {
			prefix := newPrefix()
			dir := prefix + "/sched"
			n := 0
			candidate := func() *recipe.Election {
				n++
				el, err := recipe.NewElection(compatSession(t, ens, prefix, n), "sched", distlock.WithElectionCompat(c.mode))
				if err != nil {
					t.Fatal(err)
				}
				return el
			}
			a := candidate()
			if _, err := a.Campaign(testCtx(t), "a", distlock.WithPriority(3)); !errors.Is(err, errors.ErrUnsupported) {
				t.Fatalf("Campaign with a priority: %v, want ErrUnsupported", err)
			}
			la := locktest.MustCampaign(t, a, "a")
			node := ownCompat(t, listing(t, admin, dir), c.marker)
			wantOwn(t, admin, prefix, "sched", node, 1, true)
			// A foreign candidate younger than the leader waits by its rule.
			f := foreignNode(t, fconn, dir, c.base)
			if kids := listing(t, admin, dir); c.leads(kids, path.Base(f)) || !c.leads(kids, node) {
				t.Errorf("children %v: by the foreign rule %s leads", kids, path.Base(f))
			}
			b := candidate()
			rb := locktest.CampaignAsync(testCtx(t), b, "b")
			waitAll(t, admin, dir, 3)
			if _, err := la.HandOff(testCtx(t), ""); !errors.Is(err, errors.ErrUnsupported) {
				t.Errorf("HandOff: %v, want ErrUnsupported", err)
			}
			if err := la.Err(); err != nil {
				t.Fatalf("the leader lost with its refused handoff: %v", err)
			}
			locktest.MustResign(t, la)
			// The foreign candidate is now the oldest: it leads by its rule,
			// and distlock's younger candidate waits for it.
			if kids := listing(t, admin, dir); !c.leads(kids, path.Base(f)) {
				t.Errorf("children %v after the resignation: by the foreign rule %s does not lead", kids, path.Base(f))
			}
			q, err := mustAdmin(t, admin, prefix).Inspect(testCtx(t), "sched")
			if err != nil {
				t.Fatal(err)
			}
			if e, ok := queueEntry(q, f); !ok || !e.Holding || e.Position != 1 || e.Client == "" {
				t.Errorf("foreign candidate after the resignation: %+v (listed %v) in %+v; want it leading", e, ok, q)
			}
			locktest.NotLeading(t, "behind the foreign candidate", 300*time.Millisecond, rb)
			if err := fconn.Delete(f, -1); err != nil {
				t.Fatal(err)
			}
			lb := locktest.Leads(t, rb, "b, once the foreign candidate is gone")
			wantOwn(t, admin, prefix, "sched", ownCompat(t, listing(t, admin, dir), c.marker), 1, true)
			locktest.MustResign(t, lb)
			noEphemerals(t, admin, dir)
		})
	}
}

// TestCompatRefused: a mode the store has no such recipe for is refused
// by the constructor.
func TestCompatRefused(t *testing.T) {
	ens := integration.NewZooKeeper(t)
	s := compatSession(t, ens, newPrefix(), 0)
	for what, f := range map[string]func() error{
		"Mutex curator-latch": func() error {
			_, err := recipe.NewMutex(s, "jobs", distlock.WithCompat(distlock.CompatCuratorLatch))
			return err
		},
		"RWMutex curator-latch": func() error {
			_, err := recipe.NewRWMutex(s, "jobs", distlock.WithCompat(distlock.CompatCuratorLatch))
			return err
		},
		"RWMutex go-zookeeper": func() error {
			_, err := recipe.NewRWMutex(s, "jobs", distlock.WithCompat(distlock.CompatGoZookeeper))
			return err
		},
		"Mutex etcd": func() error {
			_, err := recipe.NewMutex(s, "jobs", distlock.WithCompat(distlock.CompatEtcd))
			return err
		},
		"RWMutex etcd-recipes": func() error {
			_, err := recipe.NewRWMutex(s, "jobs", distlock.WithCompat(distlock.CompatEtcdRecipes))
			return err
		},
		"Election go-zookeeper": func() error {
			_, err := recipe.NewElection(s, "sched", distlock.WithElectionCompat(distlock.CompatGoZookeeper))
			return err
		},
		"Election etcd": func() error {
			_, err := recipe.NewElection(s, "sched", distlock.WithElectionCompat(distlock.CompatEtcd))
			return err
		},
	} {
		if err := f(); !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("%s: %v, want ErrUnsupported", what, err)
		}
	}
	if _, err := recipe.NewMutex(s, "jobs", distlock.WithCompat("nope")); !errors.Is(err, distlock.ErrInvalidOption) {
		t.Errorf("unknown mode: %v, want ErrInvalidOption", err)
	}
}

// TestCompatCreateAdopted: a Lock in a mode whose create's answer is lost
// with the connection finds its node again by the GUID in its name, and
// adopts it (one entry, no orphan).
func TestCompatCreateAdopted(t *testing.T) {
	ens := integration.NewZooKeeper(t)
	admin, events := connect(t, ens)
	drain(events)
	for _, c := range []struct {
		mode   distlock.Compat
		marker string
	}{{distlock.CompatCurator, "-lock-"}, {distlock.CompatKazoo, "__lock__"}} {
		t.Run(string(c.mode), func(t *testing.T) {
			prefix := newPrefix()
			dir := prefix + "/adopt"
			mkdirs(t, admin, dir)
			conn, ev := connect(t, ens)
			drain(ev)
			s := newSession(t, conn, recipe.WithPrefix(prefix))
			m, err := recipe.NewMutex(s, "adopt", distlock.WithCompat(c.mode))
			if err != nil {
				t.Fatal(err)
			}
			release, err := ens.HoldReplies(conn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(release)
			res := lockAsync(testCtx(t), m)
			waitAll(t, admin, dir, 1)
			node := ownCompat(t, listing(t, admin, dir), c.marker)
			select {
			case r := <-res:
				t.Fatalf("Lock returned (err %v) while its create's answer was held", r.Err)
			default:
			}
			if err := ens.DropConnection(conn); err != nil {
				t.Fatal(err)
			}
			r := recv(t, res, "the Lock whose create's answer was lost")
			if r.Err != nil {
				t.Fatalf("Lock after a connection loss during its create: %v", r.Err)
			}
			if kids := listing(t, admin, dir); len(kids) != 1 || kids[0] != node {
				t.Fatalf("children %v, want the adopted %s only", kids, node)
			}
			_, st, err := admin.Exists(dir + "/" + node)
			if err != nil || st.EphemeralOwner != s.ID() || r.Lease.Token().Seq != st.Czxid {
				t.Fatalf("adopted node: %+v, %v; token %v", st, err, r.Lease.Token())
			}
			mustUnlock(t, r.Lease)
			noEphemerals(t, admin, dir)
		})
	}
}
