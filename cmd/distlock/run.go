package main

import (
	"flag"
	"io"
	"strings"

	"github.com/distlock/distlock"
)

func init() {
	register(command{name: "run", summary: "run a command while holding a lock", run: runCmd})
}

const runUsage = `Usage:
  distlock run --lock NAME [--lock NAME...] [--etcd ENDPOINTS | --zk SERVERS]
               [--ttl D] [--permits N] [--wait D | --no-wait] [--grace D]
               [--shell] [--revocable=false] [--log-level LEVEL]
               -- COMMAND [ARGS...]

Runs COMMAND only while holding the lock NAME, then releases it.

With --lock given several times (up to 32 names, each once), distlock
holds all of those locks while COMMAND runs: it takes them at once, in one
acquisition (a multi-lock), all or none. Whatever order other lines give
the same names in, and however they mix with lines that take one of them
alone, no two can deadlock: there is no lock order to agree on. The lock
is lost when any of its names is (exit 76, as for one lock: deleting or
force-revoking one name's entry stops COMMAND), and revoking any of its
names stops COMMAND as below. Messages name the lock by its names,
sorted, joined by "+" (a+b), as distlock status shows in its "multi:"
lines. --no-wait gives up (exit 75) if any of them is held, --wait if
they are not all held in time; either way nothing is left behind. A name
given twice, or more than 32 names, is a usage error (exit 64). Not with
--permits.

With --permits N, NAME is a semaphore of N permits instead: up to N
COMMANDs run at once across the fleet, the others wait their turn (FIFO).
Every line using NAME must give the same N (a different one exits 65).

If the lock is lost while COMMAND runs, COMMAND's process group gets
SIGTERM, then SIGKILL after --grace, and distlock exits 76. SIGINT, SIGTERM
and SIGHUP are passed on to COMMAND; while still waiting for the lock they
cancel the wait (distlock exits 128+signal, leaving no entry behind).

If distlock itself dies, even by SIGKILL (kill -9, the OOM killer),
COMMAND's process group is killed with it at once, long before the lock
can pass to another holder: COMMAND never outlives the lock. For this a
small guard (distlock itself) is in the group, which COMMAND does not lead:
signal the group with "kill 0", not "kill -- -$$". Processes that leave
the group (setsid) are not followed. Linux only; elsewhere COMMAND keeps
running, so run distlock under a supervisor that kills the whole tree.

If an operator revokes the lock (distlock revoke NAME --reason TEXT), the
lock is still held, but COMMAND is stopped the same way: distlock says on
stderr who revoked it and why, sends SIGTERM, then SIGKILL after --grace
or sooner, so that it can release the lock before the revocation's grace
period ends (by then, less a quarter of it, at most 1s); then it releases
the lock and exits with COMMAND's own code, as for a forwarded signal (76
if the revocation was forced before COMMAND ended: the lock was lost; 75,
COMMAND not started, if it was revoked before COMMAND started).
With --revocable=false distlock ignores revocations: only a forced one
(revoke --force) takes the lock, as a loss (exit 76).

Environment of COMMAND (added to distlock's own):
  DISTLOCK_LOCK      NAME, as given with --lock; with several --lock, the
                     first of the names in sorted order (the lock of
                     DISTLOCK_TOKEN)
  DISTLOCK_TOKEN     the fencing token, NAME@SEQ.OWNER, e.g.
                     deploy@1042.694d7f0c8a1b2c3d: the sequence number in
                     decimal, then the etcd lease or ZooKeeper session that
                     acquired, in hex; pass it with every write to the
                     protected resource. With --permits: the slot's token,
                     NAME/slot-K@SEQ.OWNER, to fence what belongs to slot K.
                     With several --lock: the first name's token (sorted
                     by name); DISTLOCK_TOKENS has them all
  DISTLOCK_LOCKS     every NAME, sorted, separated by spaces (one --lock:
                     the same as DISTLOCK_LOCK)
  DISTLOCK_TOKENS    every lock's token, in DISTLOCK_LOCKS' order,
                     separated by spaces, e.g. "a@1042.694d7f0c8a1b2c3d
                     b@1042.694d7f0c8a1b2c3d": one acquisition, so one SEQ
                     and OWNER, each NAME's token fencing what NAME
                     protects (one --lock: the same as DISTLOCK_TOKEN)
  DISTLOCK_PERMIT    with --permits only: the permit's slot K, 0 to N-1
  DISTLOCK_HOLDER    what the lock entry says about its holder: "HOST pid PID
                     distlock run since TIME"
  DISTLOCK_DEADLINE  RFC 3339, UTC: the lock is surely held until then, as of
                     COMMAND's start; keepalives move the real deadline on,
                     and a loss before it reaches COMMAND as SIGTERM

Environment read (the cluster flags' defaults): ETCDCTL_ENDPOINTS,
ETCDCTL_CACERT, ETCDCTL_CERT, ETCDCTL_KEY, ETCDCTL_USER, ETCDCTL_PASSWORD
(as etcdctl), DISTLOCK_ZK, DISTLOCK_ZK_AUTH, DISTLOCK_ZK_CHROOT.

Examples:
  # one backup at a time across the fleet, waiting as long as it takes
  distlock run --lock backup --etcd 10.0.0.1:2379,10.0.0.2:2379 -- /usr/local/bin/backup --full

  # skip this run if another host is at it (exit 75)
  distlock run --lock reindex --zk zk1:2181 --no-wait -- ./reindex.sh

  # at most 4 migrations at a time, each told its slot
  distlock run --lock migrations --permits 4 --shell -- './migrate --worker "$DISTLOCK_PERMIT"'

  # give up after a minute; a shell pipeline with the token
  distlock run --lock deploy --wait 1m --shell -- 'echo "$DISTLOCK_TOKEN" | deploy --fence -'

  # one reindex at a time, shared with a Java service that takes Curator's
  # InterProcessMutex on /locks/reindex (it waits for this one, and this one for it)
  distlock run --zk zk1:2181 --prefix /locks --compat curator --lock reindex -- ./reindex.sh

  # move money between two accounts: both locks, never a deadlock
  distlock run --lock acct/42 --lock acct/7 --shell -- './transfer --fence "$DISTLOCK_TOKENS" 42 7 100'
`

func runCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	c := &lockCmd{cmd: "run", multiLock: true}
	c.register(fs, "backup or team/job", true)
	fs.IntVar(&c.permits, "permits", 0, "treat NAME as a semaphore of this many permits: up to N holders at once (default: a lock, one holder)")
	fs.Func("compat", "share the lock with another client's `MODE` of lock on the same path, both ways: curator (Curator's InterProcessMutex, and go-zookeeper's zk.Lock), kazoo, go-zookeeper, etcd (etcd's concurrency.Mutex, v3lock, etcdctl lock); default none: distlock's own entries, which still wait for every other client's it recognises", func(s string) (err error) {
		c.compat, err = distlock.ParseCompat(s)
		return err
	})
	fs.BoolVar(&c.revocable, "revocable", true, "follow revocations (distlock revoke): stop COMMAND and release the lock when an operator revokes it; --revocable=false leaves it to --force")
	argv, help, err := c.parse(fs, args, runUsage, stdout, stderr)
	if help || err != nil {
		return err
	}
	switch {
	case c.name == "":
		return usageErr("no --lock NAME; say which lock to hold, e.g. distlock run --lock backup -- CMD")
	case len(argv) == 0:
		return usageErr("no command; put it after --, e.g. distlock run --lock %s -- CMD ARGS", c.name)
	case c.set["permits"] && (c.permits < 1 || c.permits > distlock.MaxPermits):
		return usageErr("--permits %d: want 1 to %d", c.permits, distlock.MaxPermits)
	case c.compat != "" && c.set["permits"]:
		return usageErr("--compat %s with --permits: no other client's semaphore shares distlock's; drop one", c.compat)
	case c.compat != "" && c.multi():
		return usageErr("--compat %s with --lock given %d times: a multi-lock has no other client's counterpart; give one --lock", c.compat, len(c.names))
	case c.set["permits"] && c.multi():
		return usageErr("--permits with --lock given %d times: a semaphore is one lock; give one --lock", len(c.names))
	}
	if err := c.check(); err != nil {
		return err
	}
	h, err := c.acquire(holderValue("distlock run"), stderr)
	if err != nil {
		return err
	}
	defer h.release()
	var env []string
	if c.permits > 0 {
		// The lease's token is the slot's, NAME/slot-K: DISTLOCK_LOCK
		// stays NAME.
		slot := strings.TrimPrefix(h.lease.Token().Name, c.name+"/slot-") // distlock.SlotName's form
		env = append(env, "DISTLOCK_LOCK="+c.name, "DISTLOCK_LOCKS="+c.name, "DISTLOCK_PERMIT="+slot)
	}
	return c.run(h, argv, env, stdout, stderr)
}
