package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

var lockSeq atomic.Int64

// lockName is a lock name no other test uses.
func lockName(t *testing.T) string {
	base := regexp.MustCompile(`[^A-Za-z0-9_-]+`).ReplaceAllString(t.Name(), "-")
	return fmt.Sprintf("%s-%d-%d", base, os.Getpid(), lockSeq.Add(1))
}

// bgProc is a distlock started in the background, its stdout read line by
// line.
type bgProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr *lockedBuffer
	done   chan struct{}
	code   int
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// start starts distlock with args; it is killed at the end of the test if
// still running.
func start(ctx context.Context, t *testing.T, args ...string) *bgProc {
	t.Helper()
	cmd := exec.CommandContext(ctx, binary(t), args...)
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	p := &bgProc{t: t, cmd: cmd, stdin: stdin, lines: make(chan string, 100), stderr: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = pw, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start distlock %v: %v", args, err)
	}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	go func() {
		err := cmd.Wait()
		pw.Close()
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			p.code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				p.code = 128 + int(ws.Signal())
			}
		default:
			p.code = -1
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// waitLine waits for a stdout line equal to want.
func (p *bgProc) waitLine(ctx context.Context, want string) {
	p.t.Helper()
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				<-p.done
				p.t.Fatalf("distlock exited (code %d) before printing %q; stderr: %s", p.code, want, p.stderr)
			}
			if l == want {
				return
			}
		case <-ctx.Done():
			p.t.Fatalf("no %q line: %v; stderr: %s", want, ctx.Err(), p.stderr)
		}
	}
}

// nextLine returns the next stdout line; what names it for the failure.
func (p *bgProc) nextLine(ctx context.Context, what string) string {
	p.t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			<-p.done
			p.t.Fatalf("%s: distlock exited (code %d) first; stderr: %s", what, p.code, p.stderr)
		}
		return l
	case <-ctx.Done():
		p.t.Fatalf("%s: no line: %v; stderr: %s", what, ctx.Err(), p.stderr)
		return ""
	}
}

// wait waits (at most d) for distlock to exit and returns its exit code.
func (p *bgProc) wait(d time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(d):
		p.t.Fatalf("distlock still running after %v; stderr: %s", d, p.stderr)
		return 0
	}
}

func TestRunUsage(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--etcd=127.0.0.1:1", "--", "true"}, "no --lock"},
		{[]string{"run", "--etcd=127.0.0.1:1", "--lock", "x"}, "no command"},
		{[]string{"run", "--etcd=127.0.0.1:1", "--lock", "x", "--"}, "no command"},
		{[]string{"run", "--etcd=127.0.0.1:1", "--lock", "a//b", "--", "true"}, "invalid lock name"},
		{[]string{"run", "--etcd=127.0.0.1:1", "--lock", "x", "--ttl=4s", "--grace=4s", "--", "true"}, "--grace"},
		{[]string{"run", "--etcd=127.0.0.1:1", "--lock", "x", "--wait=1s", "--no-wait", "--", "true"}, "choose one"},
		{[]string{"run", "--lock", "x", "--bogus", "--", "true"}, "not defined"},
		{[]string{"run", "--lock", "x", "--", "true"}, "no cluster"},
	} {
		r := cli(ctx, t, []string{"ETCDCTL_ENDPOINTS=", "DISTLOCK_ZK="}, tc.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%v: code %d (want %d), stderr %q (want one line with %q)", tc.args, r.code, exitUsage, r.stderr, tc.want)
		}
	}
	r := cli(ctx, t, nil, "run", "--help")
	for _, want := range []string{"Examples:", "Exit status:", "--no-wait", "DISTLOCK_TOKEN", "kill -9"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("run --help: code %d, stdout lacks %q: %s", r.code, want, r.stdout)
		}
	}
}

func TestRunUnreachable(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nobody listens there now
	for _, fl := range []string{"--etcd=" + addr, "--zk=" + addr} {
		start := time.Now()
		r := cli(ctx, t, nil, "run", fl, "--dial-timeout=500ms", "--lock", "x", "--", "true")
		if r.code != exitUnreachable || !strings.Contains(r.stderr, "connection refused") {
			t.Errorf("%s: code %d (want %d), stderr %q", fl, r.code, exitUnreachable, r.stderr)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%s: took %v", fl, d)
		}
	}
}

func TestRunExitCodeAndEnv(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *testBackend) {
		t.Parallel()
		ctx := testCtx(t)
		lock := lockName(t)
		r := cli(ctx, t, nil, b.args("run", "--lock", lock, "--",
			"sh", "-c", `echo "lock=$DISTLOCK_LOCK"; echo "token=$DISTLOCK_TOKEN"; echo "holder=$DISTLOCK_HOLDER"; exit 3`)...)
		if r.code != 3 {
			t.Fatalf("code %d, want the command's 3; stderr %q", r.code, r.stderr)
		}
		if !strings.Contains(r.stdout, "lock="+lock+"\n") {
			t.Errorf("DISTLOCK_LOCK missing: %q", r.stdout)
		}
		if !regexp.MustCompile(`(?m)^token=` + regexp.QuoteMeta(lock) + `@[1-9][0-9]*\.[1-9a-f][0-9a-f]*$`).MatchString(r.stdout) {
			t.Errorf("DISTLOCK_TOKEN missing: %q", r.stdout)
		}
		if !regexp.MustCompile(`(?m)^holder=.* pid [0-9]+ distlock run since .+$`).MatchString(r.stdout) {
			t.Errorf("DISTLOCK_HOLDER missing: %q", r.stdout)
		}
		if e := b.entries(t, lock); len(e) != 0 {
			t.Errorf("entries left behind: %v", e)
		}

		// --shell, and exit 0.
		r = cli(ctx, t, nil, b.args("run", "--lock", lock, "--shell", "--", `echo "$DISTLOCK_LOCK"`, "|", "tr", "a-z", "A-Z")...)
		if r.code != 0 || r.stdout != strings.ToUpper(lock)+"\n" {
			t.Errorf("--shell: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		// A signal ending the command: 128+signal.
		r = cli(ctx, t, nil, b.args("run", "--lock", lock, "--", "sh", "-c", "kill -KILL $$")...)
		if r.code != 128+9 {
			t.Errorf("command killed by SIGKILL: code %d, want 137; stderr %q", r.code, r.stderr)
		}
	})
}

func TestRunCannotStart(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	b := etcdBackend(t)
	lock := lockName(t)
	r := cli(ctx, t, nil, b.args("run", "--lock", lock, "--", "distlock-no-such-command")...)
	if r.code != exitNotFound || !strings.Contains(r.stderr, "not found") {
		t.Errorf("missing command: code %d, stderr %q", r.code, r.stderr)
	}
	notExec := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\necho hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = cli(ctx, t, nil, b.args("run", "--lock", lock, "--", notExec)...)
	if r.code != exitCannotRun {
		t.Errorf("not executable: code %d, stderr %q", r.code, r.stderr)
	}
	if e := b.entries(t, lock); len(e) != 0 {
		t.Errorf("entries left behind: %v", e)
	}
}

func TestRunNotAcquired(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *testBackend) {
		t.Parallel()
		ctx := testCtx(t)
		lock := lockName(t)
		holder := start(ctx, t, b.args("run", "--lock", lock, "--", "sh", "-c", "echo ready; read x; exit 0")...)
		holder.waitLine(ctx, "ready")

		r := cli(ctx, t, nil, b.args("run", "--lock", lock, "--no-wait", "--", "echo", "ran")...)
		t.Logf("--no-wait: %s", r.stderr)
		if r.code != exitNotAcquired || !strings.Contains(r.stderr, "entry "+b.prefix) || !strings.Contains(r.stderr, "distlock run since") || r.stdout != "" {
			t.Errorf("--no-wait: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		begin := time.Now()
		r = cli(ctx, t, nil, b.args("run", "--lock", lock, "--wait=1s", "--", "echo", "ran")...)
		t.Logf("--wait: %s", r.stderr)
		if r.code != exitNotAcquired || !strings.Contains(r.stderr, "--wait") || r.stdout != "" {
			t.Errorf("--wait 1s: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		if d := time.Since(begin); d < time.Second {
			t.Errorf("--wait 1s gave up after %v", d)
		}
		if e := b.entries(t, lock); len(e) != 1 {
			t.Errorf("entries: %v, want only the holder's", e)
		}

		holder.stdin.Close()
		if code := holder.wait(30 * time.Second); code != 0 {
			t.Errorf("holder: code %d, stderr %s", code, holder.stderr)
		}
		r = cli(ctx, t, nil, b.args("run", "--lock", lock, "--no-wait", "--", "echo", "ran")...)
		if r.code != 0 || r.stdout != "ran\n" {
			t.Errorf("--no-wait on a free lock: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
	})
}

// readFile waits (bounded) for path to contain want.
// fileSays checks that the file a command's trap wrote says want. It is
// read once the command has exited (the callers wait for that event), so
// whatever the trap wrote is there.
func fileSays(t *testing.T, path, want string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(b), want) {
		t.Errorf("%s: %q, %v; want %q (the command's trap did not run)", path, b, err, want)
	}
}

func TestRunLockLoss(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *testBackend) {
		t.Parallel()
		ctx := testCtx(t)
		lock := lockName(t)
		file := filepath.Join(t.TempDir(), "trap")
		script := fmt.Sprintf(`trap 'echo got TERM >> %s; exit 0' TERM; echo ready; while :; do sleep 0.05; done`, file)
		holder := start(ctx, t, b.args("run", "--lock", lock, "--ttl=10s", "--", "sh", "-c", script)...)
		holder.waitLine(ctx, "ready")

		b.remove(t, lock)
		if code := holder.wait(30 * time.Second); code != exitLost {
			t.Fatalf("code %d, want %d; stderr %s", code, exitLost, holder.stderr)
		}
		t.Logf("lost: %s", holder.stderr)
		// The command's shell may say "Terminated" about its sleep;
		// distlock itself says one line.
		if s := holder.stderr.String(); !regexp.MustCompile(`(?m)^distlock: lock "[^"]+" lost while the command ran; .*deleted.*$`).MatchString(s) || strings.Count(s, "distlock:") != 1 {
			t.Errorf("stderr: want one line saying the lock was lost and why: %q", s)
		}
		fileSays(t, file, "got TERM")
	})
}

// A command that ignores SIGTERM gets SIGKILL after --grace.
func TestRunLockLossGrace(t *testing.T) {
	t.Parallel()
	b := etcdBackend(t)
	ctx := testCtx(t)
	lock := lockName(t)
	file := filepath.Join(t.TempDir(), "trap")
	script := fmt.Sprintf(`trap 'echo got TERM >> %s' TERM; echo ready; while :; do sleep 0.05; done`, file)
	holder := start(ctx, t, b.args("run", "--lock", lock, "--ttl=10s", "--grace=1s", "--", "sh", "-c", script)...)
	holder.waitLine(ctx, "ready")
	b.remove(t, lock)
	begin := time.Now()
	if code := holder.wait(30 * time.Second); code != exitLost {
		t.Fatalf("code %d, want %d; stderr %s", code, exitLost, holder.stderr)
	}
	if d := time.Since(begin); d > 8*time.Second {
		t.Errorf("took %v to stop a command ignoring SIGTERM with --grace 1s", d)
	}
	fileSays(t, file, "got TERM")
}

func TestRunSignalForwarded(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *testBackend) {
		t.Parallel()
		ctx := testCtx(t)
		lock := lockName(t)
		file := filepath.Join(t.TempDir(), "trap")
		script := fmt.Sprintf(`trap 'echo got TERM >> %s; exit 7' TERM; echo ready; while :; do sleep 0.05; done`, file)
		holder := start(ctx, t, b.args("run", "--lock", lock, "--", "sh", "-c", script)...)
		holder.waitLine(ctx, "ready")
		if err := holder.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := holder.wait(30 * time.Second); code != 7 {
			t.Fatalf("code %d, want the command's 7; stderr %s", code, holder.stderr)
		}
		fileSays(t, file, "got TERM")
		if e := b.entries(t, lock); len(e) != 0 {
			t.Errorf("entries left behind: %v", e)
		}
	})
}

func TestRunSignalWhileWaiting(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *testBackend) {
		t.Parallel()
		ctx := testCtx(t)
		lock := lockName(t)
		holder := start(ctx, t, b.args("run", "--lock", lock, "--", "sh", "-c", "echo ready; read x; exit 0")...)
		holder.waitLine(ctx, "ready")

		waiter := start(ctx, t, b.args("run", "--lock", lock, "--", "echo", "ran")...)
		b.waitQueued(t, lock, 2) // the waiter enqueued
		if err := waiter.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		if code := waiter.wait(5 * time.Second); code != 128+int(syscall.SIGINT) {
			t.Fatalf("waiter: code %d, want 130; stderr %s", code, waiter.stderr)
		}
		t.Logf("waiter: %s", waiter.stderr)
		if s := waiter.stderr.String(); !strings.Contains(s, "while waiting") {
			t.Errorf("waiter stderr: %q", s)
		}
		if e := b.entries(t, lock); len(e) != 1 {
			t.Errorf("entries after the waiter gave up: %v, want only the holder's", e)
		}

		holder.stdin.Close()
		if code := holder.wait(30 * time.Second); code != 0 {
			t.Errorf("holder: code %d, stderr %s", code, holder.stderr)
		}
		if e := b.entries(t, lock); len(e) != 0 {
			t.Errorf("entries left behind: %v", e)
		}
		select {
		case l, ok := <-waiter.lines:
			if ok {
				t.Errorf("the waiter ran its command: %q", l)
			}
		default:
		}
	})
}

// TestRunDeadlineEnv: COMMAND gets DISTLOCK_DEADLINE, the lease's
// deadline as it started: ahead of it, and no further than the TTL.
func TestRunDeadlineEnv(t *testing.T) {
	b := etcdBackend(t)
	ctx := testCtx(t)
	start := time.Now()
	r := cli(ctx, t, nil, b.args("run", "--lock", "deadline/env", "--ttl", "10s", "--", "sh", "-c", `echo "$DISTLOCK_DEADLINE"`)...)
	if r.code != 0 {
		t.Fatalf("run: exit %d, stderr %q", r.code, r.stderr)
	}
	d, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(r.stdout))
	if err != nil {
		t.Fatalf("DISTLOCK_DEADLINE %q: %v", r.stdout, err)
	}
	if !d.After(start) || d.After(start.Add(10*time.Second+time.Second)) {
		t.Errorf("DISTLOCK_DEADLINE %v: want after the run's start %v and within its 10 s TTL", d, start)
	}
}

// TestRunPermits runs three commands on a semaphore of two permits: two
// hold at once (slots 0 and 1, in DISTLOCK_PERMIT), the third waits, and
// status shows them; a line with another N is refused, and a bad N is a
// usage error.
func TestRunPermits(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *testBackend) {
		ctx := testCtx(t)
		lock := lockName(t)
		done := filepath.Join(t.TempDir(), "done")
		hold := `echo "slot=$DISTLOCK_PERMIT token=$DISTLOCK_TOKEN lock=$DISTLOCK_LOCK"; while [ ! -f ` + done + ` ]; do sleep 0.05; done`
		var (
			procs []*bgProc
			out   []string
		)
		for i := range 3 {
			procs = append(procs, start(ctx, t, b.args("run", "--lock", lock, "--permits", "2", "--shell", "--", hold)...))
			if i < 2 {
				out = append(out, procs[i].nextLine(ctx, "a holder's slot"))
			}
		}
		watch := start(ctx, t, b.args("status", "--watch", "--json", lock)...)
		for {
			var st lockStatus
			line := watch.nextLine(ctx, "a status with the third in line")
			if err := json.Unmarshal([]byte(line), &st); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			if st.Permits == 2 && st.Holders == 2 && st.Waiters == 1 {
				break
			}
		}
		watch.cmd.Process.Kill()
		r := cli(ctx, t, nil, b.args("status", lock)...)
		if !strings.Contains(r.stdout, "semaphore "+lock+": 2 of 2 permits held, 1 waiting") {
			t.Errorf("status: %q", r.stdout)
		}
		// Another N: the line is well-formed, but disagrees with the
		// semaphore's holders: EX_DATAERR, naming --permits.
		if r := cli(ctx, t, nil, b.args("run", "--lock", lock, "--permits", "3", "--", "true")...); r.code != exitDataErr || !strings.Contains(r.stderr, "permit count") ||
			!strings.HasPrefix(r.stderr, "distlock: --permits 3: ") || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("another N: code %d, stderr %q; want %d and one line naming --permits 3 and the mismatch", r.code, r.stderr, exitDataErr)
		}
		if err := os.WriteFile(done, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		out = append(out, procs[2].nextLine(ctx, "the third's slot"))
		for i, p := range procs {
			if code := p.wait(time.Minute); code != 0 {
				t.Fatalf("run %d exited %d; stderr %s", i, code, p.stderr)
			}
		}
		slots := map[string]bool{}
		for _, o := range out[:2] {
			slots[o[:len("slot=0")]] = true
			if !strings.Contains(o, "token="+lock+"/slot-") {
				t.Errorf("DISTLOCK_TOKEN is not the slot's: %q", o)
			}
			if !strings.HasSuffix(o, " lock="+lock) {
				t.Errorf("DISTLOCK_LOCK is not NAME: %q", o)
			}
		}
		if !slots["slot=0"] || !slots["slot=1"] {
			t.Errorf("the two holders' slots: %v, want 0 and 1", slots)
		}
		if e := b.entries(t, lock); len(e) != 0 {
			t.Errorf("entries left behind: %v", e)
		}
		if r := cli(ctx, t, nil, b.args("run", "--lock", lock, "--permits", "0", "--", "true")...); r.code != exitUsage {
			t.Errorf("--permits 0: code %d, want %d", r.code, exitUsage)
		}
	})
}
