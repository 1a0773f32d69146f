package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
	"github.com/distlock/distlock/fencing/etcdfence"
	"github.com/distlock/distlock/fencing/zkfence"
	"github.com/distlock/distlock/internal/backend"
	"github.com/distlock/distlock/internal/zkctx"
	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func init() {
	register(command{name: "once", summary: "run a command once per slot across all servers", run: onceCmd})
}

const onceUsage = `Usage:
  distlock once --lock NAME (--slot SLOT | --every SCHEDULE [--tz ZONE])
                [--etcd ENDPOINTS | --zk SERVERS] [--at-most-once] [--wait D]
                [--grace D] [--shell] -- COMMAND [ARGS...]

Runs COMMAND once per SLOT across every server that runs the same line:
put the same cron entry on all of them, and the first to get the lock NAME
runs COMMAND for SLOT; the others, once they get the lock, find SLOT done
and exit 0 without running it ("slot SLOT already done by ...").

Under the lock, distlock reads SLOT's done-marker. If it is there, nothing
runs. Otherwise it runs COMMAND and writes the marker, in one of two modes:

  at-least-once (default)
      run COMMAND first; only if it exits 0, write the marker. A COMMAND that
      fails or crashes, or a server that dies, leaves no marker, so the next
      run (on any server) runs COMMAND again for SLOT. COMMAND may run more
      than once for a slot if the lock is lost between its end and the
      marker: make it safe to repeat.
  --at-most-once
      write the marker first, then run COMMAND. If COMMAND fails or the
      server dies midway, the slot still counts as done: nobody retries.
      distlock still exits with COMMAND's exit code.

--every names the slot from the schedule the job runs on, so that servers
whose clocks differ a little, or whose cron starts them a little late,
agree on it: "hourly" (slots like 2026-12-01T08), "daily" (2026-12-01),
or a five-field cron expression (its latest fire time at or before now,
in UTC minutes: 2026-12-01T05:30Z). --tz is the zone the schedule is in
(default UTC): give the fleet's business zone, the same on every server.
A run that starts early, before its slot by the server's clock, names
the previous slot: keep clocks synchronized.

The marker is written through a fence with the lock's fencing token, in
the same transaction as a check that the lock entry still exists: a
distlock that lost the lock (paused, cut off, its lease or session expired)
cannot mark the slot, and a token older than one already seen is refused.

Where the markers live (PREFIX is --prefix: /distlock/ on etcd, /distlock
on ZooKeeper; '@' never occurs in lock names or slots, so these never
collide with a lock's entries or another lock's markers):
  etcd       key   PREFIX@once/NAME/@slot/SLOT    the marker (a JSON value)
             key   PREFIX@once/NAME/@fence        the fence (newest token)
  ZooKeeper  znode PREFIX/@once/NAME/@slot/SLOT   the marker (JSON data)
             znode PREFIX/@once/NAME/@fence       the fence
The marker is {"slot","token","holder","mode","marked"}. Markers are never
deleted by distlock: remove one (etcdctl del KEY, zkCli delete PATH) to let
a slot run again.

SLOT names the period or unit of work: 1 to 128 ASCII letters, digits, '.',
'_', '-' and ':', starting with a letter or digit (e.g. 2026-11-30,
2026-W48, daily:2026-11-30). COMMAND gets DISTLOCK_LOCK, DISTLOCK_TOKEN
(the fencing token, NAME@N), DISTLOCK_HOLDER and DISTLOCK_SLOT in its
environment. Signals and a lost lock are handled as by distlock run.

Examples:
  # the daily report, from the same crontab line on every server
  0 6 * * * distlock once --lock reports/daily --slot "$(date +\%F)" --etcd 10.0.0.1:2379 -- /usr/local/bin/daily-report

  # send the invoices at most once per month, even if sending fails midway
  distlock once --lock invoices --slot "$(date +%Y-%m)" --zk zk1:2181 --at-most-once -- ./send-invoices
  30 6 * * * distlock once --lock reports/daily --every '30 6 * * *' --tz Europe/Berlin -- ./daily-report

  # give up after 10 minutes if another server holds the lock that long (exit 75)
  distlock once --lock rebuild --slot 2026-11-30 --wait 10m --shell -- 'make -C /srv/site && rsync ...'

Exit status: 0 when COMMAND ran and succeeded or SLOT was already done;
otherwise COMMAND's own code, or one of the codes below.

Flags:
`

// onceMarker is the value of a done-marker.
type onceMarker struct {
	Slot   string    `json:"slot"`
	Token  string    `json:"token"`
	Holder string    `json:"holder"`
	Mode   string    `json:"mode"`
	Marked time.Time `json:"marked"`
}

func (m *onceMarker) String() string {
	return fmt.Sprintf("%s (token %s, %s, marked %s)", m.Holder, m.Token, m.Mode, m.Marked.UTC().Format(time.RFC3339))
}

// parseMarker reads a marker's value; one not written by distlock is
// described as it is.
func parseMarker(v []byte) *onceMarker {
	var m onceMarker
	if err := json.Unmarshal(v, &m); err != nil || m.Token == "" {
		return &onceMarker{Holder: fmt.Sprintf("%q", v), Token: "unknown", Mode: "unknown mode"}
	}
	return &m
}

// errMarked is a marker write that found the slot marked by someone else.
type errMarked struct{ m *onceMarker }

func (e *errMarked) Error() string { return "already marked by " + e.m.String() }

// slotStore reads and writes the done-markers of one lock. The markers
// are written through the backend's own fence (etcdfence, zkfence) in
// the backend's own transaction, so this is the one part of the command
// that has code for each backend.
type slotStore struct {
	b      *backend.Client
	name   string
	base   string // PREFIX@once/NAME (etcd) or PREFIX/@once/NAME (ZooKeeper)
	marker string // base/@slot/SLOT
}

func newSlotStore(b *backend.Client, name, slot string) *slotStore {
	base := b.Prefix() + "@once/" + name
	if b.Kind() != backend.Etcd {
		base = b.Prefix() + "/@once/" + name
	}
	return &slotStore{b: b, name: name, base: base, marker: base + "/@slot/" + slot}
}

func (s *slotStore) fenceKey() string { return s.base + "/@fence" }

// done returns the slot's marker, or nil if there is none. The read sees
// every write committed before it (etcd: linearizable; ZooKeeper: after a
// sync).
func (s *slotStore) done(ctx context.Context) (*onceMarker, error) {
	if s.b.Kind() == backend.Etcd {
		resp, err := s.b.Etcd().Get(ctx, s.marker)
		if err != nil {
			return nil, err
		}
		if len(resp.Kvs) == 0 {
			return nil, nil
		}
		return parseMarker(resp.Kvs[0].Value), nil
	}
	conn := s.b.ZK()
	if _, err := zkctx.Call(ctx, func() (string, error) { return conn.Sync(s.marker) }); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return nil, err
	}
	data, err := zkctx.Call(ctx, func() ([]byte, error) {
		d, _, err := conn.Get(s.marker)
		return d, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return parseMarker(data), nil
}

// errNotHolder is a marker write refused because the lock is no longer
// ours: its entry is gone or a newer token passed the fence.
var errNotHolder = errors.New("the lock is no longer held by this distlock")

// mark writes the slot's marker through the fence with the lease's token,
// in one transaction that also requires the lock entry to still exist. It
// returns an error wrapping errNotHolder when the lock was lost, and an
// *errMarked when the marker exists already.
func (s *slotStore) mark(ctx context.Context, lease *distlock.Lease, m *onceMarker) error {
	tok := lease.Token()
	if err := lease.Err(); err != nil {
		return fmt.Errorf("%w: %w", errNotHolder, err)
	}
	value, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if s.b.Kind() == backend.Etcd {
		return s.markEtcd(ctx, tok, value)
	}
	return s.markZK(ctx, tok, value)
}

func (s *slotStore) markEtcd(ctx context.Context, tok distlock.Token, value []byte) error {
	cli := s.b.Etcd()
	f, err := etcdfence.New(cli, s.fenceKey(), s.name)
	if err != nil {
		return err
	}
	lockKey, err := etcdfence.HolderKey(ctx, cli, s.b.Prefix(), tok)
	if errors.Is(err, etcdfence.ErrNotHeld) {
		return fmt.Errorf("%w: %w", errNotHolder, err)
	}
	if err != nil {
		return err
	}
	put := clientv3.OpTxn(
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(s.marker), "=", 0)},
		[]clientv3.Op{clientv3.OpPut(s.marker, string(value))},
		[]clientv3.Op{clientv3.OpGet(s.marker)})
	resp, err := f.WriteHeld(ctx, tok, lockKey, put)
	if errors.Is(err, etcdfence.ErrNotHeld) || errors.Is(err, fencing.ErrStale) || errors.Is(err, fencing.ErrFork) {
		return fmt.Errorf("%w: %w", errNotHolder, err)
	}
	if err != nil {
		return err
	}
	in := resp.Responses[0].GetResponseTxn()
	if !in.Succeeded {
		var v []byte
		if kvs := in.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			v = kvs[0].Value
		}
		return &errMarked{parseMarker(v)}
	}
	return nil
}

func (s *slotStore) markZK(ctx context.Context, tok distlock.Token, value []byte) error {
	conn, acl := s.b.ZK(), s.b.ACL()
	f, err := zkfence.New(conn, s.fenceKey(), s.name, zkfence.WithACL(acl...))
	if err != nil {
		return err
	}
	// The holder's node: the entry whose czxid is the token.
	q, err := s.b.Inspect(ctx, s.name)
	if err != nil {
		return err
	}
	node := ""
	for _, e := range q {
		if e.Token == tok {
			node = e.Key
		}
	}
	if node == "" {
		return fmt.Errorf("%w: no entry with token %v in the lock's queue", errNotHolder, tok)
	}
	// The marker's parent, and its own (the fence creates those of the
	// fence node, which are the same up to base).
	dir := s.base + "/@slot"
	for i := 1; i <= len(dir); i++ {
		if i < len(dir) && dir[i] != '/' {
			continue
		}
		p := dir[:i]
		if _, err := zkctx.Call(ctx, func() (string, error) { return conn.Create(p, nil, 0, acl) }); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", p, err)
		}
	}
	_, err = f.Write(ctx, tok,
		&zk.CheckVersionRequest{Path: node, Version: -1}, // the lock entry still exists
		&zk.CreateRequest{Path: s.marker, Data: value, Acl: acl})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fencing.ErrStale), errors.Is(err, fencing.ErrFork), errors.Is(err, zk.ErrNoNode):
		return fmt.Errorf("%w: %w", errNotHolder, err)
	case errors.Is(err, zk.ErrNodeExists):
		m, rerr := s.done(ctx)
		if rerr != nil || m == nil {
			m = &onceMarker{Holder: "another run", Token: "unknown", Mode: "unknown mode"}
		}
		return &errMarked{m}
	}
	return err
}

func onceCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("once", flag.ContinueOnError)
	c := &lockCmd{cmd: "once"}
	c.register(fs, "reports/daily", false)
	var (
		slot, every, tz string
		atMostOnce      bool
	)
	fs.StringVar(&slot, "slot", "", "the slot COMMAND runs once for, e.g. 2026-11-30 (or --every)")
	fs.StringVar(&every, "every", "", "name the slot from this schedule instead: hourly, daily or a cron expression")
	fs.StringVar(&tz, "tz", "UTC", "with --every: the time zone of the schedule")
	fs.BoolVar(&atMostOnce, "at-most-once", false, "mark the slot done before running COMMAND: a failure or crash midway is not retried")
	argv, help, err := c.parse(fs, args, onceUsage, stdout)
	if help || err != nil {
		return err
	}
	name := c.name
	switch {
	case name == "":
		return usageErr("once: no --lock NAME; e.g. distlock once --lock reports/daily --slot 2026-11-30 -- CMD")
	case c.set["slot"] && c.set["every"]:
		return usageErr("once: --slot and --every both given; the slot is one or the other")
	case c.set["tz"] && !c.set["every"]:
		return usageErr("once: --tz goes with --every")
	case !c.set["slot"] && !c.set["every"]:
		return usageErr("once: no --slot SLOT or --every SCHEDULE; e.g. --slot \"$(date +%%F)\" or --every daily")
	case len(argv) == 0:
		return usageErr("once: no command; put it after --, e.g. distlock once --lock %s --slot %s -- CMD ARGS", name, slot)
	}
	if err := c.check(); err != nil {
		return err
	}
	if c.set["every"] {
		s, err := schedule(every, tz)
		if err != nil {
			return usageErr("once: %v", err)
		}
		if slot = s.Slot(time.Now()); slot == "" {
			return usageErr("once: --every %q: no fire time in the last five years", every)
		}
	}
	if err := distlock.ValidateSlot(slot); err != nil {
		return usageErr("once: --slot: %v", err)
	}
	mode := "at-least-once"
	if atMostOnce {
		mode = "at-most-once"
	}

	h, err := c.acquire(holderValue("distlock once --slot "+slot), stderr)
	if err != nil {
		return err
	}
	defer h.release()
	b, lease, holder, conn := h.b, h.lease, h.holder, &c.conn

	store := newSlotStore(b, name, slot)
	rctx, rcancel := context.WithTimeout(lease.Context(), conn.timeout)
	prev, err := store.done(rctx)
	rcancel()
	if err != nil {
		if lerr := lease.Err(); lerr != nil {
			return lostErr(name, lerr, false)
		}
		return exit(exitUnreachable, fmt.Errorf("once: read the marker of slot %q: %w%s", slot, err, b.AuthHint(err)))
	}
	if prev != nil {
		fmt.Fprintf(stdout, "slot %s already done by %s\n", slot, prev)
		return nil
	}

	marker := func() error {
		mctx, mcancel := context.WithTimeout(context.Background(), conn.timeout)
		defer mcancel()
		return store.mark(mctx, lease, &onceMarker{Slot: slot, Token: lease.Token().String(), Holder: holder, Mode: mode, Marked: time.Now().UTC()})
	}
	run := func() error {
		return c.run(h, argv, []string{"DISTLOCK_SLOT=" + slot}, stdout, stderr)
	}

	if atMostOnce {
		var done *errMarked
		switch err := marker(); {
		case errors.As(err, &done):
			fmt.Fprintf(stdout, "slot %s already done by %s\n", slot, done.m)
			return nil
		case errors.Is(err, errNotHolder):
			return exit(exitLost, fmt.Errorf("lock %q lost before slot %q was marked; the command was not run: %v", name, slot, err))
		case err != nil:
			return exit(exitUnreachable, fmt.Errorf("once: mark slot %q: %w; the command was not run", slot, err))
		}
		return run()
	}

	if err := run(); err != nil {
		return err // no marker: the next run tries again
	}
	var done *errMarked
	switch err := marker(); {
	case errors.As(err, &done):
		fmt.Fprintf(stderr, "distlock: warning: the command succeeded, but slot %s had been marked meanwhile by %s\n", slot, done.m)
	case errors.Is(err, errNotHolder):
		return exit(exitLost, fmt.Errorf("lock %q lost after the command succeeded; slot %q is NOT marked done, so it may run again: %v", name, slot, err))
	case err != nil:
		return exit(exitUnreachable, fmt.Errorf("the command succeeded, but slot %q could not be marked done, so it may run again: %w", slot, err))
	}
	return nil
}

// schedule is the distlock.Schedule --every and --tz name.
func schedule(every, tz string) (distlock.Schedule, error) {
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("--tz %q: %v", tz, err)
	}
	switch every {
	case "hourly":
		return distlock.Hourly(loc), nil
	case "daily":
		return distlock.Daily(loc), nil
	}
	s, err := distlock.Cron(every, loc)
	if err != nil {
		return nil, fmt.Errorf("--every %q: not hourly, daily or a cron expression: %v", every, err)
	}
	return s, nil
}
