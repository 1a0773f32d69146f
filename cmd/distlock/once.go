package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/schedule"
)

func init() {
	register(command{name: "once", summary: "run a command once per slot across all servers", run: onceCmd})
}

const onceUsage = `Usage:
  distlock once --lock NAME (--slot SLOT | --every SCHEDULE [--tz ZONE])
                [--etcd ENDPOINTS | --zk SERVERS] [--ttl D] [--at-most-once]
                [--wait D] [--grace D] [--shell] [--log-level LEVEL]
                -- COMMAND [ARGS...]

Runs COMMAND once per SLOT across every server that runs the same line:
put the same cron entry on all of them, and the first to get SLOT's lock
(NAME/once-SLOT, each ':' of SLOT written '-') runs COMMAND for SLOT; the
others, once they get the lock, find SLOT done and exit 0 without running
it ("slot SLOT already done by ...").

Each slot has a lock of its own, so that a server that dies mid-run delays
only its slot: its lock entry stays until its lease or session expires
(--ttl), then the next waiting server gets the lock, finds no marker and
runs COMMAND again (at-least-once), and a later slot's run takes another
lock and is not delayed at all. Give --ttl well below the time between two
fire times, less COMMAND's run time.

How long to wait for the lock (--wait): with --every, until the next fire
time of the schedule (the slot's end), then exit 75; with --slot, as long
as it takes.

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

The marker is written with the slot lock's fencing token, in the same
transaction as a check that the slot lock's entry still exists and SLOT
has no marker: a distlock that lost the lock (paused, cut off, its lease or
session expired) cannot mark the slot. (distlock.Once's callers that hold
NAME itself write through NAME's fence, @fence below, instead.)

Where the markers live (PREFIX is --prefix: /distlock/ on etcd, /distlock
on ZooKeeper; '@' never occurs in lock names or slots, so these never
collide with a lock's entries or another lock's markers):
  etcd       key   PREFIX@once/NAME/@slot/SLOT    the marker (a JSON value)
             key   PREFIX@once/NAME/@fence        the fence of NAME's tokens
             keys  PREFIX NAME/once-SLOT/@...     the slot lock's entries
  ZooKeeper  znode PREFIX/@once/NAME/@slot/SLOT   the marker (JSON data)
             znode PREFIX/@once/NAME/@fence       the fence of NAME's tokens
             znodes PREFIX/NAME/once-SLOT/@...    the slot lock's entries
The marker is {"slot","token","holder","mode","marked"}. Markers are never
deleted by distlock: remove one (etcdctl del KEY, zkCli delete PATH) to let
a slot run again.

SLOT names the period or unit of work: 1 to 128 ASCII letters, digits, '.',
'_', '-' and ':', starting with a letter or digit (e.g. 2026-11-30,
2026-W48, daily:2026-11-30). Signals and a lost lock are handled as by
distlock run, and so is distlock's own death, even by SIGKILL: COMMAND's
process group is killed with it at once (Linux; see distlock run --help).

Environment of COMMAND (added to distlock's own):
  DISTLOCK_LOCK      NAME, as given with --lock
  DISTLOCK_TOKEN     the fencing token of the slot's lock, NAME/once-SLOT@SEQ.OWNER,
                     e.g. reports/daily/once-2026-11-30@1042.694d7f0c8a1b2c3d
                     (the sequence number in decimal, then the etcd lease
                     or ZooKeeper session in hex): the token the marker is
                     written with
  DISTLOCK_SLOT      SLOT (from --slot, or --every's schedule)
  DISTLOCK_HOLDER    what the lock entry says about its holder: "HOST pid PID
                     distlock once --slot SLOT since TIME"
  DISTLOCK_DEADLINE  RFC 3339, UTC: the lock is surely held until then, as of
                     COMMAND's start (see distlock run --help)

Environment read (the cluster flags' defaults): ETCDCTL_ENDPOINTS,
ETCDCTL_CACERT, ETCDCTL_CERT, ETCDCTL_KEY, ETCDCTL_USER, ETCDCTL_PASSWORD
(as etcdctl), DISTLOCK_ZK, DISTLOCK_ZK_AUTH, DISTLOCK_ZK_CHROOT.

Examples:
  # the daily report, from the same crontab line on every server
  0 6 * * * distlock once --lock reports/daily --slot "$(date +\%F)" --etcd 10.0.0.1:2379 -- /usr/local/bin/daily-report

  # send the invoices at most once per month, even if sending fails midway
  distlock once --lock invoices --slot "$(date +%Y-%m)" --zk zk1:2181 --at-most-once -- ./send-invoices
  30 6 * * * distlock once --lock reports/daily --every '30 6 * * *' --tz Europe/Berlin -- ./daily-report

  # give up after 10 minutes if another server holds the slot's lock that long (exit 75)
  distlock once --lock rebuild --slot 2026-11-30 --wait 10m --shell -- 'make -C /srv/site && rsync ...'
`

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
	argv, help, err := c.parse(fs, args, onceUsage, stdout, stderr)
	if help || err != nil {
		return err
	}
	name := c.name
	switch {
	case name == "":
		return usageErr("no --lock NAME; e.g. distlock once --lock reports/daily --slot 2026-11-30 -- CMD")
	case len(c.names) > 1:
		return usageErr("--lock given %d times; once takes one lock", len(c.names))
	case c.set["slot"] && c.set["every"]:
		return usageErr("--slot and --every both given; the slot is one or the other")
	case c.set["tz"] && !c.set["every"]:
		return usageErr("--tz goes with --every")
	case !c.set["slot"] && !c.set["every"]:
		return usageErr("no --slot SLOT or --every SCHEDULE; e.g. --slot \"$(date +%%F)\" or --every daily")
	case len(argv) == 0:
		return usageErr("no command; put it after --, e.g. distlock once --lock %s --slot %s -- CMD ARGS", name, slot)
	}
	if err := c.check(); err != nil {
		return err
	}
	if c.set["every"] {
		s, err := scheduleOf(every, tz)
		if err != nil {
			return usageErr("%v", err)
		}
		now := time.Now()
		if slot = s.Slot(now); slot == "" {
			return usageErr("--every %q: no fire time in the last five years", every)
		}
		// Wait until the slot ends, when the next run is due: a holder
		// that died mid-run is waited for that long (its entry goes with
		// its lease or session), and no longer.
		if !c.set["wait"] && !c.noWait {
			if end := slotEnd(s, now); !end.IsZero() {
				c.wait = max(end.Sub(now), time.Second)
			}
		}
	}
	if err := distlock.ValidateSlot(slot); err != nil {
		return usageErr("--slot %q: %s", slot, causeAfter(err, distlock.ErrInvalidSlot))
	}
	// The run holds the slot's own lock; the markers stay NAME's.
	c.name = distlock.SlotLockName(name, slot)
	c.names = []string{c.name}
	if err := distlock.ValidateName(c.name); err != nil {
		return usageErr("--lock %q: slot %q's lock: %s", name, slot, lockCause(err))
	}
	mode := distlock.AtLeastOnce
	if atMostOnce {
		mode = distlock.AtMostOnce
	}

	h, err := c.acquire(holderValue("distlock once --slot "+slot), stderr)
	if err != nil {
		return err
	}
	defer h.release()
	marks, err := h.sess.Marks(name)
	if err != nil {
		return usageErr("--lock %q: %s", name, lockCause(err))
	}
	// The library decides (read the marker, run, mark, in the mode's
	// order); the command says what happened in its own words and exit
	// codes. The command's own error (its exit code, a lost lock while it
	// ran) comes back from OnceHeld as it is.
	ran, err := distlock.OnceHeld(context.Background(), h.lease, marks, slot, func(context.Context) error {
		// DISTLOCK_LOCK is NAME, as given, not the slot's lock.
		return c.run(h, argv, []string{"DISTLOCK_LOCK=" + name, "DISTLOCK_SLOT=" + slot}, stdout, stderr)
	}, distlock.WithOnceMode(mode), distlock.WithOnceHolder(h.holder), distlock.WithOnceTimeout(c.conn.timeout))
	return onceResult(h, slot, ran, err, stdout, stderr)
}

// onceResult turns OnceHeld's outcome into the command's messages and
// exit status.
func onceResult(h *held, slot string, ran bool, err error, stdout, stderr io.Writer) error {
	var (
		done *distlock.SlotDoneError
		oe   *distlock.OnceError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &done) && !ran:
		fmt.Fprintf(stdout, "slot %s already done by %s\n", slot, done.Marker)
		return nil
	case errors.As(err, &done):
		fmt.Fprintf(stderr, "distlock: warning: the command succeeded, but slot %s had been marked meanwhile by %s\n", slot, done.Marker)
		return nil
	case !errors.As(err, &oe):
		return err // the command's
	}
	name, lost := oe.Name, errors.Is(oe.Err, distlock.ErrLost)
	switch {
	case oe.Op == distlock.OpCheck && h.lease.Err() != nil:
		return lostErr(name, h.lease.Err(), false)
	case oe.Op == distlock.OpCheck:
		return exit(exitUnreachable, fmt.Errorf("once: read the marker of slot %q: %w%s", slot, oe.Err, h.b.AuthHint(oe.Err)))
	case oe.Op != distlock.OpMark:
		return exit(exitUnreachable, fmt.Errorf("once: slot %q: %w", slot, oe.Err))
	case !oe.Ran && lost:
		return exit(exitLost, fmt.Errorf("lock %q lost before slot %q was marked; the command was not run: %v", name, slot, oe.Err))
	case !oe.Ran:
		return exit(exitUnreachable, fmt.Errorf("once: mark slot %q: %w; the command was not run%s", slot, oe.Err, h.b.AuthHint(oe.Err)))
	case lost:
		return exit(exitLost, fmt.Errorf("lock %q lost after the command succeeded; slot %q is NOT marked done, so it may run again: %v", name, slot, oe.Err))
	}
	return exit(exitUnreachable, fmt.Errorf("the command succeeded, but slot %q could not be marked done, so it may run again: %w%s", slot, oe.Err, h.b.AuthHint(oe.Err)))
}

// slotEnd returns when the slot now falls in ends by s — the next fire
// time, to the second — or the zero Time if it does not end within six
// years. Slots only move forward, so a search by doubling steps and then
// halving finds the first time with another slot.
func slotEnd(s schedule.Schedule, now time.Time) time.Time {
	slot := s.Slot(now)
	lo, step := now, time.Minute
	for s.Slot(now.Add(step)) == slot {
		lo = now.Add(step)
		if step *= 2; step > 6*366*24*time.Hour {
			return time.Time{}
		}
	}
	hi := now.Add(step)
	for hi.Sub(lo) > time.Second {
		mid := lo.Add(hi.Sub(lo) / 2)
		if s.Slot(mid) == slot {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// scheduleOf is the schedule.Schedule --every and --tz name.
func scheduleOf(every, tz string) (schedule.Schedule, error) {
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("--tz %q: %v", tz, err)
	}
	switch every {
	case "hourly":
		return schedule.Hourly(loc), nil
	case "daily":
		return schedule.Daily(loc), nil
	}
	s, err := schedule.Cron(every, loc)
	if err != nil {
		return nil, fmt.Errorf("--every %q: not hourly, daily or a cron expression: %s", every, causeAfter(err, nil))
	}
	return s, nil
}
