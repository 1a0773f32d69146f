package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/zklock"
)

func init() {
	register(command{name: "run", summary: "run a command while holding a lock", run: runCmd})
}

const runUsage = `Usage:
  distlock run --lock NAME [--etcd ENDPOINTS | --zk SERVERS] [--ttl D]
               [--wait D | --no-wait] [--grace D] [--shell] -- COMMAND [ARGS...]

Runs COMMAND only while holding the lock NAME, then releases it. COMMAND
gets DISTLOCK_LOCK (the name), DISTLOCK_TOKEN (the fencing token, NAME@N:
pass it with every write to the protected resource) and DISTLOCK_HOLDER
(what the lock entry says about its holder) in its environment.

If the lock is lost while COMMAND runs, COMMAND's process group gets
SIGTERM, then SIGKILL after --grace, and distlock exits 76. SIGINT, SIGTERM
and SIGHUP are passed on to COMMAND; while still waiting for the lock they
cancel the wait (distlock exits 128+signal, leaving no entry behind).

Examples:
  # one backup at a time across the fleet, waiting as long as it takes
  distlock run --lock backup --etcd 10.0.0.1:2379,10.0.0.2:2379 -- /usr/local/bin/backup --full

  # skip this run if another host is at it (exit 75)
  distlock run --lock reindex --zk zk1:2181 --no-wait -- ./reindex.sh

  # give up after a minute; a shell pipeline with the token
  distlock run --lock deploy --wait 1m --shell -- 'echo "$DISTLOCK_TOKEN" | deploy --fence -'

Flags:
`

func runCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var (
		conn   connFlags
		name   string
		wait   time.Duration
		noWait bool
		shell  bool
		grace  time.Duration
	)
	conn.register(fs)
	fs.StringVar(&name, "lock", "", "the lock's name (required), e.g. backup or team/job")
	fs.DurationVar(&wait, "wait", 0, "give up (exit 75) if the lock is not acquired within this long (default: wait as long as it takes)")
	fs.BoolVar(&noWait, "no-wait", false, "do not wait: exit 75 at once if the lock is held")
	fs.BoolVar(&shell, "shell", false, `run sh -c "COMMAND ARGS" instead of exec'ing COMMAND`)
	fs.DurationVar(&grace, "grace", 0, "after the lock is lost: time between SIGTERM and SIGKILL to the command; must be below --ttl (default half the --ttl)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, runUsage)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			fmt.Fprintf(stdout, "\n%s", exitCodes)
			return nil
		}
		return usageErr("run: %v; see 'distlock run --help'", err)
	}
	argv := fs.Args()
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case name == "":
		return usageErr("run: no --lock NAME; say which lock to hold, e.g. distlock run --lock backup -- CMD")
	case len(argv) == 0:
		return usageErr("run: no command; put it after --, e.g. distlock run --lock %s -- CMD ARGS", name)
	case noWait && set["wait"]:
		return usageErr("run: --wait and --no-wait both given; choose one")
	case wait < 0 || set["wait"] && wait == 0:
		return usageErr("run: --wait %v: want a positive duration (or --no-wait)", wait)
	}
	if err := distlock.ValidateName(name); err != nil {
		return usageErr("run: --lock %q: %s; use segments of letters, digits, '-', '_' and '.' separated by '/'", name, strings.TrimPrefix(err.Error(), "distlock: "))
	}
	if !set["grace"] {
		grace = conn.ttl / 2
	}
	switch {
	case grace < 0:
		return usageErr("run: --grace %v: want a duration ≥ 0", grace)
	case conn.ttl > 0 && grace >= conn.ttl:
		return usageErr("run: --grace %v is not below --ttl %v: the command would outlive the lock; lower --grace or raise --ttl", grace, conn.ttl)
	}

	sigs, stop := catchSignals()
	defer stop()

	// Until the lock is held, a signal cancels whatever is under way
	// (connecting, waiting) through wctx; got tells which signal it was.
	wctx, cancelWait := context.WithCancelCause(context.Background())
	defer cancelWait(nil)
	got := make(chan os.Signal, 1)
	watching, endWatch := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case s := <-sigs:
			got <- s
			cancelWait(fmt.Errorf("got %v", s))
		case <-watching.Done():
		}
	}()
	stopWatch := func() {
		endWatch()
		<-watched
	}
	defer stopWatch()
	signalled := func() error {
		select {
		case s := <-got:
			got <- s
			return signalExit(s, fmt.Sprintf("while waiting for lock %q", name))
		default:
			return nil
		}
	}

	b, err := conn.open(wctx)
	if err != nil {
		if serr := signalled(); serr != nil {
			return serr
		}
		return err
	}
	defer b.Close()
	holder := holderValue("distlock run")
	s, err := b.session(wctx, holder, nil)
	if err != nil {
		if serr := signalled(); serr != nil {
			return serr
		}
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), conn.timeout)
		defer cancel()
		_ = s.Close(ctx)
	}()
	m, err := b.mutex(s, name)
	if err != nil {
		return err
	}

	errWaitElapsed := fmt.Errorf("--wait %v elapsed", wait)
	var lease *distlock.Lease
	elapsed := false
	if noWait {
		lease, err = m.TryLock(wctx)
	} else {
		lctx, cancel := wctx, context.CancelFunc(func() {})
		if wait > 0 {
			lctx, cancel = context.WithTimeoutCause(wctx, wait, errWaitElapsed)
		}
		lease, err = m.Lock(lctx)
		elapsed = wait > 0 && errors.Is(context.Cause(lctx), errWaitElapsed)
		cancel()
	}
	stopWatch()
	if serr := signalled(); serr != nil {
		if lease != nil {
			unlock(lease, conn.timeout, stderr)
		}
		return serr
	}
	switch {
	case err == nil:
	case errors.Is(err, distlock.ErrLocked):
		return exit(exitNotAcquired, fmt.Errorf("lock %q not acquired (--no-wait): %s%s", name, lockCause(err), zkHolder(b, name, conn.timeout)))
	case errors.Is(err, errWaitElapsed) || elapsed:
		return exit(exitNotAcquired, fmt.Errorf("lock %q not acquired: still held after --wait %v", name, wait))
	default:
		return exit(exitUnreachable, fmt.Errorf("lock %q not acquired: %s", name, lockCause(err)))
	}

	cerr := underLock(context.Background(), lease, argv, childOpts{
		shell:  shell,
		env:    []string{"DISTLOCK_HOLDER=" + holder},
		grace:  grace,
		stdout: stdout,
		stderr: stderr,
	}, sigs)
	unlock(lease, conn.timeout, stderr)
	return cerr
}

// zkHolder describes the holder of lock name on ZooKeeper, whose TryLock
// error names only the holder's node (etcd's has its value already).
func zkHolder(b *backend, name string, timeout time.Duration) string {
	if b.kind != "zk" {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	q, err := zklock.Inspect(ctx, b.zk, b.prefix, name)
	if err != nil || len(q) == 0 || q[0].Holder == "" {
		return ""
	}
	return fmt.Sprintf("; holder %q", q[0].Holder)
}

// unlock releases lease, warning on stderr if that fails (the entry then
// goes when the session ends: at once when distlock closes it, or after
// the TTL).
func unlock(lease *distlock.Lease, timeout time.Duration, stderr io.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := lease.Unlock(ctx); err != nil && !errors.Is(err, distlock.ErrLost) {
		fmt.Fprintf(stderr, "distlock: warning: unlock: %s\n", oneLine(strings.TrimPrefix(err.Error(), "distlock: ")))
	}
}
