//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/cmd/internal/backend"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/fencing"
	"github.com/distlock/distlock/internal/holderproto"
	"github.com/distlock/distlock/internal/proc"
)

func init() {
	register(command{name: "demo", summary: "the GC-pause story with real locks: why a lock needs a fencing token (no setup)", run: demo})
}

const demoHelp = `Usage: distlock demo [--backend etcd|zk] [--zk host:port]

Replays the classic story with real locks, real processes and real time:
worker A (a child process) takes the lock, is frozen with SIGSTOP past its
lease TTL, worker B takes the lock with a larger fencing token and writes;
then A wakes up and writes too. Twice: first against a resource that does
not check tokens (both writes land, A's stale one last), then against one
behind a fence (fencing.Memory refuses A's stale token). It takes under ten
seconds on etcd.

By default it runs on an etcd member embedded in this process, in a
temporary directory that is removed afterwards (also on Ctrl-C): no setup,
no server. With --backend zk it runs on a ZooKeeper you point it to, under
its own znodes (the ZooKeeper server's minimum session timeout decides how
long A must stay frozen).

Examples:
  distlock demo
  distlock demo --backend zk --zk 127.0.0.1:2181

Environment read: DISTLOCK_ZK (--zk's default).
`

const demoLock = "reports/daily"

// demo runs the story; see demoHelp.
func demo(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	backendKind := fs.String("backend", "etcd", "etcd (embedded, no setup) or zk (a ZooKeeper you give with --zk)")
	zkAddr := fs.String("zk", os.Getenv("DISTLOCK_ZK"), "ZooKeeper servers host:port, comma-separated, for --backend zk (default $DISTLOCK_ZK)")
	zkTimeout := fs.Duration("zk-timeout", 4*time.Second, "ZooKeeper session timeout to ask for; the server bounds it by its min/max")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printHelp(stdout, "demo", demoHelp, fs)
			return nil
		}
		return usageErr("%v; see 'distlock demo --help'", err)
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected arguments %q", fs.Args())
	}

	// Ctrl-C and SIGTERM end the demo cleanly: the worker is killed, the
	// embedded etcd stopped and its directory removed.
	sigCtx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(sigCtx, 2*time.Minute)
	defer cancel()

	d := &demoRun{out: stdout, start: time.Now(), sig: sigCtx}
	var cf connFlags
	switch *backendKind {
	case "etcd":
		endpoint, stopEtcd, err := startEmbeddedEtcd(ctx)
		if err != nil {
			return d.fail(ctx, err)
		}
		defer stopEtcd()
		cf = connFlags{etcd: endpoint, ttl: etcdlock.MinTTL, timeout: 5 * time.Second}
		d.say("distlock demo: a lock is not enough. Embedded etcd at %s (in a temp dir), lease TTL %v.", endpoint, cf.ttl)
	case "zk":
		if *zkAddr == "" {
			return usageErr("--backend zk needs --zk host:port (or $DISTLOCK_ZK)")
		}
		// A znode path of this run only, so that the demo's locks meet
		// nobody else's; container nodes, removed by the server once empty.
		cf = connFlags{zk: *zkAddr, ttl: *zkTimeout, timeout: 5 * time.Second,
			prefix: fmt.Sprintf("/distlock-demo/run-%d-%d", os.Getpid(), time.Now().UnixNano())}
	default:
		return usageErr("--backend %q: want etcd or zk", *backendKind)
	}

	be, err := cf.open(ctx)
	if err != nil {
		return d.fail(ctx, err)
	}
	defer be.Close()
	sess, err := session(ctx, be, holderValue("demo worker B"))
	if err != nil {
		return d.fail(ctx, err)
	}
	defer func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer ccancel()
		sess.Close(cctx)
	}()
	if be.Kind() == backend.ZooKeeper {
		t := sess.TTL()
		d.say("distlock demo: a lock is not enough. ZooKeeper at %s, session timeout %v (asked %v; the server's min/max decide).", cf.zk, t, cf.ttl)
		cf.ttl = t
	}
	muB, err := mutex(sess, demoLock)
	if err != nil {
		return d.fail(ctx, err)
	}
	d.b = muB
	d.cf = cf

	d.say("Worker A runs in a child process; worker B in this one. Both want the lock %q.", demoLock)
	if err := d.round(ctx, false); err != nil {
		return d.fail(ctx, err)
	}
	if err := d.round(ctx, true); err != nil {
		return d.fail(ctx, err)
	}
	d.say("")
	d.say("A lock alone cannot stop a paused holder: A checked, froze, woke up still believing it held the lock, and wrote.")
	d.say("Its lost-lock signal came only after it woke, too late. Only the resource can refuse the write:")
	d.say("fence it with the token (newest token wins), and the paused holder's stale write is rejected. (%.1fs)", time.Since(d.start).Seconds())
	return nil
}

// demoRun is one run of the demo: where it prints and what it shares
// between the rounds.
type demoRun struct {
	out    io.Writer
	sig    context.Context // ended by Ctrl-C or SIGTERM
	start  time.Time
	round0 time.Time
	cf     connFlags
	b      distlock.Locker
}

func (d *demoRun) say(format string, args ...any) { fmt.Fprintf(d.out, format+"\n", args...) }

// event prints one timeline line, at time at relative to the round's start.
func (d *demoRun) event(at time.Time, who, format string, args ...any) {
	fmt.Fprintf(d.out, "  %+6.2fs  %-2s %s\n", at.Sub(d.round0).Seconds(), who, fmt.Sprintf(format, args...))
}

// fail turns err into the demo's error, saying "interrupted" if Ctrl-C
// (or SIGTERM) ended it.
func (d *demoRun) fail(ctx context.Context, err error) error {
	if d.sig.Err() != nil {
		return exit(130, errors.New("demo: interrupted; the worker was stopped and the demo's data removed"))
	}
	return err
}

// demoResource is the protected resource: a log of the writes it took.
type demoResource struct {
	mu     sync.Mutex
	writes []string
}

func (r *demoResource) write(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, s)
}

func (r *demoResource) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return "[" + strings.Join(r.writes, " | ") + "]"
}

func (r *demoResource) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.writes)
}

// round plays the story once, against an unfenced or a fenced resource.
func (d *demoRun) round(ctx context.Context, fenced bool) error {
	res := &demoResource{}
	var fence *fencing.Memory
	d.say("")
	if fenced {
		var err error
		if fence, err = fencing.NewMemory(demoLock); err != nil {
			return err
		}
		d.say("Round 2: the same story, against a FENCED resource (fencing.Memory: it admits a write only with the newest token seen).")
	} else {
		d.say("Round 1: an UNFENCED resource (it takes any write from whoever believes it holds the lock).")
	}
	// apply is the resource's write path.
	apply := func(tok distlock.Token, text string) error {
		entry := fmt.Sprintf("%s (%s)", text, tok)
		if fence == nil {
			res.write(entry)
			return nil
		}
		return fence.Do(ctx, tok, func(context.Context) error {
			res.write(entry)
			return nil
		})
	}

	d.round0 = time.Now()
	a, err := startDemoWorker(d.cf)
	if err != nil {
		return err
	}
	defer a.kill()

	// A takes the lock.
	m, err := a.expect(ctx, "acquired", 30*time.Second)
	if err != nil {
		return err
	}
	tokA, err := distlock.ParseToken(m.Token)
	if err != nil {
		return fmt.Errorf("demo: worker A's token: %w", err)
	}
	d.event(m.Time(), "A", "acquires the lock: fencing token %s (pid %d)", tokA, a.pid)

	// A checks its lock, and is frozen before it writes.
	m, err = a.expect(ctx, "checked", 10*time.Second)
	if err != nil {
		return err
	}
	if !m.IsHeld() {
		return fmt.Errorf("demo: worker A lost the lock before its write: %s", m.Error)
	}
	d.event(m.Time(), "A", "checks: the lock is still mine. About to write...")
	if err := a.pause(ctx); err != nil {
		return err
	}
	pausedAt := time.Now()
	d.event(pausedAt, "A", "** FROZEN (SIGSTOP), between its check and its write, like a long GC pause: no code runs, no keepalives **")

	// B finds it held and queues.
	if _, err := d.b.TryLock(ctx); !errors.Is(err, distlock.ErrLocked) {
		return fmt.Errorf("demo: B's TryLock while A holds the lock: want ErrLocked, got %v", err)
	}
	d.event(time.Now(), "B", "finds it held (TryLock: locked) and queues for it")
	type got struct {
		l   *distlock.Lease
		err error
		at  time.Time
	}
	bGot := make(chan got, 1)
	lctx, lcancel := context.WithTimeout(ctx, 30*time.Second)
	defer lcancel()
	go func() {
		l, err := d.b.Lock(lctx)
		bGot <- got{l, err, time.Now()}
	}()
	var leaseB *distlock.Lease
	defer func() {
		lcancel()
		if g := <-bGot; g.l != nil {
			uctx, ucancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer ucancel()
			g.l.Unlock(uctx)
		}
	}()

	// B gets the lock once A's lease (or session) has run out on the server.
	var g got
	select {
	case g = <-bGot:
		bGot <- g // for the deferred unlock
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	if g.err != nil {
		return fmt.Errorf("demo: B did not get the lock after A froze: %w", g.err)
	}
	leaseB = g.l
	tokB := leaseB.Token()
	if !tokB.Newer(tokA) {
		return fmt.Errorf("demo: B's token %s is not newer than A's %s", tokB, tokA)
	}
	d.event(g.at, "B", "acquires the lock: token %s > %s (A's %s on the server %.1fs after A froze)", tokB, tokA, d.ttlWord(), g.at.Sub(pausedAt).Seconds())
	if err := apply(tokB, "report by B"); err != nil {
		return fmt.Errorf("demo: B's write with the newest token: %w", err)
	}
	how := "writes"
	if fenced {
		how = "writes through the fence (admitted)"
	}
	d.event(time.Now(), "B", "%s: resource = %s", how, res)

	// A wakes up a little later and carries on where it stopped: with
	// the write.
	select {
	case <-time.After(500 * time.Millisecond):
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	if err := a.resume(); err != nil {
		return err
	}
	resumedAt := time.Now()
	d.event(resumedAt, "A", "** RESUMED (SIGCONT) after %.1fs ** still believing it holds %s", resumedAt.Sub(pausedAt).Seconds(), tokA)
	m, err = a.expect(ctx, "write", 10*time.Second)
	if err != nil {
		return err
	}
	wroteAt := m.Time()
	tokW, err := distlock.ParseToken(m.Token)
	if err != nil {
		return fmt.Errorf("demo: worker A's write: %w", err)
	}
	werr := apply(tokW, m.Text)
	var stale *fencing.StaleError
	switch {
	case fenced && errors.As(werr, &stale):
		d.event(m.Time(), "A", "writes with %s: REFUSED: %v", tokW, werr)
		a.send("refused")
	case fenced:
		return fmt.Errorf("demo: the fence did not refuse A's stale token %s: %v", tokW, werr)
	case werr != nil:
		return fmt.Errorf("demo: A's write: %w", werr)
	default:
		d.event(m.Time(), "A", "writes with %s: accepted: resource = %s", tokW, res)
		a.send("ok")
	}

	// A is told, by its own lock, that it lost the lock: after the fact.
	m, err = a.expect(ctx, "lost", 35*time.Second)
	if err != nil {
		return err
	}
	lostAt, reason := m.Time(), m.Error
	// "distlock: lock "x": hold: lock lost: session expired: lease 1f past
	// its client-side deadline...": the why, in short.
	if _, after, ok := strings.Cut(reason, "lock lost: "); ok {
		reason = after
	}
	reason, _, _ = strings.Cut(reason, ":")
	if fenced {
		d.event(lostAt, "A", "is told its lock is lost (Done closed; Err: lock lost, %s)", reason)
	} else if lostAt.After(wroteAt) {
		d.event(lostAt, "A", "is told its lock is lost (Done closed; Err: lock lost, %s): too late, its write had already gone out", reason)
	} else {
		// Woken, A's timers fire at once; but its code is past its check.
		d.event(lostAt, "A", "is told its lock is lost (Done closed; Err: lock lost, %s) as it wakes: too late, its code was past the check and wrote anyway", reason)
	}
	if _, err := a.expect(ctx, "bye", 10*time.Second); err != nil {
		return err
	}
	if err := a.wait(); err != nil {
		return err
	}

	if fenced {
		if res.len() != 1 {
			return fmt.Errorf("demo: the fenced resource took %d writes: %s", res.len(), res)
		}
		d.say("  => SAFE: the resource kept B's write only: %s. A's stale token was refused at the resource.", res)
	} else {
		if res.len() != 2 {
			return fmt.Errorf("demo: the unfenced resource took %d writes: %s", res.len(), res)
		}
		d.say("  => CORRUPTED: both wrote under \"the\" lock; A's stale write landed last, over B's: %s", res)
	}
	return nil
}

func (d *demoRun) ttlWord() string {
	if d.cf.zk != "" {
		return fmt.Sprintf("%v session expired", d.cf.ttl)
	}
	return fmt.Sprintf("%v lease expired", d.cf.ttl)
}

// demoWorkerProc is worker A's process.
type demoWorkerProc struct {
	cmd    *exec.Cmd
	pid    int
	stdin  io.WriteCloser
	lines  chan holderproto.Event
	stderr bytes.Buffer
	done   chan error // the process's exit, once
	exited error
	waited bool
}

func startDemoWorker(cf connFlags) (*demoWorkerProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("demo: cannot find this binary to start worker A: %w", err)
	}
	args := []string{demoWorkerName, "--lock", demoLock, "--ttl", cf.ttl.String()}
	if cf.etcd != "" {
		args = append(args, "--etcd", cf.etcd)
	} else {
		args = append(args, "--zk", cf.zk)
	}
	if cf.prefix != "" {
		args = append(args, "--prefix", cf.prefix)
	}
	w := &demoWorkerProc{lines: make(chan holderproto.Event, 16), done: make(chan error, 1)}
	w.cmd = exec.Command(exe, args...)
	// Its own process group: Ctrl-C in the terminal reaches the demo only,
	// which then kills the worker; and SIGSTOP goes to the whole group.
	w.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	w.cmd.Stderr = &syncWriter{w: &w.stderr}
	if w.stdin, err = w.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := w.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := w.cmd.Start(); err != nil {
		return nil, fmt.Errorf("demo: start worker A: %w", err)
	}
	w.pid = w.cmd.Process.Pid
	go func() {
		sc := holderproto.NewScanner(out)
		for sc.Scan() {
			e, err := holderproto.ParseEvent(sc.Bytes())
			if err != nil {
				e = holderproto.Event{Event: "unparsable", Error: sc.Text()}
			}
			w.lines <- e
		}
		close(w.lines)
		w.done <- w.cmd.Wait()
	}()
	return w, nil
}

// syncWriter makes a buffer safe to write from exec's copying goroutine
// and read from ours.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (w *demoWorkerProc) stderrText() string {
	sw := w.cmd.Stderr.(*syncWriter)
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return oneLine(sw.w.String())
}

// expect waits for the worker's next line and checks its verb.
func (w *demoWorkerProc) expect(ctx context.Context, verb string, timeout time.Duration) (holderproto.Event, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case m, ok := <-w.lines:
		if !ok {
			err := w.wait()
			return holderproto.Event{}, fmt.Errorf("demo: worker A exited (%v) before %q: %s", err, verb, w.stderrText())
		}
		if m.Event != verb {
			return holderproto.Event{}, fmt.Errorf("demo: worker A said %q %q, want %q", m.Event, m.Error, verb)
		}
		return m, nil
	case <-t.C:
		return holderproto.Event{}, fmt.Errorf("demo: worker A did not say %q within %v", verb, timeout)
	case <-ctx.Done():
		return holderproto.Event{}, context.Cause(ctx)
	}
}

func (w *demoWorkerProc) send(line string) { io.WriteString(w.stdin, line+"\n") }

// pause stops every thread of the worker and returns once they are
// stopped.
func (w *demoWorkerProc) pause(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := proc.Pause(pctx, w.pid); err != nil {
		return fmt.Errorf("demo: worker A did not stop within 5s of SIGSTOP: %w", err)
	}
	return nil
}

// resume lets the worker go on with its write, and continues it.
func (w *demoWorkerProc) resume() error {
	w.send("go")
	if err := proc.Resume(w.pid); err != nil {
		return fmt.Errorf("demo: worker A: %w", err)
	}
	return nil
}

// wait waits for the worker to exit and returns an error if it failed.
func (w *demoWorkerProc) wait() error {
	if !w.waited {
		select {
		case w.exited = <-w.done:
		case <-time.After(10 * time.Second):
			return errors.New("demo: worker A did not exit")
		}
		w.waited = true
	}
	if w.exited != nil {
		return fmt.Errorf("demo: worker A: %v: %s", w.exited, w.stderrText())
	}
	return nil
}

// kill ends the worker if it still runs (a stopped one too) and reaps it.
func (w *demoWorkerProc) kill() {
	if w.waited {
		return
	}
	syscall.Kill(-w.pid, syscall.SIGKILL)
	w.stdin.Close()
	go func() {
		for range w.lines {
		}
	}()
	w.wait()
}
