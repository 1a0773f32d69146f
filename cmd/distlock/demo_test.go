//go:build unix

package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// checkDemoStory checks that out tells the whole story, in order, with
// growing tokens.
func checkDemoStory(t *testing.T, out string) {
	t.Helper()
	tok := `(\S+@\d+\.[0-9a-f]+)`
	steps := []*regexp.Regexp{
		// Round 1: unfenced.
		regexp.MustCompile(`Round 1: an UNFENCED resource`),
		regexp.MustCompile(`A  acquires the lock: fencing token ` + tok),
		regexp.MustCompile(`A  \*\* FROZEN \(SIGSTOP\)`),
		regexp.MustCompile(`B  acquires the lock: token ` + tok + ` > ` + tok),
		regexp.MustCompile(`B  writes: resource = \[report by B`),
		regexp.MustCompile(`A  \*\* RESUMED \(SIGCONT\)`),
		regexp.MustCompile(`A  writes with ` + tok + `: accepted: resource = \[report by B \(\S+\) \| report by A \(\S+\)\]`),
		regexp.MustCompile(`A  is told its lock is lost .*too late`),
		regexp.MustCompile(`CORRUPTED: .*\[report by B \(\S+\) \| report by A \(\S+\)\]`),
		// Round 2: fenced.
		regexp.MustCompile(`Round 2: .*FENCED resource`),
		regexp.MustCompile(`A  acquires the lock: fencing token ` + tok),
		regexp.MustCompile(`A  \*\* FROZEN \(SIGSTOP\)`),
		regexp.MustCompile(`B  acquires the lock: token ` + tok + ` > ` + tok),
		regexp.MustCompile(`B  writes through the fence \(admitted\)`),
		regexp.MustCompile(`A  \*\* RESUMED \(SIGCONT\)`),
		regexp.MustCompile(`A  writes with ` + tok + `: REFUSED: .*token ` + tok + ` refused: ` + tok + ` was admitted already`),
		regexp.MustCompile(`A  is told its lock is lost`),
		regexp.MustCompile(`SAFE: the resource kept B's write only: \[report by B \(\S+\)\]`),
		regexp.MustCompile(`A lock alone cannot stop a paused holder`),
	}
	rest := out
	var prev distlock.Token
	for _, re := range steps {
		loc := re.FindStringSubmatchIndex(rest)
		if loc == nil {
			t.Fatalf("output lacks %q after what came before; output:\n%s", re, out)
		}
		m := re.FindStringSubmatch(rest)
		rest = rest[loc[1]:]
		if !strings.Contains(re.String(), "acquires the lock") {
			continue
		}
		// Every acquisition's token is newer than the one before, and B's
		// is newer than A's.
		got, err := distlock.ParseToken(m[1])
		if err != nil {
			t.Fatalf("token %q: %v", m[1], err)
		}
		if !prev.IsZero() && !got.Newer(prev) {
			t.Errorf("token %v is not newer than the previous acquisition's %v", got, prev)
		}
		if len(m) == 3 && m[2] != prev.String() {
			t.Errorf("B's line compares with %s, A acquired %v", m[2], prev)
		}
		prev = got
	}
}

func TestDemoEtcd(t *testing.T) {
	binary(t) // built before the clock starts
	ctx, cancel := context.WithTimeout(testCtx(t), 30*time.Second)
	defer cancel()
	tmp := t.TempDir()
	start := time.Now()
	r := cli(ctx, t, []string{"TMPDIR=" + tmp}, "demo")
	took := time.Since(start)
	if r.code != 0 {
		t.Fatalf("distlock demo: exit %d after %v\nstdout:\n%s\nstderr:\n%s", r.code, took, r.stdout, r.stderr)
	}
	t.Logf("distlock demo took %v:\n%s", took, r.stdout)
	checkDemoStory(t, r.stdout)
	if r.stderr != "" {
		t.Errorf("stderr not empty: %q", r.stderr)
	}
	checkNoEtcdDir(t, tmp)
}

func TestDemoZooKeeper(t *testing.T) {
	zk := zkFlag(t)
	ctx, cancel := context.WithTimeout(testCtx(t), time.Minute)
	defer cancel()
	r := cli(ctx, t, nil, "demo", "--backend", "zk", zk)
	if r.code != 0 {
		t.Fatalf("distlock demo --backend zk: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "ZooKeeper at ") || !strings.Contains(r.stdout, "session timeout") {
		t.Errorf("the header does not name ZooKeeper and the session timeout:\n%s", r.stdout)
	}
	t.Logf("distlock demo --backend zk:\n%s", r.stdout)
	checkDemoStory(t, r.stdout)
}

// TestDemoInterrupt stops the demo with Ctrl-C while worker A is frozen:
// the demo exits non-zero with one line, the worker is gone, and so is the
// embedded etcd's directory.
func TestDemoInterrupt(t *testing.T) {
	ctx, cancel := context.WithTimeout(testCtx(t), 30*time.Second)
	defer cancel()
	tmp := t.TempDir()
	cmd := exec.CommandContext(ctx, binary(t), "demo")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	pidRE := regexp.MustCompile(`A  acquires the lock: .*\(pid (\d+)\)`)
	worker := 0
	for sc.Scan() {
		if m := pidRE.FindStringSubmatch(sc.Text()); m != nil {
			worker, _ = strconv.Atoi(m[1])
		}
		if strings.Contains(sc.Text(), "FROZEN") {
			break
		}
	}
	if worker == 0 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("no frozen worker seen; stderr %q", stderr.String())
	}
	if matches, _ := filepath.Glob(filepath.Join(tmp, "distlock-etcd-*")); len(matches) != 1 {
		t.Errorf("while the demo runs: etcd dirs %v, want one", matches)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, stdout)
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("after Ctrl-C: %v, want a non-zero exit", err)
	}
	if msg := strings.TrimSpace(stderr.String()); !strings.Contains(msg, "interrupted") || strings.Contains(msg, "\n") {
		t.Errorf("after Ctrl-C: stderr %q, want one line saying interrupted", msg)
	}
	if err := syscall.Kill(worker, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("worker A (pid %d) still exists after the demo exited: kill 0: %v", worker, err)
		syscall.Kill(worker, syscall.SIGKILL)
	}
	checkNoEtcdDir(t, tmp)
}

func TestDemoHelp(t *testing.T) {
	ctx := testCtx(t)
	r := cli(ctx, t, nil, "demo", "--help")
	if r.code != 0 || !strings.Contains(r.stdout, "distlock demo --backend zk --zk") || !strings.Contains(r.stdout, "-backend") || strings.Count(r.stdout, "Usage:") != 1 {
		t.Fatalf("demo --help: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = cli(ctx, t, nil, "--help")
	if !strings.Contains(r.stdout, "demo ") || strings.Contains(r.stdout, demoWorkerName) {
		t.Errorf("distlock --help should list demo and hide %s:\n%s", demoWorkerName, r.stdout)
	}
	r = cli(ctx, t, []string{"DISTLOCK_ZK="}, "demo", "--backend", "zk")
	if r.code != exitUsage {
		t.Errorf("demo --backend zk without --zk: code %d, stderr %q", r.code, r.stderr)
	}
	r = cli(ctx, t, nil, "demo", "--backend", "redis")
	if r.code != exitUsage {
		t.Errorf("demo --backend redis: code %d, stderr %q", r.code, r.stderr)
	}
}

// checkNoEtcdDir checks that no embedded etcd directory is left in dir.
func checkNoEtcdDir(t *testing.T, dir string) {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(dir, "distlock-etcd-*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(matches) > 0 {
		t.Errorf("embedded etcd directories left behind: %v", matches)
	}
}
