package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
	"github.com/distlock/distlock/fencing/etcdfence"
	"github.com/distlock/distlock/fencing/zkfence"
	"github.com/go-zookeeper/zk"
)

// markerOf returns the value of the done-marker of lock name's slot, and
// whether there is one.
func (b *testBackend) markerOf(t *testing.T, name, slot string) (string, bool) {
	t.Helper()
	if b.name == "etcd" {
		resp, err := b.etcd.Get(testCtx(t), b.prefix+"@once/"+name+"/@slot/"+slot)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) == 0 {
			return "", false
		}
		return string(resp.Kvs[0].Value), true
	}
	p := b.prefix + "/@once/" + name + "/@slot/" + slot
	if _, err := b.zk.Sync(p); err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatal(err)
	}
	data, _, err := b.zk.Get(p)
	if errors.Is(err, zk.ErrNoNode) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(data), true
}

// lines returns the lines of file, none if it does not exist.
func lines(t *testing.T, file string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(data), "\n"), "\n")
}

func TestOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *testBackend) {
		ctx := testCtx(t)
		dir := t.TempDir()
		once := func(args ...string) result {
			t.Helper()
			return cli(ctx, t, nil, b.args("once", args...)...)
		}

		t.Run("Sequential", func(t *testing.T) {
			log := filepath.Join(dir, "seq.log")
			cmd := `echo "$DISTLOCK_LOCK $DISTLOCK_SLOT $DISTLOCK_TOKEN $DISTLOCK_HOLDER" >> ` + log
			r := once("--lock", "reports/daily", "--slot", "2026-11-30", "--", "sh", "-c", cmd)
			if r.code != 0 {
				t.Fatalf("first run: exit %d, stderr %q", r.code, r.stderr)
			}
			got := lines(t, log)
			if len(got) != 1 {
				t.Fatalf("command ran %d times, want 1: %q", len(got), got)
			}
			f := strings.Fields(got[0])
			if len(f) < 4 || f[0] != "reports/daily" || f[1] != "2026-11-30" || !strings.HasPrefix(f[2], "reports/daily/once-2026-11-30@") || !strings.Contains(got[0], "distlock once --slot 2026-11-30") {
				t.Errorf("command's environment: %q", got[0])
			}
			token := f[2]
			if v, ok := b.markerOf(t, "reports/daily", "2026-11-30"); !ok || !strings.Contains(v, token) || !strings.Contains(v, `"at-least-once"`) {
				t.Errorf("marker %q (present %v), want one with token %s", v, ok, token)
			}

			r = once("--lock", "reports/daily", "--slot", "2026-11-30", "--", "sh", "-c", cmd)
			if r.code != 0 || !strings.Contains(r.stdout, "slot 2026-11-30 already done by ") || !strings.Contains(r.stdout, token) {
				t.Fatalf("second run: exit %d, stdout %q, stderr %q; want 0 and \"already done by\" with token %s", r.code, r.stdout, r.stderr, token)
			}
			if got := lines(t, log); len(got) != 1 {
				t.Fatalf("command ran %d times, want 1: %q", len(got), got)
			}

			// Another slot runs again.
			r = once("--lock", "reports/daily", "--slot", "2026-12-01", "--", "sh", "-c", cmd)
			if r.code != 0 || len(lines(t, log)) != 2 {
				t.Fatalf("next slot: exit %d, stderr %q, %d runs", r.code, r.stderr, len(lines(t, log)))
			}
		})

		t.Run("Concurrent", func(t *testing.T) {
			log := filepath.Join(dir, "conc.log")
			start, release := filepath.Join(dir, "start"), filepath.Join(dir, "release")
			for _, p := range []string{start, release} {
				if err := syscall.Mkfifo(p, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			// Held open read-write by the test, the fifos never block the
			// command's open: only its read of release waits, for the test.
			sf, err := os.OpenFile(start, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer sf.Close()
			rf, err := os.OpenFile(release, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer rf.Close()
			started := make(chan string, 4)
			go func() {
				sc := bufio.NewScanner(sf)
				for sc.Scan() {
					started <- sc.Text()
				}
			}()

			cmd := `echo "$DISTLOCK_TOKEN" > ` + start + `; read _ < ` + release + `; echo ran >> ` + log
			results := make(chan result, 2)
			for range 2 {
				go func() {
					results <- cli(ctx, t, nil, b.args("once", "--lock", "nightly", "--slot", "n1", "--", "sh", "-c", cmd)...)
				}()
			}
			select {
			case <-started:
			case <-ctx.Done():
				t.Fatal("no command started")
			}
			// The other distlock is queued behind the one whose command
			// runs, on the slot's lock.
			b.waitQueued(t, distlock.SlotLockName("nightly", "n1"), 2)
			// Enough for both, so that a second run (the bug) shows in the log
			// instead of hanging.
			if _, err := rf.WriteString("go\ngo\n"); err != nil {
				t.Fatal(err)
			}
			var skipped int
			for range 2 {
				r := <-results
				if r.code != 0 {
					t.Errorf("exit %d, stderr %q", r.code, r.stderr)
				}
				if strings.Contains(r.stdout, "slot n1 already done by ") {
					skipped++
				}
			}
			if got := lines(t, log); len(got) != 1 || skipped != 1 {
				t.Fatalf("command ran %d times (%d runs skipped), want once", len(got), skipped)
			}
		})

		t.Run("FailureRetried", func(t *testing.T) {
			log := filepath.Join(dir, "fail.log")
			r := once("--lock", "reports/daily", "--slot", "f1", "--", "sh", "-c", "echo ran >> "+log+"; exit 3")
			if r.code != 3 {
				t.Fatalf("failing command: exit %d, stderr %q; want 3", r.code, r.stderr)
			}
			if v, ok := b.markerOf(t, "reports/daily", "f1"); ok {
				t.Fatalf("a failed run left a marker: %q", v)
			}
			r = once("--lock", "reports/daily", "--slot", "f1", "--", "sh", "-c", "echo ran >> "+log)
			if r.code != 0 || strings.Contains(r.stdout, "already done") {
				t.Fatalf("retry: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
			}
			if got := lines(t, log); len(got) != 2 {
				t.Fatalf("command ran %d times, want 2 (the failure, then the retry)", len(got))
			}
			if _, ok := b.markerOf(t, "reports/daily", "f1"); !ok {
				t.Fatal("no marker after the successful retry")
			}
		})

		t.Run("AtMostOnce", func(t *testing.T) {
			log := filepath.Join(dir, "amo.log")
			r := once("--lock", "reports/daily", "--slot", "m1", "--at-most-once", "--", "sh", "-c", "echo ran >> "+log+"; exit 3")
			if r.code != 3 {
				t.Fatalf("failing command: exit %d, stderr %q; want 3", r.code, r.stderr)
			}
			if v, ok := b.markerOf(t, "reports/daily", "m1"); !ok || !strings.Contains(v, `"at-most-once"`) {
				t.Fatalf("marker %q (present %v), want one written before the run", v, ok)
			}
			for _, mode := range [][]string{{"--at-most-once"}, nil} {
				args := append(append([]string{"--lock", "reports/daily", "--slot", "m1"}, mode...), "--", "sh", "-c", "echo ran >> "+log)
				r = once(args...)
				if r.code != 0 || !strings.Contains(r.stdout, "slot m1 already done by ") {
					t.Fatalf("next run %v: exit %d, stdout %q, stderr %q; want it skipped", mode, r.code, r.stdout, r.stderr)
				}
			}
			if got := lines(t, log); len(got) != 1 {
				t.Fatalf("command ran %d times, want 1", len(got))
			}
		})

		t.Run("Usage", func(t *testing.T) {
			for _, slot := range []string{"", "a/b", "@x", ".x", "-x", "a b", "ä", strings.Repeat("x", 129)} {
				r := once("--lock", "reports/daily", "--slot", slot, "--", "true")
				if r.code != exitUsage || !strings.Contains(r.stderr, "--slot") {
					t.Errorf("slot %q: exit %d, stderr %q; want %d", slot, r.code, r.stderr, exitUsage)
				}
			}
			for _, args := range [][]string{
				{"--slot", "s", "--", "true"},                             // no --lock
				{"--lock", "reports/daily", "--", "true"},                 // no --slot
				{"--lock", "reports/daily", "--slot", "s"},                // no command
				{"--lock", "a@b", "--slot", "s", "--", "true"},            // bad name
				{"--lock", "x", "--slot", "s", "--wait", "0", "--", "ok"}, // bad wait
			} {
				if r := once(args...); r.code != exitUsage {
					t.Errorf("%q: exit %d, stderr %q; want %d", args, r.code, r.stderr, exitUsage)
				}
			}
		})
	})
}

func TestOnceHelp(t *testing.T) {
	r := cli(testCtx(t), t, nil, "once", "--help")
	for _, want := range []string{"Examples:", "--at-most-once", "at-least-once (default)", "@once/NAME/@slot/SLOT",
		"DISTLOCK_SLOT", "DISTLOCK_LOCK", "DISTLOCK_HOLDER", "DISTLOCK_DEADLINE", "DISTLOCK_TOKEN     the fencing token of the slot's lock, NAME/once-SLOT@SEQ.OWNER"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("once --help: exit %d, no %q in\n%s", r.code, want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "NAME@N)") {
		t.Errorf("once --help still documents DISTLOCK_TOKEN as NAME@N:\n%s", r.stdout)
	}
}

// TestOnceEnv: COMMAND gets what once --help says: DISTLOCK_TOKEN in
// the slot lock's token in its text form NAME/once-SLOT@SEQ.OWNER (not
// NAME@N), DISTLOCK_LOCK (NAME),
// DISTLOCK_SLOT, DISTLOCK_HOLDER and DISTLOCK_DEADLINE.
func TestOnceEnv(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *testBackend) {
		ctx := testCtx(t)
		lock := lockName(t)
		r := cli(ctx, t, nil, b.args("once", "--lock", lock, "--slot", "env-1", "--", "sh", "-c",
			`echo "lock=$DISTLOCK_LOCK"; echo "token=$DISTLOCK_TOKEN"; echo "slot=$DISTLOCK_SLOT"; echo "holder=$DISTLOCK_HOLDER"; echo "deadline=$DISTLOCK_DEADLINE"`)...)
		if r.code != 0 {
			t.Fatalf("once: exit %d, stderr %q", r.code, r.stderr)
		}
		for _, re := range []string{
			`(?m)^lock=` + regexp.QuoteMeta(lock) + `$`,
			`(?m)^token=` + regexp.QuoteMeta(lock) + `/once-env-1@[1-9][0-9]*\.[1-9a-f][0-9a-f]*$`,
			`(?m)^slot=env-1$`,
			`(?m)^holder=.* pid [0-9]+ distlock once --slot env-1 since .+$`,
			`(?m)^deadline=\d{4}-\d\d-\d\dT\S+Z$`,
		} {
			if !regexp.MustCompile(re).MatchString(r.stdout) {
				t.Errorf("COMMAND's environment: no line matching %s in %q", re, r.stdout)
			}
		}
		tok := regexp.MustCompile(`(?m)^token=(.*)$`).FindStringSubmatch(r.stdout)
		if tok != nil {
			if _, err := distlock.ParseToken(tok[1]); err != nil {
				t.Errorf("DISTLOCK_TOKEN %q does not parse: %v", tok[1], err)
			}
		}
	})
}

// TestOnceMarkFenced checks, in this process, that a distlock that is no
// longer the lock's holder cannot mark a slot: not with a token older than
// one the fence admitted, not once its lock entry is gone.
func TestOnceMarkFenced(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *testBackend) {
		ctx := testCtx(t)
		// The command's own connection, from the backend's flags.
		var cf connFlags
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		cf.register(fs)
		cf.registerSession(fs)
		if err := fs.Parse(b.flags); err != nil {
			t.Fatal(err)
		}
		be, err := cf.open(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer be.Close()
		// The marks the command builds, from a session of that connection.
		sess, err := be.NewSession(ctx, "test")
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close(context.Background())
		marker := func(l *distlock.Lease, slot string) error {
			marks, err := sess.Marks(l.Token().Name)
			if err != nil {
				t.Fatal(err)
			}
			return marks.Mark(ctx, l, distlock.SlotMarker{Slot: slot, Token: l.Token().String(), Holder: "test", Mode: distlock.AtLeastOnce, Marked: time.Now()})
		}

		// A fence that has seen a newer token refuses the holder's.
		lease, err := b.mutex(t, "fenced", "test").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer lease.Unlock(context.Background())
		if err := marker(lease, "s1"); err != nil {
			t.Fatalf("mark by the holder: %v", err)
		}
		if err := marker(lease, "s1"); !errors.As(err, new(*distlock.SlotDoneError)) {
			t.Fatalf("mark of a marked slot: %v, want a SlotDoneError", err)
		}
		newer := distlock.Token{Name: "fenced", Seq: lease.Token().Seq + 1000, Owner: lease.Token().Owner}
		if b.name == "etcd" {
			f, _ := etcdfence.New(b.etcd, b.prefix+"@once/fenced/@fence", "fenced")
			err = f.Admit(ctx, newer)
		} else {
			f, _ := zkfence.New(b.zk, b.prefix+"/@once/fenced/@fence", "fenced")
			err = f.Admit(ctx, newer)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := marker(lease, "s2"); !errors.Is(err, distlock.ErrLost) || !errors.Is(err, fencing.ErrStale) {
			t.Fatalf("mark with a stale token: %v, want ErrLost and ErrStale", err)
		}
		if v, ok := b.markerOf(t, "fenced", "s2"); ok {
			t.Fatalf("stale mark wrote %q", v)
		}

		// A holder whose entry is gone cannot mark, even before it noticed.
		lease2, err := b.mutex(t, "fenced-gone", "test").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer lease2.Unlock(context.Background())
		q := b.inspect(t, "fenced-gone")
		if len(q) != 1 {
			t.Fatalf("queue %+v", q)
		}
		if b.name == "etcd" {
			_, err = b.etcd.Delete(ctx, q[0].Key)
		} else {
			err = b.zk.Delete(q[0].Key, -1)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := marker(lease2, "g1"); !errors.Is(err, distlock.ErrLost) {
			t.Fatalf("mark after the entry was deleted: %v, want ErrLost", err)
		}
		if v, ok := b.markerOf(t, "fenced-gone", "g1"); ok {
			t.Fatalf("mark without the lock wrote %q", v)
		}

		// The same for a holder of a slot's own lock, whose marker is
		// written with only its entry checked (no fence).
		slotLock := distlock.SlotLockName("slot-gone", "s1")
		lease3, err := b.mutex(t, slotLock, "test").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer lease3.Unlock(context.Background())
		slotMark := func(slot string) error {
			marks, err := sess.Marks("slot-gone")
			if err != nil {
				t.Fatal(err)
			}
			return marks.Mark(ctx, lease3, distlock.SlotMarker{Slot: slot, Token: lease3.Token().String(), Holder: "test", Mode: distlock.AtLeastOnce, Marked: time.Now()})
		}
		if err := slotMark("s2"); err == nil {
			t.Fatal("mark of slot s2 with slot s1's lock: no error")
		}
		q = b.inspect(t, slotLock)
		if len(q) != 1 {
			t.Fatalf("queue %+v", q)
		}
		if b.name == "etcd" {
			_, err = b.etcd.Delete(ctx, q[0].Key)
		} else {
			err = b.zk.Delete(q[0].Key, -1)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := slotMark("s1"); !errors.Is(err, distlock.ErrLost) {
			t.Fatalf("mark after the slot lock's entry was deleted: %v, want ErrLost", err)
		}
		if v, ok := b.markerOf(t, "slot-gone", "s1"); ok {
			t.Fatalf("mark without the slot lock wrote %q", v)
		}
	})
}

// TestOnceEvery: --every names the slot from the schedule (here daily in
// UTC, today's date), so that a second server's run of the same line finds
// it done; bad combinations are usage errors.
func TestOnceEvery(t *testing.T) {
	b := etcdBackend(t)
	ctx := testCtx(t)
	log := filepath.Join(t.TempDir(), "every.log")
	cmd := `echo "$DISTLOCK_SLOT" >> ` + log
	before := time.Now().UTC().Format("2006-01-02")
	for run := range 2 {
		r := cli(ctx, t, nil, b.args("once", "--lock", "every/job", "--every", "daily", "--", "sh", "-c", cmd)...)
		if r.code != 0 {
			t.Fatalf("run %d: exit %d, stderr %q", run, r.code, r.stderr)
		}
	}
	after := time.Now().UTC().Format("2006-01-02")
	got := lines(t, log)
	if before == after && (len(got) != 1 || got[0] != before) {
		t.Errorf("two runs of --every daily wrote %q, want one run for slot %s", got, before)
	}
	for _, args := range [][]string{
		{"--slot", "x", "--every", "daily"},
		{"--slot", "x", "--tz", "Europe/Berlin"},
		{"--every", "fortnightly"},
		{"--every", "daily", "--tz", "Mars/Olympus"},
	} {
		r := cli(ctx, t, nil, b.args("once", append(append([]string{"--lock", "every/bad"}, args...), "--", "true")...)...)
		if r.code != exitUsage {
			t.Errorf("once %v: exit %d, stderr %q; want a usage error", args, r.code, r.stderr)
		}
	}
}

// TestSlotEnd: --every's default --wait lasts until the slot's end, the
// schedule's next fire time.
func TestSlotEnd(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 2, 30, 0, time.UTC)
	for _, c := range []struct {
		every string
		want  time.Time
	}{
		{"daily", time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)},
		{"hourly", time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)},
		{"*/5 * * * *", time.Date(2026, 12, 1, 10, 5, 0, 0, time.UTC)},
		{"* * * * *", time.Date(2026, 12, 1, 10, 3, 0, 0, time.UTC)},
		{"0 6 1 * *", time.Date(2027, 1, 1, 6, 0, 0, 0, time.UTC)},
	} {
		s, err := scheduleOf(c.every, "UTC")
		if err != nil {
			t.Fatal(err)
		}
		if got := slotEnd(s, at); !got.Equal(c.want) {
			t.Errorf("--every %q at %v: slot ends %v, want %v", c.every, at, got, c.want)
		}
	}
}
