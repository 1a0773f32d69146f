package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
)

// revocations reads lock name's revocation records with the library (on
// ZooKeeper after a sync, so that what the binary wrote through another
// server is seen).
func (b *testBackend) revocations(t *testing.T, name string) []distlock.Revocation {
	t.Helper()
	if b.name != "etcd" {
		if _, err := b.zk.Sync(b.prefix); err != nil {
			t.Fatal(err)
		}
	}
	rs, err := b.admin(t).Revocations(testCtx(t), name)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// revocableMutex is b.mutex on a session that follows revocations.
func (b *testBackend) revocableMutex(t *testing.T, name, holder string) distlock.Locker {
	t.Helper()
	ctx := testCtx(t)
	var (
		m   distlock.Locker
		err error
	)
	switch b.name {
	case "etcd":
		s, serr := etcdlock.NewSession(ctx, b.etcd, recipe.WithPrefix(b.prefix), recipe.WithHolder(holder), recipe.WithRevocable())
		if serr != nil {
			t.Fatal(serr)
		}
		t.Cleanup(func() { s.Close(context.Background()) })
		m, err = recipe.NewMutex(s, name)
	default:
		s, serr := zklock.NewSession(ctx, b.ens(), recipe.WithPrefix(b.prefix), recipe.WithHolder(holder), recipe.WithRevocable())
		if serr != nil {
			t.Fatal(serr)
		}
		t.Cleanup(func() { s.Close(context.Background()) })
		m, err = recipe.NewMutex(s, name)
	}
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// holderLine matches revoke's line for one holder of lock with outcome
// (a regexp).
func holderLine(lock, outcome string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^token ` + regexp.QuoteMeta(lock) + `@[0-9]+\.[0-9a-f]+ \(.*\): ` + outcome)
}

// TestRevokeRun: a `distlock run` holder is revoked: its command gets
// SIGTERM, the lock is released well within the grace period, revoke
// exits 0 with the outcome released, the waiting run gets the lock, and
// the record stays as the audit trail.
func TestRevokeRun(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *testBackend) {
		t.Parallel()
		ctx := testCtx(t)
		lock := lockName(t)
		file := filepath.Join(t.TempDir(), "trap")
		script := fmt.Sprintf(`trap 'echo got TERM >> %s; exit 0' TERM; echo ready; while :; do sleep 0.05; done`, file)
		holder := start(ctx, t, b.args("run", "--lock", lock, "--ttl=10s", "--", "sh", "-c", script)...)
		holder.waitLine(ctx, "ready")
		waiter := start(ctx, t, b.args("run", "--lock", lock, "--", "echo", "ran")...)
		b.waitQueued(t, lock, 2)

		begin := time.Now()
		r := cli(ctx, t, nil, b.args("revoke", "--reason", "hangs on NFS, INC-4711", "--by", "ops-test", "--grace", "20s", lock)...)
		t.Logf("revoke: code %d\n%s%s", r.code, r.stdout, r.stderr)
		if r.code != 0 || !holderLine(lock, `released [0-9.]+m?s after the request$`).MatchString(r.stdout) {
			t.Fatalf("revoke: code %d, stdout %q, stderr %q; want 0 and one line saying released", r.code, r.stdout, r.stderr)
		}
		if d := time.Since(begin); d > 15*time.Second {
			t.Errorf("revoke took %v: the holder did not release promptly", d)
		}
		if code := holder.wait(30 * time.Second); code != 0 {
			t.Fatalf("revoked holder: code %d, want its command's 0; stderr %s", code, holder.stderr)
		}
		fileSays(t, file, "got TERM")
		t.Logf("holder: %s", holder.stderr)
		if s := holder.stderr.String(); !strings.Contains(s, `distlock: lock "`+lock+`" revoked: by ops-test: "hangs on NFS, INC-4711"`) {
			t.Errorf("holder stderr: want a line saying who revoked and why: %q", s)
		}
		waiter.waitLine(ctx, "ran")
		if code := waiter.wait(30 * time.Second); code != 0 {
			t.Fatalf("waiter: code %d; stderr %s", code, waiter.stderr)
		}
		rs := b.revocations(t, lock)
		if len(rs) != 1 || rs[0].Outcome != distlock.RevokeReleased || rs[0].By != "ops-test" || rs[0].Reason != "hangs on NFS, INC-4711" || rs[0].Grace != 20*time.Second || rs[0].Ended.IsZero() {
			t.Errorf("records: %+v, want one, released, with the request", rs)
		}
	})
}

// TestRevokeRunShortGrace: a command that ignores SIGTERM gets SIGKILL
// before a revocation's grace period ends when that is shorter than run's
// --grace, so that run releases in time and the revocation need not be
// forced.
func TestRevokeRunShortGrace(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *testBackend) {
		t.Parallel()
		ctx := testCtx(t)
		lock := lockName(t)
		file := filepath.Join(t.TempDir(), "trap")
		script := fmt.Sprintf(`trap 'echo got TERM >> %s' TERM; echo ready; while :; do sleep 0.05; done`, file)
		holder := start(ctx, t, b.args("run", "--lock", lock, "--ttl=20s", "--grace=15s", "--", "sh", "-c", script)...)
		holder.waitLine(ctx, "ready")
		r := cli(ctx, t, nil, b.args("revoke", "--reason", "short", "--grace", "3s", lock)...)
		t.Logf("revoke: code %d\n%s%s", r.code, r.stdout, r.stderr)
		if r.code != 0 || !holderLine(lock, `released`).MatchString(r.stdout) {
			t.Fatalf("revoke --grace 3s: code %d, stdout %q; want 0 and released", r.code, r.stdout)
		}
		t.Logf("holder: %s", holder.stderr)
		if code := holder.wait(30 * time.Second); code != 128+9 {
			t.Errorf("holder: code %d, want 137 (its command killed); stderr %s", code, holder.stderr)
		}
		fileSays(t, file, "got TERM")
		if e := b.entries(t, lock); len(e) != 0 {
			t.Errorf("entries left behind: %v", e)
		}
	})
}

// TestRevokePermits: every permit of a semaphore is a holder; revoke asks
// them all, and revocable ones release.
func TestRevokePermits(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *testBackend) {
		t.Parallel()
		ctx := testCtx(t)
		lock := lockName(t)
		var holders []*bgProc
		for range 2 {
			p := start(ctx, t, b.args("run", "--lock", lock, "--permits", "2", "--", "sh", "-c", "trap 'exit 5' TERM; echo ready; while :; do sleep 0.05; done")...)
			p.waitLine(ctx, "ready")
			holders = append(holders, p)
		}
		r := cli(ctx, t, nil, b.args("revoke", "--reason", "resharding", lock)...)
		t.Logf("revoke: code %d\n%s%s", r.code, r.stdout, r.stderr)
		re := regexp.MustCompile(`(?m)^token ` + regexp.QuoteMeta(lock) + `/slot-[01]@[0-9]+\.[0-9a-f]+ \(.*\): released`)
		if r.code != 0 || len(re.FindAllString(r.stdout, -1)) != 2 {
			t.Fatalf("revoke of a semaphore of 2: code %d, stdout %q; want 0 and two released", r.code, r.stdout)
		}
		for i, p := range holders {
			if code := p.wait(30 * time.Second); code != 5 {
				t.Errorf("holder %d: code %d, want its command's 5; stderr %s", i, code, p.stderr)
			}
		}
	})
}

// TestRevokePermitsForced: --force takes every permit of a semaphore
// whose holders do not let go: each is forced, and each run exits 76.
func TestRevokePermitsForced(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *testBackend) {
		t.Parallel()
		ctx := testCtx(t)
		lock := lockName(t)
		var holders []*bgProc
		for range 2 {
			p := start(ctx, t, b.args("run", "--lock", lock, "--permits", "2", "--revocable=false", "--", "sh", "-c", "echo ready; read x")...)
			p.waitLine(ctx, "ready")
			holders = append(holders, p)
		}
		r := cli(ctx, t, nil, b.args("revoke", "--reason", "resharding", "--force", "--grace", "0", lock)...)
		t.Logf("revoke: code %d\n%s%s", r.code, r.stdout, r.stderr)
		re := regexp.MustCompile(`(?m)^token ` + regexp.QuoteMeta(lock) + `/slot-[01]@[0-9]+\.[0-9a-f]+ \(.*\): forced after the 0s grace period`)
		if r.code != 0 || len(re.FindAllString(r.stdout, -1)) != 2 {
			t.Fatalf("revoke --force of a semaphore of 2: code %d, stdout %q; want 0 and two forced", r.code, r.stdout)
		}
		for i, p := range holders {
			if code := p.wait(30 * time.Second); code != exitLost {
				t.Errorf("holder %d: code %d, want %d; stderr %s", i, code, exitLost, p.stderr)
			}
		}
		if rs := b.revocations(t, lock); len(rs) != 2 || rs[0].Outcome != distlock.RevokeForced || rs[1].Outcome != distlock.RevokeForced {
			t.Errorf("records: %+v, want two forced", rs)
		}
	})
}

// TestRevokeFree: revoking a free lock does nothing, says so, exits 0 and
// records nothing.
func TestRevokeFree(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *testBackend) {
		t.Parallel()
		ctx := testCtx(t)
		lock := lockName(t)
		r := cli(ctx, t, nil, b.args("revoke", "--reason", "just in case", lock)...)
		if r.code != 0 || r.stdout != `lock "`+lock+`" is free: nothing to revoke`+"\n" || r.stderr != "" {
			t.Fatalf("revoke of a free lock: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		if rs := b.revocations(t, lock); len(rs) != 0 {
			t.Errorf("records of a free lock's revocation: %+v", rs)
		}
		r = cli(ctx, t, nil, b.args("status", "--json", lock)...)
		if st := parseStatus(t, r); st.Revocations != nil {
			t.Errorf("status of a lock never revoked: revocations %+v", st.Revocations)
		}
	})
}

// TestRevokeNotRevocable: a holder that does not follow revocations
// (run --revocable=false) keeps the lock: revoke exits 75 with still-held;
// a second (and third) revoke asks nothing new, shows the first request
// and exits 75 as well, the lock being still held; status shows
// it pending; revoke --force takes the lock (exit 0, forced), the holder
// exits 76, and the record stays after the lock is free.
func TestRevokeNotRevocable(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *testBackend) {
		t.Parallel()
		ctx := testCtx(t)
		lock := lockName(t)
		holder := start(ctx, t, b.args("run", "--lock", lock, "--revocable=false", "--", "sh", "-c", "echo ready; read x")...)
		holder.waitLine(ctx, "ready")
		tok := b.inspect(t, lock)[0].Token

		r := cli(ctx, t, nil, b.args("revoke", "--reason", "first ask", "--by", "alice", "--grace", "1s", lock)...)
		t.Logf("revoke: code %d\n%s%s", r.code, r.stdout, r.stderr)
		if r.code != exitNotAcquired || !holderLine(lock, `still held after the 1s grace period$`).MatchString(r.stdout) || !strings.Contains(r.stderr, "--force") {
			t.Fatalf("revoke of a holder that does not let go: code %d, stdout %q, stderr %q; want %d, still held, a hint to use --force", r.code, r.stdout, r.stderr, exitNotAcquired)
		}

		// Asked already: not asked again, the first request is shown;
		// the lock is still held, so every repeat exits 75 as the first.
		for _, by := range []string{"bob", "carol"} {
			r = cli(ctx, t, nil, b.args("revoke", "--reason", "ask again", "--by", by, lock)...)
			t.Logf("revoke by %s: code %d\n%s%s", by, r.code, r.stdout, r.stderr)
			if r.code != exitNotAcquired || !holderLine(lock, `already revoked by alice at \S+: "first ask", grace 1s; still held after that 1s grace period$`).MatchString(r.stdout) ||
				!strings.Contains(r.stderr, "--force") || strings.Count(r.stderr, "\n") != 1 {
				t.Fatalf("repeated revoke by %s: code %d, stdout %q, stderr %q; want %d, the first request, and one line saying --force", by, r.code, r.stdout, r.stderr, exitNotAcquired)
			}
		}

		// status: the request is pending, prominently, in text and JSON.
		r = cli(ctx, t, nil, b.args("status", lock)...)
		t.Logf("status:\n%s", r.stdout)
		want := fmt.Sprintf(`REVOKED: token %s still holds after its grace period ended at `, tok)
		if lines := strings.Split(r.stdout, "\n"); r.code != 0 || len(lines) < 2 || !strings.HasPrefix(lines[1], want) || !strings.Contains(lines[1], `asked by alice at `) || !strings.Contains(lines[1], `"first ask"`) {
			t.Errorf("status: code %d, stdout %q; want its second line to start %q", r.code, r.stdout, want)
		}
		st := parseStatus(t, cli(ctx, t, nil, b.args("status", "--json", lock)...))
		if rv := st.Revocations; rv == nil || rv.Total != 1 || len(rv.Pending) != 1 || len(rv.Past) != 0 ||
			rv.Pending[0].Outcome != distlock.RevokeStillHeld || !rv.Pending[0].Holding || rv.Pending[0].Token != tok.String() || rv.Pending[0].By != "alice" {
			t.Errorf("status --json revocations: %+v, want one pending, still-held by alice", rv)
		}

		// --force takes it at once: the first grace period is over.
		r = cli(ctx, t, nil, b.args("revoke", "--reason", "take it", "--force", "--grace", "0", lock)...)
		t.Logf("forced revoke: code %d\n%s%s", r.code, r.stdout, r.stderr)
		if r.code != 0 || !holderLine(lock, `already revoked by alice .*; forced after that 1s grace period: its entry was deleted`).MatchString(r.stdout) {
			t.Fatalf("revoke --force: code %d, stdout %q, stderr %q; want 0 and forced", r.code, r.stdout, r.stderr)
		}
		if code := holder.wait(30 * time.Second); code != exitLost {
			t.Errorf("forced holder: code %d, want %d; stderr %s", code, exitLost, holder.stderr)
		}
		if e := b.entries(t, lock); len(e) != 0 {
			t.Errorf("entries after the forced revocation: %v", e)
		}

		// The audit record outlives the holder.
		rs := b.revocations(t, lock)
		if len(rs) != 1 || rs[0].Outcome != distlock.RevokeForced || !rs[0].Force || rs[0].By != "alice" || rs[0].Reason != "first ask" || rs[0].Token != tok.String() {
			t.Errorf("records: %+v, want alice's, forced", rs)
		}
		r = cli(ctx, t, nil, b.args("status", lock)...)
		t.Logf("status:\n%s", r.stdout)
		if !strings.HasPrefix(r.stdout, "lock "+lock+": free") || !strings.Contains(r.stdout, "revocations: 1 recorded") ||
			!regexp.MustCompile(fmt.Sprintf(`(?m)^  token %s: forced by .+ pid \d+ \("take it"\) at \S+; asked by alice at \S+: "first ask", grace 1s, force$`, regexp.QuoteMeta(tok.String()))).MatchString(r.stdout) {
			t.Errorf("status of the free lock: %q; want the forced revocation", r.stdout)
		}
		if strings.Contains(r.stdout, "REVOKED") {
			t.Errorf("status: a revocation shown pending after it was forced: %q", r.stdout)
		}
	})
}

// TestRevokeStatusPending: a library holder whose session follows
// revocations sees its Lease's Done close with ErrRevoked while the lock
// is still held; status shows the request pending meanwhile; when it
// unlocks, revoke exits 0 with released, and status shows the past
// record.
func TestRevokeStatusPending(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *testBackend) {
		t.Parallel()
		ctx := testCtx(t)
		lock := lockName(t)
		lease, err := b.revocableMutex(t, lock, "library holder").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rev := start(ctx, t, b.args("revoke", "--reason", "rolling restart", "--by", "carol", "--grace", "60s", lock)...)
		select {
		case <-lease.Done():
		case <-ctx.Done():
			t.Fatal("the holder was not told of the revocation")
		}
		var re *distlock.RevokedError
		if err := lease.Err(); !errors.Is(err, distlock.ErrRevoked) || !errors.As(err, &re) || re.By != "carol" || re.Reason != "rolling restart" || re.Grace != time.Minute {
			t.Fatalf("lease.Err() = %v, want a RevokedError from carol", err)
		}

		r := cli(ctx, t, nil, b.args("status", lock)...)
		t.Logf("status:\n%s", r.stdout)
		want := fmt.Sprintf(`REVOKED: token %s asked to let go by carol at `, lease.Token())
		if lines := strings.Split(r.stdout, "\n"); r.code != 0 || len(lines) < 2 || !strings.HasPrefix(lines[1], want) || !strings.Contains(lines[1], `: "rolling restart"; grace 1m0s, ends `) {
			t.Errorf("status: code %d, stdout %q; want its second line to start %q", r.code, r.stdout, want)
		}
		r = cli(ctx, t, nil, b.args("status", "--json", lock)...)
		st := parseStatus(t, r)
		if rv := st.Revocations; rv == nil || rv.Total != 1 || len(rv.Pending) != 1 || len(rv.Past) != 0 ||
			rv.Pending[0].Outcome != distlock.RevokePending || !rv.Pending[0].Holding || rv.Pending[0].GraceEnds.Sub(rv.Pending[0].Requested) != time.Minute {
			t.Errorf("status --json revocations: %+v, want one pending", rv)
		}
		// The field names are the interface.
		var raw struct {
			Revocations struct {
				Total   *int             `json:"total"`
				Pending []map[string]any `json:"pending"`
				Past    []map[string]any `json:"past"`
			} `json:"revocations"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &raw); err != nil {
			t.Fatal(err)
		}
		if raw.Revocations.Total == nil || len(raw.Revocations.Pending) != 1 || raw.Revocations.Past == nil {
			t.Fatalf("status --json: revocations %+v, want total, pending and past ([])", raw.Revocations)
		}
		for _, f := range []string{"lock", "key", "token", "holder", "by", "reason", "grace", "force", "requested", "outcome", "grace_ends", "holding"} {
			if _, ok := raw.Revocations.Pending[0][f]; !ok {
				t.Errorf("status --json: the pending revocation has no %q: %v", f, raw.Revocations.Pending[0])
			}
		}
		if _, ok := raw.Revocations.Pending[0]["ended"]; ok {
			t.Errorf("status --json: a pending revocation has an end: %v", raw.Revocations.Pending[0])
		}

		// The lock is still held: its holder finishes and unlocks.
		if err := lease.Unlock(ctx); err != nil {
			t.Fatalf("Unlock of a revoked lease: %v, want nil", err)
		}
		if code := rev.wait(30 * time.Second); code != 0 {
			t.Fatalf("revoke: code %d; stderr %s", code, rev.stderr)
		}
		if l := rev.nextLine(ctx, "revoke's line"); !holderLine(lock, "released").MatchString(l) || !strings.Contains(l, "(library holder)") {
			t.Errorf("revoke: %q, want the holder released", l)
		}
		st = parseStatus(t, cli(ctx, t, nil, b.args("status", "--json", lock)...))
		if rv := st.Revocations; !st.Free || rv == nil || len(rv.Pending) != 0 || len(rv.Past) != 1 || rv.Past[0].Outcome != distlock.RevokeReleased || rv.Past[0].Holding {
			t.Errorf("status --json of the free lock: %+v, want one past revocation, released", rv)
		}
	})
}

// TestRevokeUsage: usage errors exit 64 with one line; an unreachable
// cluster 69.
func TestRevokeUsage(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"revoke", "--etcd=127.0.0.1:1", "x"}, "--reason is required"},
		{[]string{"revoke", "--etcd=127.0.0.1:1", "--reason", "  ", "x"}, "--reason is required"},
		{[]string{"revoke", "--etcd=127.0.0.1:1", "--reason", "r"}, "no lock name"},
		{[]string{"revoke", "--etcd=127.0.0.1:1", "--reason", "r", "a", "b"}, "one lock name"},
		{[]string{"revoke", "--etcd=127.0.0.1:1", "--reason", "r", "--grace", "-1s", "x"}, "--grace"},
		{[]string{"revoke", "--etcd=127.0.0.1:1", "--reason", "r", "a//b"}, "invalid lock name"},
		{[]string{"revoke", "--bogus", "x"}, "not defined"},
		{[]string{"revoke", "--reason", "r", "x"}, "no cluster"},
	} {
		r := cli(ctx, t, []string{"ETCDCTL_ENDPOINTS=", "DISTLOCK_ZK="}, tc.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%q: code %d (want %d), stderr %q (want one line with %q)", tc.args, r.code, exitUsage, r.stderr, tc.want)
		}
	}
	r := cli(ctx, t, nil, "revoke", "--etcd=127.0.0.1:1", "--dial-timeout=300ms", "--reason", "r", "x")
	if r.code != exitUnreachable {
		t.Errorf("unreachable etcd: code %d, stderr %q; want %d", r.code, r.stderr, exitUnreachable)
	}
	r = cli(ctx, t, nil, "revoke", "--help")
	for _, want := range []string{"Examples:", "Exit status:", "--force", "--reason"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("revoke --help: code %d, stdout lacks %q", r.code, want)
		}
	}
	r = cli(ctx, t, nil, "--help")
	if !regexp.MustCompile(`(?m)^  revoke `).MatchString(r.stdout) {
		t.Errorf("--help does not list revoke: %q", r.stdout)
	}
	r = cli(ctx, t, nil, "run", "--help")
	if !strings.Contains(r.stdout, "-revocable") {
		t.Errorf("run --help does not offer --revocable: %q", r.stdout)
	}
}

// TestRevokeSignal: a signal stops revoke's wait (exit 128+signal); the
// request stays recorded, pending, and its holder still sees it.
func TestRevokeSignal(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *testBackend) {
		t.Parallel()
		ctx := testCtx(t)
		lock := lockName(t)
		lease, err := b.revocableMutex(t, lock, "slow holder").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer lease.Unlock(context.Background())
		rev := start(ctx, t, b.args("revoke", "--reason", "interrupted", "--grace", "5m", lock)...)
		select {
		case <-lease.Done(): // the request is recorded: revoke waits now
		case <-ctx.Done():
			t.Fatal("the holder was not told of the revocation")
		}
		if err := rev.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		if code := rev.wait(30 * time.Second); code != 128+int(syscall.SIGINT) {
			t.Fatalf("revoke after SIGINT: code %d, want 130; stderr %s", code, rev.stderr)
		}
		if s := rev.stderr.String(); !strings.Contains(s, "got SIGINT") || !strings.Contains(s, "stays") {
			t.Errorf("revoke stderr: %q; want it to say the request stays", s)
		}
		if rs := b.revocations(t, lock); len(rs) != 1 || rs[0].Outcome != distlock.RevokePending {
			t.Errorf("records: %+v, want one pending", rs)
		}
	})
}

// TestRevokeKillAfter: a revoked command gets run's stop grace, or less
// when the revocation's grace period ends sooner (less a margin for the
// release).
func TestRevokeKillAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		stop, grace, since time.Duration
		want               time.Duration
	}{
		{7 * time.Second, 30 * time.Second, 0, 7 * time.Second},                // the stop grace is shorter
		{7 * time.Second, 4 * time.Second, 0, 3 * time.Second},                 // grace less its quarter
		{7 * time.Second, 20 * time.Second, 15 * time.Second, 4 * time.Second}, // noticed late: what is left, less 1s
		{7 * time.Second, 0, 0, 0},                                             // no grace: SIGKILL at once
		{7 * time.Second, 2 * time.Second, 5 * time.Second, 0},                 // over already
		{0, 30 * time.Second, 0, 0},                                            // --grace 0
	} {
		r := distlock.Revocation{Requested: now.Add(-tc.since), Grace: tc.grace}
		if got := revokeKillAfter(tc.stop, r, now); got != tc.want {
			t.Errorf("stop grace %v, revocation grace %v requested %v ago: %v, want %v", tc.stop, tc.grace, tc.since, got, tc.want)
		}
	}
}
