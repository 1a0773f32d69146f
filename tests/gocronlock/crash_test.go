package gocronlock_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/gocronlock"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
	"github.com/go-co-op/gocron/v2"
	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// crashEnv, set in a child's environment to its crashChild configuration
// (JSON), makes the test binary a scheduler instance instead of running
// the tests.
const crashEnv = "GOCRONLOCK_CRASH_CHILD"

func TestMain(m *testing.M) {
	if c := os.Getenv(crashEnv); c != "" {
		os.Exit(crashChild(c))
	}
	os.Exit(m.Run())
}

// childConfig is what a crash test's scheduler process is told.
type childConfig struct {
	Store  string        // "etcd" or "zk"
	Addrs  []string      // the store's endpoints
	Inst   int           // the instance's number
	Skew   time.Duration // added to the Locker's clock
	Period time.Duration
	TTL    time.Duration // the session's TTL (etcd) or session timeout (ZooKeeper)
	Old    bool          // take one lock per job without waiting (oldLocker), the control
}

// crashChild runs one gocron scheduler with a Locker on its own session
// until it is killed, and reports on stdout, one line each:
//
//	ready INST
//	start INST SLOT CLOCK   (a run's Lock succeeded; CLOCK is the Locker's clock, Unix ns)
//	end INST SLOT CLOCK     (its Unlock, the marker included, succeeded)
//	skip INST SLOT REASON   (Lock failed)
func crashChild(cfg string) int {
	var c childConfig
	if err := json.Unmarshal([]byte(cfg), &c); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx := context.Background()
	holder := fmt.Sprintf("instance-%d pid %d", c.Inst, os.Getpid())
	var b gocronlock.Backend
	switch c.Store {
	case "etcd":
		cli, err := clientv3.New(clientv3.Config{Endpoints: c.Addrs, DialTimeout: 10 * time.Second})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		s, err := etcdlock.NewSession(ctx, cli, etcdlock.WithTTL(c.TTL), recipe.WithHolder(holder))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		b = gocronlock.Etcd(s)
	default:
		conn, _, err := zk.Connect(c.Addrs, c.TTL, zk.WithLogInfo(false), zk.WithLogger(nopLogger{}))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		s, err := zklock.NewSession(ctx, conn, recipe.WithHolder(holder))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		b = gocronlock.ZooKeeper(s)
	}
	now := func() time.Time { return time.Now().Add(c.Skew) }
	l, err := gocronlock.NewLocker(b, c.Period, gocronlock.WithClock(now))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var locker gocron.Locker = l
	if c.Old {
		locker = oldLocker{l: l, b: b, now: now}
	}
	s, err := gocron.NewScheduler(gocron.WithDistributedLocker(logged{l: locker, slot: l.Slot, now: now, inst: c.Inst}))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	spec := fmt.Sprintf("*/%d * * * * *", int(c.Period/time.Second))
	if _, err := s.NewJob(gocron.CronJob(spec, true), gocron.NewTask(func() {
		// The job's work: 400 to 800 ms.
		time.Sleep(400*time.Millisecond + rand.N(400*time.Millisecond))
	}), gocron.WithName("report")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	s.Start()
	fmt.Printf("ready %d\n", c.Inst)
	select {} // until killed
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

// logged reports an instance's Locks and Unlocks on stdout (see
// crashChild); the slot is read from the Locker's clock as the Locker
// reads it.
type logged struct {
	l    gocron.Locker
	slot func(time.Time) string
	now  func() time.Time
	inst int
}

func (g logged) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	slot := g.slot(g.now())
	lk, err := g.l.Lock(ctx, key)
	if err != nil {
		why := "error"
		switch {
		case errors.Is(err, distlock.ErrLocked):
			why = "locked"
		case errors.Is(err, distlock.ErrSlotDone):
			why = "done"
		}
		fmt.Printf("skip %d %s %s\n", g.inst, slot, why)
		return nil, err
	}
	fmt.Printf("start %d %s %d\n", g.inst, slot, g.now().UnixNano())
	return loggedLock{g: g, slot: slot, lk: lk}, nil
}

type loggedLock struct {
	g    logged
	slot string
	lk   gocron.Lock
}

func (l loggedLock) Unlock(ctx context.Context) error {
	err := l.lk.Unlock(ctx)
	if err == nil {
		fmt.Printf("end %d %s %d\n", l.g.inst, l.slot, l.g.now().UnixNano())
	}
	return err
}

// oldLocker is the control: one lock per job, taken without waiting, as
// gocronlock's Locker did before it took a lock per slot: nobody retries
// a slot whose holder died, and its entry blocks the next slots until its
// session expires.
type oldLocker struct {
	l   *gocronlock.Locker
	b   gocronlock.Backend
	now func() time.Time
}

func (o oldLocker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	name, slot := o.l.LockName(key), o.l.Slot(o.now())
	mu, err := o.b.Mutex(name)
	if err != nil {
		return nil, err
	}
	marks, err := o.b.Marks(name)
	if err != nil {
		return nil, err
	}
	lease, err := mu.TryLock(ctx)
	if err != nil {
		return nil, err
	}
	if m, err := marks.Marker(ctx, slot); err != nil || m != nil {
		_ = lease.Unlock(ctx)
		return nil, errors.Join(err, distlock.ErrSlotDone)
	}
	return oldLock{lease: lease, marks: marks, slot: slot}, nil
}

type oldLock struct {
	lease *distlock.Lease
	marks distlock.SlotMarks
	slot  string
}

func (o oldLock) Unlock(ctx context.Context) error {
	// The job lock's own lease: the marker goes through its fence.
	err := o.marks.Mark(ctx, o.lease, distlock.SlotMarker{Slot: o.slot, Token: o.lease.Token().String(), Mode: distlock.AtLeastOnce, Marked: time.Now().UTC()})
	return errors.Join(err, o.lease.Unlock(ctx))
}

// crashRun is one run of the job a child reported.
type crashRun struct {
	inst   int
	gen    int       // which process of the instance (0, then 1 after its first kill, ...)
	start  time.Time // by the instance's (skewed) clock
	seen   time.Time // when the parent read its start line
	ended  bool
	killed bool
}

// crashOutcome is what a crash run saw.
type crashOutcome struct {
	runs      map[string][]*crashRun // by slot
	killed    map[string]time.Time   // slots whose runner was killed: when
	first     string                 // the first slot that started with all instances up
	last      string                 // the last slot checked
	skips     map[string][]string    // slot: "inst: why"
	childLogs []string
}

// crashScheduler starts 3 scheduler processes on the store at addrs and
// SIGKILLs the runner of a slot at a random point of its run, kills
// times (every other slot, when all three are up), restarting each killed
// instance at once; it returns the runs of every slot from the first one
// with all instances up to the one after the last kill.
func crashScheduler(t *testing.T, store string, addrs []string, period, ttl time.Duration, kills int, old bool) crashOutcome {
	type line struct {
		inst, gen int
		f         []string
	}
	lines := make(chan line, 1000)
	type proc struct {
		cmd    *exec.Cmd
		gen    int
		stderr *strings.Builder
	}
	skews := []time.Duration{-300 * time.Millisecond, 0, 300 * time.Millisecond}
	procs := make([]*proc, len(skews))
	var logsMu sync.Mutex
	var wg sync.WaitGroup
	start := func(inst, gen int) {
		cfg, err := json.Marshal(childConfig{Store: store, Addrs: addrs, Inst: inst, Skew: skews[inst], Period: period, TTL: ttl, Old: old})
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashEnv+"="+string(cfg))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &lockedWriter{mu: &logsMu, w: &stderr}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs[inst] = &proc{cmd: cmd, gen: gen, stderr: &stderr}
		wg.Go(func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- line{inst, gen, strings.Fields(sc.Text())}
			}
			_ = cmd.Wait()
			lines <- line{inst, gen, []string{"exit"}}
		})
	}
	for i := range skews {
		start(i, 0)
	}
	t.Cleanup(func() {
		for _, p := range procs {
			_ = p.cmd.Process.Kill()
		}
		wg.Wait()
	})

	o := crashOutcome{runs: map[string][]*crashRun{}, killed: map[string]time.Time{}, skips: map[string][]string{}}
	ready := make([]bool, len(skews))
	var lastKill string
	type killing struct {
		inst, gen int
		slot      string
	}
	kill := make(chan killing, 10) // the runner to kill now
	deadline := time.After(time.Duration(2*kills+8)*period + time.Minute)
	parseSlot := func(s string) time.Time {
		at, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatalf("slot %q: %v", s, err)
		}
		return at
	}
	for {
		select {
		case <-deadline:
			t.Fatalf("%d of %d kills, runs %v", len(o.killed), kills, o.runs)
		case k := <-kill:
			if p := procs[k.inst]; p.gen == k.gen {
				if err := p.cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
				o.killed[k.slot] = time.Now()
			}
			continue
		case l := <-lines:
			switch l.f[0] {
			case "exit":
				if p := procs[l.inst]; p.gen == l.gen {
					logsMu.Lock()
					o.childLogs = append(o.childLogs, fmt.Sprintf("instance %d process %d: %s", l.inst, l.gen, p.stderr.String()))
					logsMu.Unlock()
					ready[l.inst] = false
					start(l.inst, l.gen+1)
				}
			case "ready":
				ready[l.inst] = true
			case "skip":
				o.skips[l.f[2]] = append(o.skips[l.f[2]], fmt.Sprintf("%d: %s", l.inst, l.f[3]))
			case "start":
				slot := l.f[2]
				ns, _ := strconv.ParseInt(l.f[3], 10, 64)
				r := &crashRun{inst: l.inst, gen: l.gen, start: time.Unix(0, ns), seen: time.Now()}
				if o.first == "" && !slices.Contains(ready, false) {
					o.first = slot
				}
				o.runs[slot] = append(o.runs[slot], r)
				prevKilled := lastKill != "" && parseSlot(slot).Sub(parseSlot(lastKill)) <= period
				if o.first != "" && len(o.killed) < kills && len(o.runs[slot]) == 1 && !prevKilled && !slices.Contains(ready, false) {
					// At a random point of the run (it lasts 400 to 800 ms).
					lastKill, o.killed[slot] = slot, time.Now()
					r.killed = true
					k := killing{l.inst, l.gen, slot}
					time.AfterFunc(50*time.Millisecond+rand.N(300*time.Millisecond), func() { kill <- k })
				}
			case "end":
				for _, r := range o.runs[l.f[2]] {
					if r.inst == l.inst && r.gen == l.gen {
						r.ended = true
					}
				}
				if len(o.killed) == kills && parseSlot(l.f[2]).Sub(parseSlot(lastKill)) >= 2*period {
					o.last = parseSlot(lastKill).Add(period).Format(time.RFC3339)
					return o
				}
			}
		}
	}
}

// lockedWriter is a writer shared by a child's stderr copier and the
// reader of its logs.
type lockedWriter struct {
	mu *sync.Mutex
	w  *strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// crashStores are the stores' clusters and the numbers the crash tests
// use on them. etcd's shortest lease TTL is 2 s (etcdlock.MinTTL), which
// a 2 s period cannot exceed: the etcd runs use 4 s slots. ZooKeeper's
// harness servers tick every 200 ms and accept session timeouts from
// 400 ms: 800 ms below a 2 s period.
func crashStore(t *testing.T, store string) (addrs []string, period, ttl time.Duration) {
	if store == "etcd" {
		return integration.NewEtcd(t).Endpoints(), 4 * time.Second, 2 * time.Second
	}
	return integration.NewZooKeeper(t).Addrs(), 2 * time.Second, 800 * time.Millisecond
}

// TestLockerCrash: three gocron schedulers, each a process of its own
// with a Locker on a session of its own, clocks -300 ms, 0 and +300 ms
// apart, run a 400-800 ms job every period; the test SIGKILLs the
// instance running a slot at a random point of its run, ten times (every
// other slot), restarting it at once. Every slot from the first to the
// one after the last kill ran exactly once, or — the killed ones — once
// more on another instance, which started it before the slot's end by
// its clock (about a TTL after the kill) and finished it; no slot was
// skipped. About 90 s on etcd (4 s slots), 45 s on ZooKeeper (2 s).
func TestLockerCrash(t *testing.T) {
	for _, store := range []string{"etcd", "zk"} {
		t.Run(store, func(t *testing.T) {
			addrs, period, ttl := crashStore(t, store)
			o := crashScheduler(t, store, addrs, period, ttl, 10, false)
			var delays []time.Duration
			first, last := mustParse(t, o.first), mustParse(t, o.last)
			for at := first; !at.After(last); at = at.Add(period) {
				slot := at.Format(time.RFC3339)
				runs := o.runs[slot]
				killedAt, killed := o.killed[slot]
				describe := func() string {
					var b strings.Builder
					for _, r := range runs {
						fmt.Fprintf(&b, "[instance %d process %d started %s ended %v killed %v] ", r.inst, r.gen, r.start.Format("15:04:05.000"), r.ended, r.killed)
					}
					return fmt.Sprintf("%s skips %v", b.String(), o.skips[slot])
				}
				switch {
				case !killed && (len(runs) != 1 || !runs[0].ended):
					t.Errorf("slot %s: want one finished run: %s", slot, describe())
				case killed && len(runs) != 2:
					t.Errorf("slot %s, its runner killed: want it run once more: %s", slot, describe())
				case killed:
					again := runs[1]
					switch {
					case again.inst == runs[0].inst:
						t.Errorf("slot %s rerun on the killed instance: %s", slot, describe())
					case !again.ended:
						t.Errorf("slot %s: its rerun did not finish: %s", slot, describe())
					case !again.start.Before(at.Add(period)):
						t.Errorf("slot %s rerun after the slot's end: %s", slot, describe())
					}
					delays = append(delays, again.seen.Sub(killedAt))
				}
			}
			if t.Failed() {
				t.Logf("children's logs: %s", strings.Join(o.childLogs, "\n"))
			}
			slices.Sort(delays)
			t.Logf("%s: %d slots %s..%s, period %v, TTL %v; %d runners killed, each slot rerun %v..%v after the kill",
				store, int(last.Sub(first)/period)+1, o.first, o.last, period, ttl, len(o.killed), delays[0].Round(10*time.Millisecond), delays[len(delays)-1].Round(10*time.Millisecond))
		})
	}
}

// TestOldLockerCrashLosesSlots is TestLockerCrash's control: with one lock
// per job taken without waiting (oldLocker), a killed runner's slot is
// never run again, as nobody tries later in the slot. A check that never
// fails proves nothing.
func TestOldLockerCrashLosesSlots(t *testing.T) {
	for _, store := range []string{"etcd", "zk"} {
		t.Run(store, func(t *testing.T) {
			addrs, period, ttl := crashStore(t, store)
			o := crashScheduler(t, store, addrs, period, ttl, 2, true)
			lost := 0
			for slot := range o.killed {
				if len(o.runs[slot]) == 1 {
					lost++
				}
			}
			if lost == 0 {
				t.Fatalf("every killed slot was run again with one lock per job: the crash test proves nothing (%v)", o.runs)
			}
			t.Logf("%s: with one lock per job, %d of %d killed slots never ran again; skips %v", store, lost, len(o.killed), o.skips)
		})
	}
}

func mustParse(t *testing.T, s string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return at
}
