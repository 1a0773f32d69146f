package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/distlock/distlock"
)

func init() {
	register(command{name: "revoke", summary: "ask a lock's holders or leader to let go, then force it", run: revokeCmd})
}

const revokeUsage = `Usage:
  distlock revoke [--etcd ENDPOINTS | --zk SERVERS] [--prefix P]
                  --reason TEXT [--grace D] [--force] [--by WHO]
                  [--compat MODE] NAME

Takes the lock NAME from a holder that hangs, in two phases. First it
asks: it records a revocation for each holder of NAME (the holder of a
lock, every reader holding it, every permit of a semaphore, and the leader
of the election of that name), which revocable holders see at once.
distlock run is revocable (unless run with --revocable=false): it stops
its command and releases the lock; a program using the library is
revocable when its session opted in (WithRevocable) and releases when its
Lease's Done closes with ErrRevoked. Then revoke waits, up to --grace, for
each holder to release. A holder still there when the grace period is
over keeps the lock, unless --force is given: then its entry is deleted
(only if it is still that holder's), the holder loses the lock, and the
next in line gets it with a larger fencing token, with which fences refuse
whatever the forced holder writes late.

An election's leader is asked to step down: on a revocable session its
Leadership's Done closes with ErrRevoked while it still leads, and it
hands over (Resign or HandOff; RunAsLeader does it for you); it counts
as released once its entry is gone. Forced, its entry is deleted and the
next in line (the highest priority, the oldest among equals) claims the
next term, whose token is larger. Its line says "(leader VALUE)", with
its term's token (distlock status NAME shows it as the leader's).
Waiting candidates, like a lock's waiters, are not revoked.

Holders of other clients in the lock's queue (Curator, kazoo, zk.Lock,
etcd's concurrency.Mutex or etcdctl lock, etcd's recipes; see distlock
status) are left alone: they follow no revocation. --compat MODE, with
--force, revokes those of MODE's client too: their entries are deleted
after --grace, and they are not told (their clients do not watch their
own entries), so the next holder may start while they still run: only a
fence refuses what they write late.

Each holder's revocation is recorded beside the lock: who asked, why,
when, the grace period and the outcome. Records are kept after the holder
is gone, as the audit trail (the newest 100 per lock); distlock status
NAME shows them. A holder revoked already is not asked again: without
--force, revoke says who asked before, when and why, and where that
request stands, and exits 75 while that holder still holds the lock;
with --force it forces it when the first request's grace period or this
one's --grace ends, whichever is first (so --force --grace 0 forces at
once), and the record names who forced it.

Where the records live (PREFIX is --prefix):
  etcd       key   PREFIX@revoke/NAME/@req/TOKEN    one JSON record per holder
  ZooKeeper  znode PREFIX/@revoke/NAME/@req/TOKEN   (TOKEN: the holder's
                                                    sequence number, 20 digits)

Output, one line per holder on stdout:
  token backup@1042.694d9b1c2a3f4e01 (web1 pid 4711 distlock run since ...): released 2.1s after the request
  token backup@1042.694d9b1c2a3f4e01 (...): still held after the 30s grace period
  token backup@1042.694d9b1c2a3f4e01 (...): forced after the 30s grace period: its entry was deleted, the holder lost the lock
  token backup@1042.694d9b1c2a3f4e01 (...): already revoked by alice@ops1 pid 77 at 2026-11-30T10:00:00Z: "hung deploy", grace 30s; still held after that grace period
  token scheduler@2210.694d9b1c2a3f4e10 (leader sched-host1): forced after the 0s grace period: its entry was deleted, the leader lost its term (the next in line leads)
A free lock prints "lock NAME is free: nothing to revoke" and records
nothing.

Examples:
  # ask the holder of backup to finish within a minute, then take it
  distlock revoke --etcd 10.0.0.1:2379 --reason "backup hangs on NFS, INC-4711" --grace 1m --force backup

  # only ask; exit 75 if it is still held after 30s
  distlock revoke --zk zk1:2181 --reason "maintenance at 14:00" reindex

Environment read (the cluster flags' defaults): ETCDCTL_ENDPOINTS,
ETCDCTL_CACERT, ETCDCTL_CERT, ETCDCTL_KEY, ETCDCTL_USER, ETCDCTL_PASSWORD
(as etcdctl), DISTLOCK_ZK, DISTLOCK_ZK_AUTH, DISTLOCK_ZK_CHROOT.
`

// revokeDefaultGrace is revoke's --grace when none is given.
const revokeDefaultGrace = 30 * time.Second

func revokeCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("revoke", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var (
		conn  connFlags
		req   distlock.RevokeRequest
		grace time.Duration
	)
	conn.register(fs)
	fs.StringVar(&req.Reason, "reason", "", "why (required): goes to the holder and the audit record")
	fs.DurationVar(&grace, "grace", revokeDefaultGrace, "how long the holders have to release")
	fs.BoolVar(&req.Force, "force", false, "delete the entries of holders still there after --grace: they lose the lock")
	fs.StringVar(&req.By, "by", "", "who asks, for the holder and the audit record (default: user@host pid N)")
	var compat distlock.Compat
	fs.Func("compat", "also revoke the holders of the other client `MODE` names (curator, kazoo, go-zookeeper, etcd, etcd-recipes; see distlock run --compat): they cannot be asked, so this needs --force, and they do not learn they lost the lock; default: other clients' holders are left alone", func(s string) (err error) {
		compat, err = distlock.ParseCompat(s)
		return err
	})
	names, help, err := parseNamed(fs, args, "revoke", revokeUsage, stdout)
	if help || err != nil {
		return err
	}
	conn.noteSet(fs)
	switch {
	case len(names) == 0:
		return usageErr("no lock name; e.g. distlock revoke --etcd host:2379 --reason \"hangs, INC-1\" backup")
	case len(names) > 1:
		return usageErr("one lock name at a time, got %q", names)
	case strings.TrimSpace(req.Reason) == "":
		return usageErr("--reason is required: say why, for the holder and the audit record, e.g. --reason \"backup hangs, INC-4711\"")
	case grace < 0:
		return usageErr("--grace %v: want a duration ≥ 0", grace)
	case compat != "" && !req.Force:
		return usageErr("--compat %s without --force: a %s holder follows no revocation and cannot be asked; add --force to delete its entry after --grace", compat, compat.Client())
	}
	if compat != "" {
		req.Clients = []string{compat.Client()}
	}
	name := names[0]
	if err := distlock.ValidateName(name); err != nil {
		return usageErr("lock %q: %s; use segments of letters, digits, '-', '_' and '.' separated by '/'", name, lockCause(err))
	}
	req.Grace = grace
	if err := req.Validate(); err != nil {
		return usageErr("%s", causeAfter(err, distlock.ErrInvalidRevoke))
	}

	// A signal stops the wait: the request stays recorded.
	sigs, stopSignals := catchSignals()
	defer stopSignals()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var got os.Signal
	gotSig := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			got = s
			close(gotSig)
			cancel(fmt.Errorf("got %s", sigName(s)))
		case <-ctx.Done():
		}
	}()
	signalled := func() os.Signal {
		select {
		case <-gotSig:
			return got
		default:
			return nil
		}
	}

	octx, ocancel := context.WithTimeout(ctx, 2*conn.timeout)
	b, err := conn.open(octx)
	ocancel()
	if err != nil {
		if s := signalled(); s != nil {
			return revokeSignalExit(s, "while connecting", name)
		}
		return err
	}
	defer b.Close()

	// Say so when the wait takes a while.
	waiting := time.AfterFunc(time.Second, func() {
		then := ""
		if req.Force {
			then = ", then forcing"
		}
		fmt.Fprintf(stderr, "distlock: waiting for the holders of lock %q to release (grace %v%s); a signal stops the wait, the request stays recorded\n", name, grace, then)
	})
	out, err := b.Revoke(ctx, name, req)
	waiting.Stop()
	for _, r := range out {
		if r.Token != "" {
			fmt.Fprintln(stdout, revocationLine(r, b.CandidateEntry(r.Lock, r.Key)))
		}
	}
	if err != nil {
		if s := signalled(); s != nil {
			return revokeSignalExit(s, "while waiting for the holders to release", name)
		}
		if errors.Is(err, distlock.ErrInvalidRevoke) {
			return usageErr("%s", causeAfter(err, distlock.ErrInvalidRevoke))
		}
		return exit(exitUnreachable, fmt.Errorf("revoke lock %q: %s%s", name, lockCause(err), b.AuthHint(err)))
	}
	if len(out) == 0 {
		fmt.Fprintf(stdout, "lock %q is free: nothing to revoke\n", name)
		return nil
	}
	// Every holder still there exits 75: asked now and past the grace
	// period, or asked before (not again) and still holding, whether
	// that request's grace period is over or not.
	var stillHeld, asked int
	for _, r := range out {
		switch {
		case r.Outcome == distlock.RevokeStillHeld && !r.Again:
			stillHeld++
		case r.Again && (r.Outcome == distlock.RevokePending || r.Outcome == distlock.RevokeStillHeld):
			asked++
		}
	}
	switch {
	case stillHeld > 0:
		return exit(exitNotAcquired, fmt.Errorf("lock %q: %d %s still %s it after the %v grace period; rerun with --force to delete %s (%s the lock)",
			name, stillHeld, plural(stillHeld, "holder", "holders"), plural(stillHeld, "holds", "hold"), grace,
			plural(stillHeld, "its entry", "their entries"), plural(stillHeld, "it then loses", "they then lose")))
	case asked > 0:
		return exit(exitNotAcquired, fmt.Errorf("lock %q: revoked already, not asked again, and %d %s still %s it; rerun with --force to take it once the earlier request's grace period is over",
			name, asked, plural(asked, "holder", "holders"), plural(asked, "holds", "hold")))
	}
	return nil
}

// revokeSignalExit is revoke's error for a signal that stopped it.
func revokeSignalExit(sig os.Signal, when, name string) error {
	n := 1
	if s, ok := sig.(syscall.Signal); ok {
		n = int(s)
	}
	return exit(128+n, fmt.Errorf("got %s %s; stopped, but a revocation recorded for lock %q stays: its holders still see it (distlock status shows it)", sigName(sig), when, name))
}

// revocationLine describes one holder's revocation as revoke found or
// left it; leader says the holder is an election's leader.
func revocationLine(r distlock.Revocation, leader bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "token %s", r.Token)
	switch {
	case leader && r.Holder != "":
		fmt.Fprintf(&b, " (leader %s)", oneLine(r.Holder))
	case leader:
		b.WriteString(" (leader)")
	case r.Holder != "":
		fmt.Fprintf(&b, " (%s)", oneLine(r.Holder))
	}
	b.WriteString(": ")
	that := "the "
	if r.Again {
		fmt.Fprintf(&b, "already revoked by %s at %s: %q, grace %v; ", r.By, rfc3339UTC(r.Requested), r.Reason, r.Grace)
		that = "that "
	}
	switch r.Outcome {
	case distlock.RevokeReleased:
		b.WriteString("released")
		if !r.Ended.IsZero() {
			fmt.Fprintf(&b, " %v after the request", r.Ended.Sub(r.Requested).Round(time.Millisecond))
		}
	case distlock.RevokeForced:
		lost := "the holder lost the lock"
		if leader {
			lost = "the leader lost its term (the next in line leads)"
		}
		fmt.Fprintf(&b, "forced after %s%v grace period: its entry was deleted, %s", that, r.Grace, lost)
		if r.ForcedBy != "" {
			fmt.Fprintf(&b, " (forced by %s: %q)", r.ForcedBy, r.ForceReason)
		}
	case distlock.RevokeStillHeld:
		fmt.Fprintf(&b, "still held after %s%v grace period", that, r.Grace)
	case distlock.RevokePending:
		fmt.Fprintf(&b, "pending: asked, %sgrace period ends at %s", that, rfc3339UTC(r.GraceEnds()))
	default:
		b.WriteString(string(r.Outcome))
	}
	return b.String()
}

func rfc3339UTC(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// parseNamed parses args for a command that takes lock names, with flags
// before or after them; help is true when --help was asked for and
// printed.
func parseNamed(fs *flag.FlagSet, args []string, cmd, usage string, stdout io.Writer) (names []string, help bool, err error) {
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				printHelp(stdout, cmd, usage, fs)
				return nil, true, nil
			}
			return nil, false, usageErr("%v; see 'distlock %s --help'", err, cmd)
		}
		if fs.NArg() == 0 {
			return names, false, nil
		}
		names = append(names, fs.Arg(0))
		rest = fs.Args()[1:]
	}
}
