package chaos

// The distlock-run workload: the holders and waiters are the `distlock
// run` command itself, real processes, and the fault is the one a process
// cannot answer: SIGKILL (kill -9, the OOM killer) of a distlock at a
// random moment, holding or waiting. A killed holder runs no code; its
// lock goes only when its lease or session expires, after the TTL, and
// the next distlock in line then starts its COMMAND. The property checked
// is the one `distlock run` promises its users: a COMMAND (and whatever
// it forked) never outlives its distlock, so no two COMMANDs ever run at
// once, read from the COMMANDs' own output.
//
// It does not fit Workload (in-process workers on the runner's clients,
// a history of library calls, the server nemeses), so it has a runner of
// its own, RunCommandKill, with the same Check verdicts.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/distlock/distlock/internal/proc"
)

// RunCmdConfig describes one run of the distlock-run workload.
type RunCmdConfig struct {
	// Store is the running cluster (not closed by the run).
	Store Store
	// Binary is the distlock binary (BuildDistlock makes one).
	Binary string
	// Dir gets the COMMANDs' output file (the run's history).
	Dir string
	// Workers is how many distlock runs are alive at once, one holding
	// and the others waiting in line (default 3).
	Workers int
	// Duration is how long distlocks are started and killed (default
	// 10s); then the last ones finish on their own.
	Duration time.Duration
	// MinKilledHolding makes the run go on past Duration (up to four
	// times as long) until that many distlocks were killed while
	// holding (default 1): on a slow machine fewer fit in Duration.
	MinKilledHolding int
	// TTL is distlock's --ttl (default 2s, etcd's minimum): how long a
	// killed holder blocks the lock.
	TTL time.Duration
	// KillMin and KillMax bound the pause between two kills (default
	// 200ms and 1.5s).
	KillMin, KillMax time.Duration
	// Seed drives the kills (0: one is drawn).
	Seed uint64
	// Logger logs the run (silent if nil).
	Logger *slog.Logger
}

// RunCmdResult is what a run of the distlock-run workload saw.
type RunCmdResult struct {
	Store string `json:"store"`
	Seed  uint64 `json:"seed"`
	// Started counts the distlock runs started; KilledHolding those
	// SIGKILLed while their COMMAND ran, KilledWaiting those SIGKILLed
	// before; Completed those whose COMMAND ended on its own (exit 0).
	Started, KilledHolding, KilledWaiting, Completed int
	// Commands counts the COMMANDs that started (intervals checked).
	Commands int
	// History is the COMMANDs' output file: one line per event, in the
	// order they were appended (one file, O_APPEND: one clock).
	History string
	Checks  []Check
}

// OK reports whether every check passed.
func (r *RunCmdResult) OK() bool {
	for _, c := range r.Checks {
		if !c.OK {
			return false
		}
	}
	return true
}

// BuildDistlock builds the distlock command into dir (go build, with
// -tags noembedetcd as in production) and returns its path. It builds in
// the command's module (cmd/ of the checkout this file is in), which this
// module does not require.
func BuildDistlock(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "distlock")
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "noembedetcd", "-o", bin, "./distlock")
	_, file, _, _ := runtime.Caller(0)
	cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..", "cmd")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("chaos: go build distlock: %v\n%s", err, out)
	}
	return bin, nil
}

// runCmdScript is COMMAND: it appends "start ID" to the history, forks a
// grandchild into its process group, and both append "tick ID" every
// 20 ms; after $2 ticks it stops the grandchild, appends "end ID" and
// exits 0. ID ($3) numbers the distlock runs (pids may be reused in a
// long run). On stdout it says "pgid PGID" (its process group, the
// guard's) for the leftover check.
const runCmdScript = `out=$1 n=$2 id=$3
echo "start $id" >> "$out"
echo "pgid $(cut -d' ' -f5 /proc/$$/stat)"
sh -c 'while :; do echo "tick $1" >> "$0"; sleep 0.02; done' "$out" "$id" &
gc=$!
i=0
while [ "$i" -lt "$n" ]; do echo "tick $id" >> "$out"; sleep 0.02; i=$((i+1)); done
kill "$gc"; wait "$gc"
echo "end $id" >> "$out"`

// runProc is one distlock run.
type runProc struct {
	cmd     *exec.Cmd
	holding chan struct{} // closed once COMMAND said its pgid
	pgid    int           // COMMAND's process group, once holding
	done    chan struct{} // closed once distlock exited
	code    int           // its exit code (128+signal)
	killed  bool          // under RunCommandKill's mu
	// gone: its group was checked gone at the next COMMAND's start.
	gone   bool
	stderr strings.Builder
}

// RunCommandKill runs the distlock-run workload on cfg.Store: cfg.Workers
// distlock runs of one lock at a time (a finished or killed one is
// replaced at once), each COMMAND ticking for 0.2–1 s; every
// KillMin–KillMax one of them is SIGKILLed: a waiter one time in three,
// else the holder, at a random moment of its COMMAND. After Duration the
// last ones finish on their own. Checks:
//
//   - no-overlap: no two COMMANDs' intervals (a COMMAND's first to last
//     line, its grandchild's included) overlap in the history;
//   - no-leftover-at-next-start: when a COMMAND starts, no process of
//     the group of any holder killed before it still runs (zombies, dead
//     but not yet reaped by init, do not count; a killed distlock's group
//     dies at once, the next COMMAND starts a TTL later);
//   - no-leftover: once the run is over every COMMAND's process group is
//     gone, and a COMMAND that ended on its own left nothing (each "end"
//     is its ID's last line);
//   - killed-holders: at least MinKilledHolding distlocks were killed
//     while holding (a run that killed none proves nothing);
//   - no-orphans: the lock's queue is empty once every distlock exited
//     and the killed ones' sessions expired.
func RunCommandKill(ctx context.Context, cfg RunCmdConfig) (*RunCmdResult, error) {
	if cfg.Workers <= 0 {
		cfg.Workers = 3
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 10 * time.Second
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 2 * time.Second
	}
	if cfg.KillMin <= 0 {
		cfg.KillMin = 200 * time.Millisecond
	}
	if cfg.KillMax <= cfg.KillMin {
		cfg.KillMax = max(1500*time.Millisecond, cfg.KillMin+time.Millisecond)
	}
	if cfg.Seed == 0 {
		cfg.Seed = NewSeed()
	}
	cfg.MinKilledHolding = max(cfg.MinKilledHolding, 1)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	store := cfg.Store.Name()
	spec := cfg.Store.Holder("")
	if spec.TLS != nil {
		return nil, errors.New("chaos: the distlock-run workload runs on clusters without TLS")
	}
	conn := "--etcd=" + strings.Join(spec.Endpoints, ",")
	if store == ZooKeeper {
		conn = "--zk=" + strings.Join(spec.Endpoints, ",")
	}
	lock := fmt.Sprintf("chaos/runcmd-%d", cfg.Seed%1000000)
	res := &RunCmdResult{Store: store, Seed: cfg.Seed, History: filepath.Join(cfg.Dir, fmt.Sprintf("%s-runcmd-%d.history", store, cfg.Seed))}
	fmt.Fprintf(os.Stderr, "chaos: %s-runcmd: seed %d (rerun: CHAOS_SEED=%d)\n", store, cfg.Seed, cfg.Seed)
	if err := os.WriteFile(res.History, nil, 0o644); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))

	var (
		mu   sync.Mutex
		live []*runProc // started, not exited, in start order
		all  []*runProc
		wg   sync.WaitGroup
		// ended gets each distlock once it exited, holdingCh once its
		// COMMAND started (at most Workers of each are pending).
		ended     = make(chan *runProc, 64)
		holdingCh = make(chan *runProc, 64)
		// gone checks, under mu, that a killed holder's group is gone
		// when the next COMMAND starts.
		gone = Check{Name: "no-leftover-at-next-start", Subject: "command"}
	)
	start := func() error {
		ticks := 10 + rng.IntN(41) // 0.2–1 s of ticks
		c := exec.Command(cfg.Binary, "run", conn, "--lock", lock, "--ttl", cfg.TTL.String(), "--dial-timeout=30s",
			"--", "sh", "-c", runCmdScript, "sh", res.History, strconv.Itoa(ticks), fmt.Sprintf("r%d", res.Started+1))
		p := &runProc{cmd: c, holding: make(chan struct{}), done: make(chan struct{})}
		c.Stderr = &p.stderr
		out, err := c.StdoutPipe()
		if err != nil {
			return err
		}
		if err := c.Start(); err != nil {
			return fmt.Errorf("chaos: start distlock run: %w", err)
		}
		mu.Lock()
		live = append(live, p)
		all = append(all, p)
		res.Started++
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if s, ok := strings.CutPrefix(sc.Text(), "pgid "); ok {
					mu.Lock()
					p.pgid, _ = strconv.Atoi(strings.TrimSpace(s))
					// This COMMAND has just started: every holder killed
					// before it (a TTL ago at least) must have taken its
					// whole group with it.
					for _, q := range all {
						if q != p && q.killed && q.pgid > 0 && !q.gone {
							q.gone = true
							gone.Checked++
							if pids, err := proc.GroupRunning(q.pgid); err != nil || len(pids) > 0 {
								gone.Violations++
								gone.Detail = fmt.Sprintf("process group %d of a distlock SIGKILLed while holding still ran when the next COMMAND started: pids %v %v", q.pgid, pids, err)
							}
						}
					}
					mu.Unlock()
					close(p.holding)
					holdingCh <- p
				}
			}
			io.Copy(io.Discard, out)
			err := c.Wait()
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				p.code = ee.ExitCode()
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					p.code = 128 + int(ws.Signal())
				}
			} else if err != nil {
				p.code = -1
			}
			close(p.done)
			ended <- p
		}()
		return nil
	}
	isHolding := func(p *runProc) bool {
		select {
		case <-p.holding:
			return true
		default:
			return false
		}
	}
	// kill SIGKILLs p, unless it exited already.
	kill := func(p *runProc) {
		select {
		case <-p.done:
			return
		default:
		}
		mu.Lock()
		was := p.killed
		p.killed = true
		mu.Unlock()
		if was {
			return
		}
		if isHolding(p) {
			res.KilledHolding++
		} else {
			res.KilledWaiting++
		}
		log.Info("chaos: runcmd: SIGKILL", "pid", p.cmd.Process.Pid, "holding", isHolding(p))
		p.cmd.Process.Kill()
	}
	// pick returns a live distlock not killed yet: one holding if
	// holding, else one waiting (nil if none).
	pick := func(holding bool) *runProc {
		mu.Lock()
		defer mu.Unlock()
		var ps []*runProc
		for _, p := range live {
			if !p.killed && isHolding(p) == holding {
				ps = append(ps, p)
			}
		}
		if len(ps) == 0 {
			return nil
		}
		return ps[rng.IntN(len(ps))]
	}
	remove := func(p *runProc) {
		mu.Lock()
		defer mu.Unlock()
		for i, q := range live {
			if q == p {
				live = append(live[:i], live[i+1:]...)
				break
			}
		}
	}

	var runErr error
	for range cfg.Workers {
		if err := start(); err != nil {
			runErr = err
			break
		}
	}
	// Every KillMin-KillMax a kill is due: of a waiter one time in three,
	// else of the holder, 0-600 ms into its COMMAND (a COMMAND runs
	// 0.2-1 s, so some finish first); after a holder's kill the lock is
	// free again only after the TTL, so a holder kill due meanwhile waits
	// for the next holder.
	between := func() time.Duration {
		return cfg.KillMin + time.Duration(rng.Int64N(int64(cfg.KillMax-cfg.KillMin)))
	}
	next := time.NewTimer(between())
	var (
		wantHolder bool
		target     *runProc
		holderKill <-chan time.Time
	)
	aimAt := func(p *runProc) {
		target, holderKill = p, time.After(time.Duration(rng.Int64N(int64(600*time.Millisecond))))
	}
	begin := time.Now()
	more := func() bool {
		d := time.Since(begin)
		return d < cfg.Duration || res.KilledHolding < cfg.MinKilledHolding && d < 4*cfg.Duration
	}
	for runErr == nil && more() && ctx.Err() == nil {
		select {
		case p := <-ended:
			remove(p)
			if err := start(); err != nil {
				runErr = err
			}
		case p := <-holdingCh:
			mu.Lock()
			killed := p.killed
			mu.Unlock()
			if wantHolder && target == nil && !killed {
				aimAt(p)
			}
		case <-next.C:
			if rng.IntN(3) == 0 {
				if p := pick(false); p != nil {
					kill(p)
					next.Reset(between())
					break
				}
			}
			wantHolder = true
			if p := pick(true); p != nil {
				aimAt(p)
			}
		case <-holderKill:
			p := target
			target, holderKill = nil, nil
			select {
			case <-p.done: // finished first: aim at the next holder
				if q := pick(true); q != nil {
					aimAt(q)
				}
			default:
				kill(p)
				wantHolder = false
				next.Reset(between())
			}
		case <-ctx.Done():
		}
	}
	next.Stop()
	// The last ones finish on their own: each waits at most for the
	// killed holders' TTLs and the COMMANDs ahead of it.
	drain := time.NewTimer(time.Duration(cfg.Workers+2) * (cfg.TTL + 3*time.Second))
	for {
		mu.Lock()
		n := len(live)
		mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case p := <-ended:
			remove(p)
			continue
		case <-drain.C:
		case <-ctx.Done():
		}
		mu.Lock()
		for _, p := range live {
			log.Warn("chaos: runcmd: still running after the drain; SIGTERM", "pid", p.cmd.Process.Pid)
			p.cmd.Process.Signal(syscall.SIGTERM)
		}
		mu.Unlock()
		if runErr == nil {
			runErr = errors.New("chaos: runcmd: distlock runs still running after the drain")
		}
		break
	}
	drain.Stop()
	wg.Wait()

	// Every COMMAND's group is gone: a killed distlock's at once, so by
	// now; a finished one's with its COMMAND. Zombies, which do nothing,
	// do not count (proc.GroupRunning); the short wait is for processes
	// still dying.
	leftovers := Check{Name: "no-leftover", Subject: "command"}
	var left []string
	for _, p := range all {
		if !p.killed && p.code == 0 {
			res.Completed++
		}
		if !isHolding(p) || p.pgid <= 0 {
			continue
		}
		leftovers.Checked++
		if err := proc.WaitGroupGone(p.pgid, 5*time.Second); err != nil {
			left = append(left, fmt.Sprintf("distlock pid %d (exit %d, killed %v): %v", p.cmd.Process.Pid, p.code, p.killed, err))
			syscall.Kill(-p.pgid, syscall.SIGKILL)
		}
	}
	data, err := os.ReadFile(res.History)
	if err != nil {
		return nil, err
	}
	overlap, ends, commands := checkCommandHistory(string(data))
	res.Commands = commands
	leftovers.Violations = len(left) + ends.Violations
	leftovers.Checked += ends.Checked
	leftovers.OK = leftovers.Violations == 0
	leftovers.Detail = strings.Join(append(left, ends.Detail), "; ")
	gone.OK = gone.Violations == 0
	gone.Skipped = gone.Checked == 0
	res.Checks = append(res.Checks, overlap, gone, leftovers)
	kh := Check{Name: "killed-holders", Subject: "command", Checked: res.KilledHolding, OK: res.KilledHolding >= cfg.MinKilledHolding}
	kh.Detail = fmt.Sprintf("%d killed holding, %d killed waiting, %d completed, of %d started", res.KilledHolding, res.KilledWaiting, res.Completed, res.Started)
	res.Checks = append(res.Checks, kh)

	// The killed ones' entries go with their sessions, after the TTL.
	orphans := Check{Name: "no-orphans", Subject: "lock", Checked: 1}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cli, err := cfg.Store.NewClient(cctx)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	orphanDeadline := time.Now().Add(3*cfg.TTL + 5*time.Second)
	for {
		es, err := cli.Entries(cctx, lock)
		if err == nil && len(es) == 0 {
			orphans.OK = true
			break
		}
		if time.Now().After(orphanDeadline) || cctx.Err() != nil {
			orphans.Violations = len(es)
			orphans.Detail = fmt.Sprintf("left: %v (%v)", es, err)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	res.Checks = append(res.Checks, orphans)
	for _, c := range res.Checks {
		log.Info("chaos: runcmd: check", "check", c.String())
	}
	return res, runErr
}

// checkCommandHistory checks the COMMANDs' output (lines "start ID",
// "tick ID", "end ID", in the order they were appended). A COMMAND's
// interval runs from its first line to its last (its grandchild's ticks
// included). no-overlap: ordered by their first lines, every interval
// begins after every earlier one ended. The second check: a COMMAND's
// "end" (written once it stopped its grandchild) is its last line.
func checkCommandHistory(history string) (overlap, ends Check, commands int) {
	overlap = Check{Name: "no-overlap", Subject: "command"}
	ends = Check{Name: "end-is-last", Subject: "command"}
	type span struct {
		id          string
		first, last int
		end         int // index of "end", -1 if none
	}
	spans := map[string]*span{}
	var order []*span
	var bad []string // overlaps and malformed lines, the first few
	note := func(format string, args ...any) {
		overlap.Violations++
		if len(bad) < 5 {
			bad = append(bad, fmt.Sprintf(format, args...))
		}
	}
	for i, line := range strings.Split(strings.TrimSpace(history), "\n") {
		if line == "" {
			continue
		}
		kind, id, ok := strings.Cut(line, " ")
		if !ok || (kind != "start" && kind != "tick" && kind != "end") {
			note("line %d %q: not start/tick/end ID", i+1, line)
			continue
		}
		s := spans[id]
		if s == nil {
			s = &span{id: id, first: i, end: -1}
			spans[id] = s
			order = append(order, s)
			if kind != "start" {
				note("line %d %q: %s's first line is not its start", i+1, line, id)
			}
		}
		s.last = i
		if kind == "end" {
			s.end = i
		}
	}
	commands = len(order) // in order of their first lines already
	var prev *span        // of the intervals so far, the one that ends last
	for _, s := range order {
		overlap.Checked++
		if prev != nil && s.first < prev.last {
			note("COMMAND %s started (line %d) while COMMAND %s ran (lines %d-%d)", s.id, s.first+1, prev.id, prev.first+1, prev.last+1)
		}
		if prev == nil || s.last > prev.last {
			prev = s
		}
		if s.end >= 0 {
			ends.Checked++
			if s.end != s.last {
				ends.Violations++
				ends.Detail = fmt.Sprintf("COMMAND %s wrote (line %d) after its end (line %d)", s.id, s.last+1, s.end+1)
			}
		}
	}
	overlap.OK = overlap.Violations == 0
	overlap.Skipped = overlap.Checked == 0
	overlap.Detail = strings.Join(bad, "; ")
	ends.OK = ends.Violations == 0
	return overlap, ends, commands
}
