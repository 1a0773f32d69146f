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
	"github.com/distlock/distlock/cmd/internal/backend"
)

// lockCmd is what run and once share: the cluster and lock flags, their
// checks, taking the lock while honouring signals, and releasing it.
type lockCmd struct {
	cmd  string // the subcommand, for messages
	conn connFlags
	// name is the lock's name (--lock); with several --lock (run), the
	// names sorted and joined by "+", as the multi-lock's errors name it.
	name string
	// names are the --lock names as given (several: run only; see
	// multiLock), sorted by check.
	names     lockNames
	multiLock bool // --lock may be given several times (run)
	wait      time.Duration
	noWait    bool
	shell     bool
	grace     time.Duration
	// permits, when above 0, makes the lock a semaphore of that many
	// permits (run --permits).
	permits int
	// revocable makes the holder follow revocations (run --revocable):
	// the command is stopped, and the lock released, when an operator
	// revokes it (distlock revoke).
	revocable bool
	// compat is the lock's compatibility mode (run --compat): its entry
	// named as that foreign client's recipe names its own.
	compat distlock.Compat
	set    map[string]bool // the flags given
}

// register adds the flags to fs; noWait says whether --no-wait is offered.
func (c *lockCmd) register(fs *flag.FlagSet, example string, noWait bool) {
	c.conn.register(fs)
	c.conn.registerSession(fs)
	if c.multiLock {
		fs.Var(&c.names, "lock", "the lock's `NAME` (required), e.g. "+example+"; give it several times to hold several locks at once (all or none, deadlock-free)")
	} else {
		fs.Var(&c.names, "lock", "the lock's `NAME` (required), e.g. "+example)
	}
	fs.DurationVar(&c.wait, "wait", 0, "give up (exit 75) if the lock is not acquired within this long (default: wait as long as it takes)")
	if noWait {
		fs.BoolVar(&c.noWait, "no-wait", false, "do not wait: exit 75 at once if the lock is held")
	}
	fs.BoolVar(&c.shell, "shell", false, `run sh -c "COMMAND ARGS" instead of exec'ing COMMAND`)
	fs.DurationVar(&c.grace, "grace", 0, "when the lock is lost (or revoked): time between SIGTERM and SIGKILL to COMMAND; must be below --ttl (default half the --ttl)")
}

// parse parses args; help is true when --help was asked for and printed.
func (c *lockCmd) parse(fs *flag.FlagSet, args []string, usage string, stdout, stderr io.Writer) (argv []string, help bool, err error) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printHelp(stdout, c.cmd, usage, fs)
			return nil, true, nil
		}
		return nil, false, usageErr("%v; see 'distlock %s --help'", err, c.cmd)
	}
	c.conn.noteSet(fs)
	c.set = c.conn.set
	c.conn.logOut = stderr
	if len(c.names) > 0 {
		c.name = c.names[0]
	}
	return fs.Args(), false, nil
}

// lockNames is a --lock that may be given several times.
type lockNames []string

func (l *lockNames) String() string {
	if l == nil {
		return ""
	}
	return strings.Join(*l, " ")
}

func (l *lockNames) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// multi says whether several locks were asked for (run --lock A --lock B).
func (c *lockCmd) multi() bool { return len(c.names) > 1 }

// checkNames checks the lock names: each valid, none twice, at most
// distlock.MaxMultiNames; with several it sorts them and names the lock
// by them joined with "+".
func (c *lockCmd) checkNames() error {
	if !c.multi() {
		if err := distlock.ValidateName(c.name); err != nil {
			return usageErr("--lock %q: %s; use segments of letters, digits, '-', '_' and '.' separated by '/'", c.name, lockCause(err))
		}
		return nil
	}
	seen := map[string]bool{}
	for _, n := range c.names {
		if err := distlock.ValidateName(n); err != nil {
			return usageErr("--lock %q: %s; use segments of letters, digits, '-', '_' and '.' separated by '/'", n, lockCause(err))
		}
		if seen[n] {
			return usageErr("--lock %q given twice; give each lock once", n)
		}
		seen[n] = true
	}
	if len(c.names) > distlock.MaxMultiNames {
		return usageErr("--lock given %d times: at most %d locks can be held at once", len(c.names), distlock.MaxMultiNames)
	}
	sorted, err := distlock.ValidateNames(c.names)
	if err != nil {
		return usageErr("--lock: %s", lockCause(err))
	}
	c.names, c.name = sorted, strings.Join(sorted, "+")
	return nil
}

// check checks the lock flags, and sets the default grace. The session's
// flags come first: --grace's default and check derive from --ttl.
func (c *lockCmd) check() error {
	if err := c.conn.checkSession(); err != nil {
		return err
	}
	switch {
	case c.noWait && c.set["wait"]:
		return usageErr("--wait and --no-wait both given; choose one")
	case c.wait < 0 || c.set["wait"] && c.wait == 0:
		return usageErr("--wait %v: want a positive duration", c.wait)
	}
	if err := c.checkNames(); err != nil {
		return err
	}
	if !c.set["grace"] {
		c.grace = c.conn.ttl / 2
	}
	switch {
	case c.grace < 0:
		return usageErr("--grace %v: want a duration ≥ 0", c.grace)
	case c.grace >= c.conn.ttl:
		return usageErr("--grace %v is not below --ttl %v: the command would outlive the lock; lower --grace or raise --ttl", c.grace, c.conn.ttl)
	}
	return nil
}

// held is a lock taken by acquire.
type held struct {
	lease  *distlock.Lease
	b      *backend.Client
	sess   *backend.Session
	holder string
	// sigs are the signals caught since acquire began, for underLock.
	sigs <-chan os.Signal
	// release unlocks (warning on stderr if that fails), closes the
	// session and the connection, and stops catching signals.
	release func()
}

// acquire connects and takes the lock, with entries that say holder.
// Signals (INT, TERM, HUP) are caught from the start: until the lock is
// held one cancels whatever is under way — connecting, waiting — and
// acquire returns exit 128+signal, leaving nothing behind; after that they
// are on h.sigs, for underLock to pass on.
func (c *lockCmd) acquire(holder string, stderr io.Writer) (h *held, err error) {
	sigs, stop := catchSignals()
	var cleanup []func()
	defer func() {
		if err != nil {
			for i := len(cleanup) - 1; i >= 0; i-- {
				cleanup[i]()
			}
			stop()
		}
	}()

	// Until the lock is held, a signal cancels wctx; got keeps it.
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
	signalled := func(err error) error {
		select {
		case s := <-got:
			got <- s
			return signalExit(s, fmt.Sprintf("while waiting for lock %q", c.name))
		default:
			return err
		}
	}

	b, err := c.conn.open(wctx)
	if err != nil {
		return nil, signalled(err)
	}
	cleanup = append(cleanup, b.Close)
	var sopts []backend.SessionOption
	if c.revocable {
		sopts = append(sopts, backend.Revocable())
	}
	s, err := session(wctx, b, holder, sopts...)
	if err != nil {
		return nil, signalled(err)
	}
	cleanup = append(cleanup, func() {
		ctx, cancel := context.WithTimeout(context.Background(), c.conn.timeout)
		defer cancel()
		_ = s.Close(ctx)
	})
	var m distlock.Locker
	switch {
	case c.permits > 0:
		m, err = semaphore(s, c.name, c.permits)
	case c.multi():
		m, err = multiMutex(s, c.names)
	default:
		m, err = mutex(s, c.name, distlock.WithCompat(c.compat))
	}
	if err != nil {
		return nil, err
	}

	errWaitElapsed := fmt.Errorf("--wait %v elapsed", c.wait)
	var lease *distlock.Lease
	elapsed := false
	if c.noWait {
		lease, err = m.TryLock(wctx)
	} else {
		lctx, cancel := wctx, context.CancelFunc(func() {})
		if c.wait > 0 {
			lctx, cancel = context.WithTimeoutCause(wctx, c.wait, errWaitElapsed)
		}
		endProgress := showProgress(b, c.lockNames(), holder, stderr)
		lease, err = m.Lock(lctx)
		endProgress()
		elapsed = c.wait > 0 && errors.Is(context.Cause(lctx), errWaitElapsed)
		cancel()
	}
	stopWatch()
	if lease != nil {
		cleanup = append(cleanup, func() { unlock(lease, c.conn.timeout, stderr) })
	}
	if serr := signalled(nil); serr != nil {
		return nil, serr
	}
	switch {
	case err == nil:
	case errors.Is(err, distlock.ErrLocked):
		return nil, exit(exitNotAcquired, fmt.Errorf("lock %q not acquired (--no-wait): %s%s", c.name, lockCause(err), zkHolder(b, c.lockNames(), c.conn.timeout)))
	case errors.Is(err, distlock.ErrPermitsMismatch):
		return nil, exit(exitDataErr, fmt.Errorf("--permits %d: semaphore %q not acquired: %s; every line using it must give the same --permits", c.permits, c.name, lockCause(err)))
	case errors.Is(err, errWaitElapsed) || elapsed:
		return nil, exit(exitNotAcquired, fmt.Errorf("lock %q not acquired: still held after --wait %v", c.name, c.wait))
	default:
		return nil, exit(exitUnreachable, fmt.Errorf("lock %q not acquired: %s%s", c.name, lockCause(err), b.AuthHint(err)))
	}
	return &held{lease: lease, b: b, sess: s, holder: holder, sigs: sigs, release: func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
		stop()
	}}, nil
}

// run runs argv under h's lock (see underLock), with env added.
func (c *lockCmd) run(h *held, argv, env []string, stdout, stderr io.Writer) error {
	return underLock(context.Background(), h.lease, argv, childOpts{
		shell:  c.shell,
		env:    append([]string{"DISTLOCK_HOLDER=" + h.holder}, env...),
		grace:  c.grace,
		stdout: stdout,
		stderr: stderr,
	}, h.sigs)
}

// lockNames are the locks asked for: the one --lock, or the several
// (sorted).
func (c *lockCmd) lockNames() []string {
	if c.multi() {
		return c.names
	}
	return []string{c.name}
}

// zkHolder describes the holder of lock names[0] on ZooKeeper, whose
// TryLock error names only the holder's node (etcd's has its value
// already). Of several locks (a multi-lock's), it names the first that is
// held, and its holder.
func zkHolder(b *backend.Client, names []string, timeout time.Duration) string {
	if b.Kind() != backend.ZooKeeper {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for _, name := range names {
		q, err := b.Inspect(ctx, name)
		q = lockEntries(q)
		if err != nil || len(q) == 0 || q[0].Holder == "" {
			continue
		}
		if len(names) == 1 {
			return fmt.Sprintf("; holder %q", q[0].Holder)
		}
		return fmt.Sprintf("; holder of lock %q: %q", name, q[0].Holder)
	}
	return ""
}

// unlock releases lease, warning on stderr if that fails (the entry then
// goes when the session ends: at once when distlock closes it, or after
// the TTL).
func unlock(lease *distlock.Lease, timeout time.Duration, stderr io.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := lease.Unlock(ctx); err != nil && !errors.Is(err, distlock.ErrLost) && !errors.Is(err, distlock.ErrReleased) {
		fmt.Fprintf(stderr, "distlock: warning: unlock: %s\n", oneLine(strings.TrimPrefix(err.Error(), "distlock: ")))
	}
}
