package main

// The part of running a command under a lock that distlock run and
// distlock once share: catch the signals that stop distlock, start the
// command in its own process group (one that dies with distlock on Linux:
// group_linux.go), forward signals to it, stop it when the lock is lost,
// and turn how it ended into distlock's exit code.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/distlock/distlock"
)

// forwarded are the signals distlock catches: while it waits for a lock
// they cancel the wait, while the command runs they are passed on to it.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// catchSignals starts catching SIGINT, SIGTERM and SIGHUP (signal.Notify):
// from now on they no longer kill distlock but arrive on sigs. Call it
// before connecting, so that a signal during the connection or the wait for
// the lock can be honoured (cancel the wait, exit 128+signal; see
// signalExit), and pass sigs to underLock once the lock is held. stop
// undoes the Notify; call it (deferred) when distlock is done.
func catchSignals() (sigs <-chan os.Signal, stop func()) {
	ch := make(chan os.Signal, 8)
	signal.Notify(ch, forwarded...)
	return ch, func() { signal.Stop(ch) }
}

// signalExit is the error for a distlock that gives up because of sig
// (while connecting or waiting for a lock): exit code 128+signal number,
// and a one-line message saying what was given up.
func signalExit(sig os.Signal, what string) error {
	n := 1
	if s, ok := sig.(syscall.Signal); ok {
		n = int(s)
	}
	return exit(128+n, fmt.Errorf("got %s %s; gave up, nothing left behind", sigName(sig), what))
}

// sigName is SIGINT for os.Interrupt, and so on.
func sigName(sig os.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	}
	return sig.String()
}

// lockCause is err's message without the "distlock: lock NAME: OP:" of a
// *distlock.LockError, for messages that name the lock already.
func lockCause(err error) string {
	var le *distlock.LockError
	if errors.As(err, &le) && le.Err != nil {
		return le.Err.Error()
	}
	return strings.TrimPrefix(err.Error(), "distlock: ")
}

// causeAfter is err's message from what follows sentinel's own text (":
// " and the reason), for messages that name the flag and value already;
// without sentinel (or if it is not in the message), the message less
// the library's "distlock: " prefix.
func causeAfter(err, sentinel error) string {
	msg := err.Error()
	if sentinel != nil {
		if _, after, ok := strings.Cut(msg, sentinel.Error()+": "); ok {
			return after
		}
	}
	return strings.TrimPrefix(msg, "distlock: ")
}

// childOpts says how underLock runs the command.
type childOpts struct {
	// shell runs sh -c "ARGV joined with spaces" instead of exec'ing
	// argv[0] directly.
	shell bool
	// env is added to distlock's own environment (after DISTLOCK_LOCK,
	// DISTLOCK_TOKEN, DISTLOCK_LOCKS and DISTLOCK_TOKENS, which underLock
	// sets from the lease; a later entry wins), e.g. DISTLOCK_HOLDER=...
	env []string
	// grace is how long the command has between SIGTERM and SIGKILL when
	// the lock is lost or ctx ends; keep it below the lock's TTL. Zero
	// sends SIGKILL right after SIGTERM.
	grace time.Duration
	// stdout and stderr receive the command's output; nil means distlock's
	// own (os.Stdout, os.Stderr). The command's stdin is distlock's.
	stdout, stderr io.Writer
}

// waitDelay bounds how long underLock waits, after the command exited, for
// output still being copied from processes it left behind (only when
// stdout or stderr is not an *os.File).
const waitDelay = 2 * time.Second

// underLock runs argv while lease is held and returns how it ended, as an
// error for main's exit code:
//
//   - nil when the command exited 0;
//   - silentExit(code) for its nonzero exit code, 128+signal number if a
//     signal ended it;
//   - exit(exitLost, ...) when the lock was lost (lease.Done closed) before
//     or while it ran: the command's process group got SIGTERM, then
//     SIGKILL after o.grace if it was still running; the message says why
//     the lock was lost (lease.Err());
//   - when the lock was revoked while it ran (a revocable session's
//     lease.Done closed with a *distlock.RevokedError), the command is
//     stopped the same way, but SIGKILL comes sooner than o.grace if the
//     revocation's grace period ends sooner (less a margin for the
//     release), and a line on stderr says who revoked and why. It is no
//     loss: the command's own code is returned, as for a forwarded signal,
//     and the caller releases the lock as usual; exitLost only if the
//     lock was lost as well before the command ended (the revocation was
//     forced). Revoked before the command started: exit(exitNotAcquired);
//     the command is not started;
//   - exit(exitNotFound, ...) when the command does not exist,
//     exit(exitCannotRun, ...) when it exists but cannot be run;
//   - when ctx ends first, the command is stopped as on a loss and the
//     error wraps ctx's cause (exit code exitFailure).
//
// The command runs in a process group of its own (startInGroup: on
// Linux one that dies with distlock, however distlock dies, so that it
// never runs on once distlock's lock expires), with distlock's stdin, and with DISTLOCK_LOCK
// (the lock's name) and DISTLOCK_TOKEN (lease.Token().String()),
// DISTLOCK_LOCKS and DISTLOCK_TOKENS (every name and token of
// lease.Tokens(), space-separated: one of each but for a multi-lock's
// lease), plus o.env in its environment. The lock is lost when any of a
// multi-lock's entries is; messages name it by its names joined by "+". Signals arriving on sigs (see catchSignals)
// are forwarded to its process group; distlock then exits with whatever
// code the command ends with. underLock does not unlock the lease: the
// caller does that once it returns.
func underLock(ctx context.Context, lease *distlock.Lease, argv []string, o childOpts, sigs <-chan os.Signal) error {
	if len(argv) == 0 {
		return usageErr("no command to run: put it after --, e.g. -- CMD ARGS")
	}
	tok, toks := lease.Token(), lease.Tokens()
	// The lock, in messages: its name, or a multi-lock's names joined by
	// "+" (as its errors name it).
	label := leaseLabel(lease)
	if err := lease.Err(); err != nil {
		if re := (*distlock.RevokedError)(nil); errors.As(err, &re) {
			return exit(exitNotAcquired, fmt.Errorf("lock %q revoked before the command started; not started, the lock is released: %s", label, revokedBy(re)))
		}
		return lostErr(label, err, false)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("command not started: %w", context.Cause(ctx))
	}

	var cmd *exec.Cmd
	if o.shell {
		cmd = exec.Command("sh", "-c", strings.Join(argv, " "))
	} else {
		cmd = exec.Command(argv[0], argv[1:]...)
	}
	if cmd.Err != nil {
		return startErr(argv[0], cmd.Err)
	}
	names, tokens := make([]string, len(toks)), make([]string, len(toks))
	for i, t := range toks {
		names[i], tokens[i] = t.Name, t.String()
	}
	cmd.Env = append(os.Environ(), "DISTLOCK_LOCK="+tok.Name, "DISTLOCK_TOKEN="+tok.String(),
		"DISTLOCK_LOCKS="+strings.Join(names, " "), "DISTLOCK_TOKENS="+strings.Join(tokens, " "))
	if d := lease.Deadline(); !d.IsZero() {
		// As of COMMAND's start: keepalives only move it later, and a
		// loss before it reaches COMMAND as SIGTERM.
		cmd.Env = append(cmd.Env, "DISTLOCK_DEADLINE="+d.UTC().Format(time.RFC3339Nano))
	}
	cmd.Env = append(cmd.Env, o.env...)
	cmd.Stdin = os.Stdin
	cmd.Stdout, cmd.Stderr = o.stdout, o.stderr
	if cmd.Stdout == nil {
		cmd.Stdout = os.Stdout
	}
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	cmd.WaitDelay = waitDelay
	g, err := startInGroup(cmd)
	if ge := (*guardError)(nil); errors.As(err, &ge) {
		return exit(exitCannotRun, fmt.Errorf("%s: not started: %v", argv[0], ge))
	} else if err != nil {
		return startErr(argv[0], err)
	}
	defer g.release() // once underLock is done signalling the group
	pgid := g.pgid
	group := func(sig syscall.Signal) { _ = syscall.Kill(-pgid, sig) }

	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	var (
		lost     error                  // why the lock was lost, once it was
		stopped  error                  // ctx's cause, once ctx ended
		revoked  *distlock.RevokedError // the revocation, once one came
		kill     <-chan time.Time
		leaseEnd = lease.Done()
		ctxEnd   = ctx.Done()
	)
	terminateIn := func(grace time.Duration) {
		group(syscall.SIGTERM)
		if grace <= 0 {
			group(syscall.SIGKILL)
			return
		}
		t := time.NewTimer(grace)
		kill = t.C
	}
	terminate := func() { terminateIn(o.grace) }
	for {
		select {
		case err := <-done:
			if lost == nil && stopped == nil {
				// The lock may have gone just as the command ended (or a
				// revocation was forced): its work may not have been
				// exclusive, so say so.
				if err := lease.Err(); errors.Is(err, distlock.ErrLost) {
					lost = err
				}
			}
			if lost != nil || stopped != nil || revoked != nil {
				// Whatever the command left in its group must not go on
				// without the lock (or once it is released).
				group(syscall.SIGKILL)
			}
			if lost != nil && revoked != nil {
				return exit(exitLost, fmt.Errorf("lock %q revoked, then lost before the command ended; the command was stopped: %s", label, lockCause(lost)))
			}
			if lost != nil {
				return lostErr(label, lost, true)
			}
			if stopped != nil {
				return fmt.Errorf("command stopped: %w", stopped)
			}
			return exitStatus(err)
		case sig := <-sigs:
			if s, ok := sig.(syscall.Signal); ok {
				group(s)
			}
		case <-leaseEnd:
			leaseEnd = nil
			if lost != nil || stopped != nil {
				break
			}
			why := lease.Err()
			if errors.As(why, &revoked) {
				// Not a loss: the lock is still held. Stop the command
				// as on one, but release before the revocation's grace
				// period ends, so that it need not be forced.
				grace := revokeKillAfter(o.grace, revoked.Revocation, time.Now())
				fmt.Fprintf(distlockStderr(o), "distlock: lock %q revoked: %s; stopping the command (SIGTERM now, SIGKILL after %v if it is still running), then releasing the lock\n", label, revokedBy(revoked), grace.Round(10*time.Millisecond))
				terminateIn(grace)
				break
			}
			lost = why
			if lost == nil {
				lost = distlock.ErrLost
			}
			terminate()
		case <-ctxEnd:
			ctxEnd = nil
			if lost == nil && stopped == nil {
				stopped = context.Cause(ctx)
				if revoked == nil { // else stopping already, on the revocation's clock
					terminate()
				}
			}
		case <-kill:
			kill = nil
			group(syscall.SIGKILL)
		}
	}
}

// leaseLabel names lease's lock in messages: its token's name, or a
// multi-lock's names joined by "+", as its errors name it.
func leaseLabel(lease *distlock.Lease) string {
	toks := lease.Tokens()
	names := make([]string, len(toks))
	for i, t := range toks {
		names[i] = t.Name
	}
	return strings.Join(names, "+")
}

// revokeMargin is how long before a revocation's grace period ends the
// command is killed at the latest, for the release after it: a quarter of
// the grace period, at most a second.
func revokeMargin(grace time.Duration) time.Duration { return min(time.Second, grace/4) }

// revokeKillAfter is how long a revoked command has between SIGTERM and
// SIGKILL: the stop grace, or less when the revocation's grace period
// (by the revoker's clock) ends sooner.
func revokeKillAfter(stopGrace time.Duration, r distlock.Revocation, now time.Time) time.Duration {
	left := r.GraceEnds().Add(-revokeMargin(r.Grace)).Sub(now)
	return max(min(stopGrace, left), 0)
}

// revokedBy says who revoked and why, and when the grace period ends.
func revokedBy(r *distlock.RevokedError) string {
	return fmt.Sprintf("by %s: %q (grace %v, ends %s)", r.By, r.Reason, r.Grace, r.GraceEnds().UTC().Format(time.RFC3339))
}

// distlockStderr is where underLock says what distlock does: the
// command's stderr, which is distlock's unless the caller chose another.
func distlockStderr(o childOpts) io.Writer {
	if o.stderr != nil {
		return o.stderr
	}
	return os.Stderr
}

// lostErr is the exitLost error for lock name, lost because of why.
func lostErr(name string, why error, ran bool) error {
	msg := lockCause(why)
	if ran {
		return exit(exitLost, fmt.Errorf("lock %q lost while the command ran; the command was stopped: %s", name, msg))
	}
	return exit(exitLost, fmt.Errorf("lock %q lost before the command started; not started: %s", name, msg))
}

// startErr is the error for a command that could not be started: exit
// code exitNotFound when it does not exist, exitCannotRun otherwise.
func startErr(name string, err error) error {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return exit(exitNotFound, fmt.Errorf("%s: command not found", name))
	}
	return exit(exitCannotRun, fmt.Errorf("%s: cannot run: %v", name, err))
}

// exitStatus turns cmd.Wait's error into distlock's: nil for exit 0, the
// command's code otherwise (128+signal number if a signal ended it).
func exitStatus(err error) error {
	if err == nil {
		return nil
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		// exec.ErrWaitDelay: the command exited 0 but left processes
		// holding its output open; or an I/O error copying output.
		return err
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return silentExit(128 + int(ws.Signal()))
	}
	return silentExit(ee.ExitCode())
}
