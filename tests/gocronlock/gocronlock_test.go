package gocronlock_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/gocronlock"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
	"github.com/go-co-op/gocron/v2"
)

// instance is one scheduler's view of the store: a Backend on a session
// of its own, that session's election, and a way to end the session on
// the server (as an expiry would).
type instance struct {
	b        gocronlock.Backend
	election func(name string) distlock.Elector
	end      func(t *testing.T)
	// holder is the session's holder value ("instance-N", N counting the
	// instances of the store from 0): what the markers it writes name.
	holder string
	// markers counts the done-markers lock name has in the store
	// (etcdlock.SlotMarkers, zklock.SlotMarkers: what `distlock status`
	// shows).
	markers func(ctx context.Context, name string) (int, error)
}

// store starts a cluster of kind ("etcd" or "zk") and returns a maker of
// instances on it.
func store(t *testing.T, kind string) func(t *testing.T) instance {
	ctx := context.Background()
	var made atomic.Int32
	holder := func() string { return fmt.Sprintf("instance-%d", made.Add(1)-1) }
	if kind == "etcd" {
		c := integration.NewEtcd(t)
		cli, err := c.Client()
		if err != nil {
			t.Fatal(err)
		}
		return func(t *testing.T) instance {
			h := holder()
			s, err := etcdlock.NewSession(ctx, cli, recipe.WithHolder(h))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close(context.Background()) })
			return instance{
				holder: h,
				markers: func(ctx context.Context, name string) (int, error) {
					m, err := recipe.NewMarks(s, name)
					if err != nil {
						return 0, err
					}
					n, _, err := m.Markers(ctx, 0)
					return n, err
				},
				b: untimed(gocronlock.Etcd(s)),
				election: func(name string) distlock.Elector {
					e, err := recipe.NewElection(s, name)
					if err != nil {
						t.Fatal(err)
					}
					return e
				},
				end: func(t *testing.T) {
					if _, err := cli.Revoke(ctx, s.ID()); err != nil {
						t.Fatal(err)
					}
				},
			}
		}
	}
	ens := integration.NewZooKeeper(t)
	return func(t *testing.T) instance {
		conn, _, err := ens.Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(conn.Close)
		h := holder()
		s, err := zklock.NewSession(ctx, conn, recipe.WithHolder(h))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close(context.Background()) })
		return instance{
			holder: h,
			markers: func(ctx context.Context, name string) (int, error) {
				m, err := recipe.NewMarks(s, name)
				if err != nil {
					return 0, err
				}
				n, _, err := m.Markers(ctx, 0)
				return n, err
			},
			b: untimed(gocronlock.ZooKeeper(s)),
			election: func(name string) distlock.Elector {
				e, err := recipe.NewElection(s, name)
				if err != nil {
					t.Fatal(err)
				}
				return e
			},
			end: func(t *testing.T) {
				if err := ens.ExpireSession(ctx, conn); err != nil {
					t.Fatal(err)
				}
			},
		}
	}
}

// untimed is b with its TTL unknown, so that NewLocker takes any period
// in AtLeastOnce mode: these tests end sessions on the server (end)
// rather than wait for a killed process's TTL, and run every-second jobs
// on sessions with etcd's minimum TTL of 2 s. TestLockerCrash tests the
// TTL's bound with the Backends as Etcd and ZooKeeper make them.
func untimed(b gocronlock.Backend) gocronlock.Backend {
	b.TTL = 0
	return b
}

// late is a Locker that asks splay after its scheduler fired, plus a
// random part of jitter drawn anew each time: an instance that starts its
// runs a little late, and not always by as much.
type late struct {
	l      gocron.Locker
	splay  time.Duration
	jitter time.Duration
}

func (l late) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	// The lateness under test is time itself, not an event to wait on;
	// the scheduler's ctx still ends it.
	d := l.splay
	if l.jitter > 0 {
		d += rand.N(l.jitter)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	return l.l.Lock(ctx, key)
}

// run is one run of the job.
type run struct {
	inst int
	slot string
}

// runs collects the job's runs.
type runs struct {
	mu  sync.Mutex
	all []run
	ch  chan run
}

func newRuns() *runs { return &runs{ch: make(chan run, 1000)} }

func (r *runs) add(x run) {
	r.mu.Lock()
	r.all = append(r.all, x)
	r.mu.Unlock()
	r.ch <- x
}

func (r *runs) list() []run {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]run(nil), r.all...)
}

// scheduler starts a gocron scheduler that runs job "report" on cron spec
// (with seconds) under locker, recording each run with the slot its clock
// names; fn, if not nil, is the job's body.
func scheduler(t *testing.T, inst int, spec string, locker gocron.Locker, slot func() string, rs *runs, fn func()) gocron.Scheduler {
	s, err := gocron.NewScheduler(gocron.WithDistributedLocker(locker))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.NewJob(gocron.CronJob(spec, true), gocron.NewTask(func() {
		rs.add(run{inst, slot()})
		if fn != nil {
			fn()
		}
	}), gocron.WithName("report"))
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { s.Shutdown() })
	return s
}

// claims is a Locker that notes, for one instance, the slot each Lock
// claims — the Locker's clock read as it asks, as the Locker itself reads
// it — and how the Lock ended: so that a run is counted in the slot its
// lock was taken for (not in one read later, in the job), and a slot
// that nobody ran can say why.
type claims struct {
	inst  int
	l     *gocronlock.Locker
	now   func() time.Time
	tries *tries

	mu   sync.Mutex
	slot string // the slot of the last Lock that succeeded: the run under way
}

func (c *claims) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	slot := c.l.Slot(c.now())
	lk, err := c.l.Lock(ctx, key)
	c.tries.add(slot, c.inst, err)
	if err == nil {
		c.mu.Lock()
		c.slot = slot
		c.mu.Unlock()
	}
	return lk, err
}

// claimed is the slot of the run under way.
func (c *claims) claimed() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.slot
}

// tries are every instance's Locks, by slot.
type tries struct {
	mu sync.Mutex
	by map[string][]string // slot: "instance 1: lock held", ...
	n  map[string]int      // outcome: how many
}

func newTries() *tries { return &tries{by: map[string][]string{}, n: map[string]int{}} }

func (tr *tries) add(slot string, inst int, err error) {
	what := "ran"
	switch {
	case err == nil:
	case errors.Is(err, distlock.ErrLocked):
		what = "lock held"
	case errors.Is(err, distlock.ErrSlotDone):
		what = "slot done"
	default:
		what = err.Error()
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.by[slot] = append(tr.by[slot], fmt.Sprintf("instance %d: %s", inst, what))
	tr.n[what]++
}

func (tr *tries) of(slot string) []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]string(nil), tr.by[slot]...)
}

func (tr *tries) counts() map[string]int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return maps.Clone(tr.n)
}

// TestLockerOncePerSlot: three schedulers, each on a session
// (and client or connection) of its own, run the same every-second job for
// 20 s of wall time, with clocks 150 ms apart and firing 0, 40 and 80 ms
// late plus a random 0–200 ms each time, so that the instance that runs a
// slot changes from slot to slot (a fast job: its lock is free again before the late ones
// try; each fires within half a period of the scheduled second, which the
// Locker needs). Each slot from the first that ran to the last ran exactly
// once across them — none twice, none skipped by all three — on the
// instance its marker names; the runs are as many as the slots' markers,
// and as the markers the store holds in all (SlotMarkers); and there are
// at least 17 of them. The stores run side by side (t.Parallel), so the
// test takes about 20 s plus a cluster's start.
func TestLockerOncePerSlot(t *testing.T) {
	const (
		duration = 20 * time.Second
		minRuns  = 17 // of the ~20 slots the schedulers fire in duration
	)
	for _, kind := range []string{"etcd", "zk"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			newInst := store(t, kind)
			skews := []time.Duration{-150 * time.Millisecond, 0, 150 * time.Millisecond}
			// Each fires 0, 40 or 80 ms late, and up to 200 ms more drawn
			// anew each second, so that each instance wins some slots
			// (at most 280 ms late + 150 ms skew: within half a period).
			splays := []time.Duration{0, 40 * time.Millisecond, 80 * time.Millisecond}
			rs, tr := newRuns(), newTries()
			var (
				lockers []*gocronlock.Locker
				insts   []instance
				scheds  []gocron.Scheduler
			)
			for i := range 3 {
				in := newInst(t)
				skew := skews[i]
				now := func() time.Time { return time.Now().Add(skew) }
				l, err := gocronlock.NewLocker(in.b, time.Second, gocronlock.WithClock(now))
				if err != nil {
					t.Fatal(err)
				}
				c := &claims{inst: i, l: l, now: now, tries: tr}
				lockers, insts = append(lockers, l), append(insts, in)
				scheds = append(scheds, scheduler(t, i, "* * * * * *", late{c, splays[i], 200 * time.Millisecond}, c.claimed, rs, nil))
			}
			// The 20 s are the duration under test: wall time, not an
			// event to wait on.
			timer := time.NewTimer(duration)
			<-timer.C
			// Shutdown waits for the runs under way (their Unlock marks).
			// All three at once, so that no instance runs slots after
			// another has stopped.
			errs := make([]error, len(scheds))
			var wg sync.WaitGroup
			for i, s := range scheds {
				wg.Go(func() { errs[i] = s.Shutdown() })
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}

			all := rs.list()
			if len(all) == 0 {
				t.Fatalf("no run in %v", duration)
			}
			by := map[string][]int{} // slot: the instances that ran it
			perInst := make([]int, len(insts))
			var first, last string
			for _, r := range all {
				by[r.slot] = append(by[r.slot], r.inst)
				perInst[r.inst]++
				if first == "" || r.slot < first {
					first = r.slot
				}
				if r.slot > last {
					last = r.slot
				}
			}
			// No edge of the range is excluded: a slot counts once an
			// instance ran it, and each fires every slot from its Start
			// to its Shutdown (all three at once), so the first and last
			// slots that ran bound an unbroken range however the starts
			// and the stop fall in their seconds.
			from, err := time.Parse(time.RFC3339, first)
			if err != nil {
				t.Fatal(err)
			}
			to, err := time.Parse(time.RFC3339, last)
			if err != nil {
				t.Fatal(err)
			}
			name := lockers[0].LockName("report")
			marks, err := insts[0].b.Marks(name)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			slots, marked := 0, 0
			for at := from; !at.After(to); at = at.Add(time.Second) {
				slot := lockers[0].Slot(at)
				slots++
				who := by[slot]
				m, err := marks.Marker(ctx, slot)
				if err != nil {
					t.Fatal(err)
				}
				if m != nil {
					marked++
				}
				switch {
				case len(who) == 0:
					t.Errorf("slot %s (between %s and %s) ran on no instance (%s; marker %v)", slot, first, last, strings.Join(tr.of(slot), ", "), m)
				case len(who) > 1:
					t.Errorf("slot %s ran %d times (instances %v; %s)", slot, len(who), who, strings.Join(tr.of(slot), ", "))
				case m == nil:
					t.Errorf("slot %s ran on instance %d but has no marker", slot, who[0])
				case m.Holder != insts[who[0]].holder:
					t.Errorf("slot %s ran on instance %d but its marker is %v", slot, who[0], m)
				}
			}
			if marked != len(all) {
				t.Errorf("%d runs, %d markers in their slots %s..%s", len(all), marked, first, last)
			}
			total, err := insts[0].markers(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if total != len(all) {
				t.Errorf("%d runs, %d markers of lock %q in the store", len(all), total, name)
			}
			if len(all) < minRuns {
				t.Errorf("%d runs in %v, want at least %d", len(all), duration, minRuns)
			}
			winners := 0
			for _, n := range perInst {
				if n > 0 {
					winners++
				}
			}
			if winners < 2 {
				t.Errorf("one instance ran every slot (%v): no slot was taken by another", perInst)
			}
			t.Logf("%d runs in %d slots %s..%s (per instance %v), %d markers in all; Locks: %v", len(all), slots, first, last, perInst, total, tr.counts())
		})
	}
}

// TestLockerHolderDies: the instance that runs a slot's job loses its
// session mid-run; the late instance, trying afterwards in the same slot,
// runs it again in AtLeastOnce mode (nothing was marked) and not in
// AtMostOnce mode (marked before the run).
func TestLockerHolderDies(t *testing.T) {
	for _, kind := range []string{"etcd", "zk"} {
		for _, mode := range []distlock.OnceMode{distlock.AtLeastOnce, distlock.AtMostOnce} {
			t.Run(kind+"/"+string(mode), func(t *testing.T) {
				newInst := store(t, kind)
				a, b := newInst(t), newInst(t)
				// Slots of 2 s, so that B can try 800 ms late and still
				// be in the slot (within half a period).
				la, err := gocronlock.NewLocker(a.b, 2*time.Second, gocronlock.WithMode(mode))
				if err != nil {
					t.Fatal(err)
				}
				lb, err := gocronlock.NewLocker(b.b, 2*time.Second, gocronlock.WithMode(mode))
				if err != nil {
					t.Fatal(err)
				}
				rs := newRuns()
				started, release := make(chan string, 100), make(chan struct{})
				var once sync.Once
				scheduler(t, 0, "*/2 * * * * *", la, func() string { return la.Slot(time.Now()) }, rs, func() {
					once.Do(func() {
						started <- "a"
						<-release // the first run blocks until its session is gone
					})
				})
				// B tries 800 ms after each firing; its slot is the firing's.
				const splay = 800 * time.Millisecond
				scheduler(t, 1, "*/2 * * * * *", late{lb, splay, 0}, func() string { return lb.Slot(time.Now()) }, rs, nil)
				var first run
				for first.slot == "" {
					select {
					case r := <-rs.ch:
						if r.inst == 0 {
							first = r
						}
					case <-time.After(30 * time.Second):
						t.Fatal("instance a never ran")
					}
				}
				<-started
				a.end(t)
				// B's runs until two slots after A's.
				deadline := time.After(10 * time.Second)
				retried := false
			wait:
				for {
					select {
					case r := <-rs.ch:
						if r.inst == 1 && r.slot == first.slot {
							retried = true
						}
						if r.inst == 1 && r.slot > first.slot {
							break wait
						}
					case <-deadline:
						break wait
					}
				}
				close(release)
				if want := mode == distlock.AtLeastOnce; retried != want {
					t.Fatalf("slot %s run again by the late instance after the holder died: %v, want %v (%s)", first.slot, retried, want, mode)
				}
			})
		}
	}
}

// TestElector: three schedulers with Electors on three sessions run a job
// every 100 ms; only the leader's runs, the others' IsLeader names the
// leader, and when the leader's session ends another takes over.
func TestElector(t *testing.T) {
	for _, kind := range []string{"etcd", "zk"} {
		t.Run(kind, func(t *testing.T) {
			newInst := store(t, kind)
			rs := newRuns()
			var insts []instance
			var electors []*gocronlock.Elector
			for i := range 3 {
				in := newInst(t)
				e, err := gocronlock.NewElector(context.Background(), in.election("jobs"), fmt.Sprintf("instance-%d", i))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { e.Close(context.Background()) })
				insts, electors = append(insts, in), append(electors, e)
				s, err := gocron.NewScheduler(gocron.WithDistributedElector(e))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := s.NewJob(gocron.DurationJob(100*time.Millisecond), gocron.NewTask(func() { rs.add(run{inst: i}) })); err != nil {
					t.Fatal(err)
				}
				s.Start()
				t.Cleanup(func() { s.Shutdown() })
			}
			next := func(what string) run {
				t.Helper()
				select {
				case r := <-rs.ch:
					return r
				case <-time.After(30 * time.Second):
					t.Fatalf("no run: %s", what)
					panic("unreachable")
				}
			}
			leader := next("first run").inst
			for range 5 {
				if r := next("leader's runs"); r.inst != leader {
					t.Fatalf("instance %d ran while %d leads", r.inst, leader)
				}
			}
			for i, e := range electors {
				err := e.IsLeader(context.Background())
				switch {
				case i == leader && err != nil:
					t.Fatalf("the leader's IsLeader: %v", err)
				case i != leader && (!errors.Is(err, distlock.ErrNotLeader) || !strings.Contains(err.Error(), fmt.Sprintf("instance-%d", leader))):
					t.Fatalf("instance %d's IsLeader: %v, want ErrNotLeader naming instance-%d", i, err, leader)
				}
			}
			insts[leader].end(t)
			for {
				r := next("a run after the leader's session ended")
				if r.inst != leader {
					t.Logf("instance %d took over from %d", r.inst, leader)
					break
				}
			}
		})
	}
}

// plain is the control: a Locker that only takes the job's lock, without
// waiting, as gocron's other lockers do.
type plain struct{ b gocronlock.Backend }

func (p plain) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	m, err := p.b.Mutex("plain/" + strings.ReplaceAll(key, ".", "_"))
	if err != nil {
		return nil, err
	}
	l, err := m.TryLock(ctx)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// TestPlainLockRunsSlotsTwice is TestLockerOncePerSlot's control: with a
// lock alone, the late instances run most slots again once the fast job's
// lock is free (go-co-op/gocron#841). A check that never fails proves
// nothing.
func TestPlainLockRunsSlotsTwice(t *testing.T) {
	newInst := store(t, "etcd")
	rs := newRuns()
	var scheds []gocron.Scheduler
	splays := []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond}
	for i := range 3 {
		in := newInst(t)
		l, err := gocronlock.NewLocker(in.b, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		scheds = append(scheds, scheduler(t, i, "* * * * * *", late{plain{in.b}, splays[i], 0}, func() string { return l.Slot(time.Now()) }, rs, nil))
	}
	for n := 0; n < 8; n++ {
		select {
		case <-rs.ch:
		case <-time.After(30 * time.Second):
			t.Fatalf("only %d runs in 30 s", n)
		}
	}
	for _, s := range scheds {
		s.Shutdown()
	}
	by := map[string]int{}
	twice := 0
	for _, r := range rs.list() {
		if by[r.slot]++; by[r.slot] == 2 {
			twice++
		}
	}
	if twice == 0 {
		t.Fatalf("no slot ran twice with a lock alone in %d slots: the once-per-slot test proves nothing", len(by))
	}
	t.Logf("with a lock alone, %d of %d slots ran more than once", twice, len(by))
}

// TestLockerPrunes: marking a slot deletes the markers older than the
// retention (at least 100 periods), on both stores.
func TestLockerPrunes(t *testing.T) {
	for _, kind := range []string{"etcd", "zk"} {
		t.Run(kind, func(t *testing.T) {
			in := store(t, kind)(t)
			var mu sync.Mutex
			now := time.Now().Truncate(time.Second)
			clock := now
			l, err := gocronlock.NewLocker(in.b, time.Second, gocronlock.WithRetention(time.Second),
				gocronlock.WithClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			runAt := func(at time.Time) {
				t.Helper()
				mu.Lock()
				clock = at
				mu.Unlock()
				lk, err := l.Lock(ctx, "pruned")
				if err != nil {
					t.Fatal(err)
				}
				if err := lk.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			runAt(now.Add(-300 * time.Second))
			runAt(now.Add(-250 * time.Second)) // within a minute of the last prune: none
			runAt(now.Add(-90 * time.Second))  // prunes before now-190s: both above
			marks, err := in.b.Marks(l.LockName("pruned"))
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				at   time.Duration
				kept bool
			}{{-300, false}, {-250, false}, {-90, true}} {
				m, err := marks.Marker(ctx, l.Slot(now.Add(c.at*time.Second)))
				if err != nil {
					t.Fatal(err)
				}
				if (m != nil) != c.kept {
					t.Errorf("marker of the slot at %ds: kept %v, want %v", c.at, m != nil, c.kept)
				}
			}
		})
	}
}
