package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// Unit tests of underLock with a lease made by hand (no cluster).

func testLease() (*distlock.Lease, func(error)) {
	l, lose := distlock.NewLease("", distlock.Token{Name: "jobs/x", Seq: 42, Owner: 0xabc}, func(context.Context) error { return nil }, nil)
	// The engine hands a Lease its loss as an error matching ErrLost.
	return l, func(reason error) { lose(fmt.Errorf("%w: %w", distlock.ErrLost, reason)) }
}

func exitCodeOf(err error) int {
	var s silentExit
	var e *exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &s):
		return int(s)
	case errors.As(err, &e):
		return e.code
	}
	return exitFailure
}

func TestUnderLockExitAndEnv(t *testing.T) {
	l, _ := testLease()
	var out strings.Builder
	err := underLock(context.Background(), l, []string{"sh", "-c", `echo "$DISTLOCK_LOCK $DISTLOCK_TOKEN $EXTRA"; exit 3`},
		childOpts{env: []string{"EXTRA=yes"}, stdout: &out, stderr: io.Discard}, nil)
	if exitCodeOf(err) != 3 || out.String() != "jobs/x jobs/x@42.abc yes\n" {
		t.Fatalf("err %v, stdout %q", err, out.String())
	}
	if err := underLock(context.Background(), l, []string{"true"}, childOpts{}, nil); err != nil {
		t.Fatalf("true: %v", err)
	}
	out.Reset()
	if err := underLock(context.Background(), l, []string{"echo", "a", "|", "tr", "a", "b"}, childOpts{shell: true, stdout: &out}, nil); err != nil || out.String() != "b\n" {
		t.Fatalf("shell: err %v, stdout %q", err, out.String())
	}
}

func TestUnderLockCannotStart(t *testing.T) {
	l, _ := testLease()
	if err := underLock(context.Background(), l, []string{"distlock-no-such-command"}, childOpts{}, nil); exitCodeOf(err) != exitNotFound {
		t.Errorf("missing command: %v", err)
	}
	if err := underLock(context.Background(), l, []string{"/nonexistent/dir/cmd"}, childOpts{}, nil); exitCodeOf(err) != exitNotFound {
		t.Errorf("missing path: %v", err)
	}
	p := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := underLock(context.Background(), l, []string{p}, childOpts{}, nil); exitCodeOf(err) != exitCannotRun {
		t.Errorf("not executable: %v", err)
	}
}

// started runs underLock in the background with stdout on a pipe, and
// waits for the command to print "ready".
func started(t *testing.T, l *distlock.Lease, script string, o childOpts, sigs <-chan os.Signal) <-chan error {
	t.Helper()
	pr, pw := io.Pipe()
	o.stdout, o.stderr = pw, io.Discard
	res := make(chan error, 1)
	go func() {
		err := underLock(context.Background(), l, []string{"sh", "-c", script}, o, sigs)
		pw.Close()
		res <- err
	}()
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		if sc.Text() == "ready" {
			go io.Copy(io.Discard, pr)
			return res
		}
	}
	t.Fatalf("no ready line; underLock: %v", <-res)
	return nil
}

func TestUnderLockLost(t *testing.T) {
	l, lose := testLease()
	// The command ignores SIGTERM: it gets SIGKILL after the grace.
	res := started(t, l, `trap '' TERM; echo ready; while :; do sleep 0.05; done`, childOpts{grace: 200 * time.Millisecond}, nil)
	lose(distlock.ErrEntryGone)
	select {
	case err := <-res:
		if exitCodeOf(err) != exitLost || !strings.Contains(err.Error(), "lost") || !strings.Contains(err.Error(), "deleted") {
			t.Fatalf("err %v, want exit %d saying why", err, exitLost)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("command not stopped")
	}

	// Lost before the start: not started.
	l2, lose2 := testLease()
	lose2(distlock.ErrSessionExpired)
	if err := underLock(context.Background(), l2, []string{"true"}, childOpts{}, nil); exitCodeOf(err) != exitLost {
		t.Fatalf("lost before start: %v", err)
	}
}

func TestUnderLockSignals(t *testing.T) {
	// A test run under nohup (or any parent that ignores SIGHUP) starts
	// with SIGHUP ignored, and an ignored signal stays ignored in the
	// children, where no trap can catch it. The command itself catches
	// the signals it forwards before it starts COMMAND (catchSignals),
	// which gives the child the default disposition; do the same here.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	l, _ := testLease()
	sigs := make(chan os.Signal, 1)
	res := started(t, l, `trap 'exit 5' HUP; echo ready; while :; do sleep 0.05; done`, childOpts{}, sigs)
	sigs <- syscall.SIGHUP
	select {
	case err := <-res:
		if exitCodeOf(err) != 5 {
			t.Fatalf("err %v, want the command's 5", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("signal not forwarded")
	}

	// A signal the command does not catch ends it: 128+signal.
	res = started(t, l, `echo ready; while :; do sleep 0.05; done`, childOpts{}, sigs)
	sigs <- syscall.SIGTERM
	if err := <-res; exitCodeOf(err) != 128+int(syscall.SIGTERM) {
		t.Fatalf("err %v, want %d", err, 128+int(syscall.SIGTERM))
	}
}
