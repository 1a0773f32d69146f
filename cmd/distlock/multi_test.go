package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// multiEnv is a script that prints run's lock environment, then "ready",
// and holds until its stdin closes.
const multiEnv = `echo "lock=$DISTLOCK_LOCK"; echo "token=$DISTLOCK_TOKEN"; echo "locks=$DISTLOCK_LOCKS"; echo "tokens=$DISTLOCK_TOKENS"; echo ready; read x; exit 0`

// envOf reads the lines multiEnv prints, up to "ready".
func envOf(ctx context.Context, p *bgProc) map[string]string {
	p.t.Helper()
	env := map[string]string{}
	for {
		l := p.nextLine(ctx, "the command's environment")
		if l == "ready" {
			return env
		}
		k, v, _ := strings.Cut(l, "=")
		env[k] = v
	}
}

// TestRunMulti: run with two --lock names holds both in one acquisition:
// the command sees every token (sorted by name, one SEQ and OWNER); a
// plain run of one of the names is excluded, and a second multi run with
// the names the other way round waits, then runs; status marks the
// entries; a plain holder of one name excludes a multi run.
func TestRunMulti(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *testBackend) {
		t.Parallel()
		ctx := testCtx(t)
		base := lockName(t)
		za, aa := base+"/z", base+"/a" // given z first: sorted, a comes first

		p1 := start(ctx, t, b.args("run", "--lock", za, "--lock", aa, "--", "sh", "-c", multiEnv)...)
		env := envOf(ctx, p1)
		t.Logf("environment: %v", env)
		if env["lock"] != aa || env["locks"] != aa+" "+za {
			t.Errorf("DISTLOCK_LOCK %q, DISTLOCK_LOCKS %q; want %q and %q", env["lock"], env["locks"], aa, aa+" "+za)
		}
		toks := strings.Fields(env["tokens"])
		if len(toks) != 2 || env["token"] != toks[0] {
			t.Fatalf("DISTLOCK_TOKENS %q, DISTLOCK_TOKEN %q: want two tokens, the first DISTLOCK_TOKEN", env["tokens"], env["token"])
		}
		var parsed []distlock.Token
		for i, s := range toks {
			tok, err := distlock.ParseToken(s)
			if err != nil {
				t.Fatalf("token %q: %v", s, err)
			}
			if want := []string{aa, za}[i]; tok.Name != want {
				t.Errorf("token %d %q: lock %q, want %q", i, s, tok.Name, want)
			}
			parsed = append(parsed, tok)
		}
		if parsed[0].Seq != parsed[1].Seq || parsed[0].Owner != parsed[1].Owner {
			t.Errorf("tokens %q: want one SEQ and OWNER (one acquisition)", toks)
		}
		// The store's entries are the tokens'.
		for _, tok := range parsed {
			q := b.inspect(t, tok.Name)
			if len(q) != 1 || q[0].Token != tok || !q[0].Holding {
				t.Errorf("lock %s: queue %+v, want the holder of %v only", tok.Name, q, tok)
			}
		}

		// A plain run of one name is excluded.
		r := cli(ctx, t, nil, b.args("run", "--lock", za, "--no-wait", "--", "echo", "ran")...)
		if r.code != exitNotAcquired || r.stdout != "" {
			t.Errorf("plain --no-wait on a name of a held multi-lock: code %d, stdout %q, stderr %q; want %d", r.code, r.stdout, r.stderr, exitNotAcquired)
		}

		// status shows the multi-lock's entry.
		checkMultiStatus(ctx, t, b, aa, za, parsed[0])

		// The names the other way round: waits, no deadlock, then runs.
		p2 := start(ctx, t, b.args("run", "--lock", aa, "--lock", za, "--wait", "1m", "--", "sh", "-c", `echo "second $DISTLOCK_TOKENS"`)...)
		b.waitQueued(t, aa, 2)
		b.waitQueued(t, za, 2)
		r = cli(ctx, t, nil, b.args("status", aa, za)...)
		if want := fmt.Sprintf("multi: entry 2 waits for %s+%s together", aa, za); r.code != 0 || strings.Count(r.stdout, want) != 2 {
			t.Errorf("status %s %s with a multi-lock waiting: code %d, stdout %q; want in each queue %q", aa, za, r.code, r.stdout, want)
		}
		select {
		case l := <-p2.lines:
			t.Fatalf("the second multi run ran while the first held: %q", l)
		case <-time.After(200 * time.Millisecond):
		}
		p1.stdin.Close()
		if code := p1.wait(30 * time.Second); code != 0 {
			t.Fatalf("first: code %d, stderr %s", code, p1.stderr)
		}
		l := p2.nextLine(ctx, "the second multi run's command")
		if !regexp.MustCompile(`^second ` + regexp.QuoteMeta(aa) + `@(\d+)\.[0-9a-f]+ ` + regexp.QuoteMeta(za) + `@(\d+)\.[0-9a-f]+$`).MatchString(l) {
			t.Errorf("second run: %q", l)
		}
		if code := p2.wait(30 * time.Second); code != 0 {
			t.Fatalf("second: code %d, stderr %s", code, p2.stderr)
		}
		for _, n := range []string{aa, za} {
			if e := b.entries(t, n); len(e) != 0 {
				t.Errorf("lock %s: entries left behind: %v", n, e)
			}
		}

		// A plain holder of one name excludes the multi-lock.
		p3 := start(ctx, t, b.args("run", "--lock", za, "--", "sh", "-c", "echo ready; read x; exit 0")...)
		p3.waitLine(ctx, "ready")
		r = cli(ctx, t, nil, b.args("run", "--lock", aa, "--lock", za, "--no-wait", "--", "echo", "ran")...)
		t.Logf("multi --no-wait: %s", r.stderr)
		if r.code != exitNotAcquired || r.stdout != "" || !strings.Contains(r.stderr, fmt.Sprintf("lock %q not acquired (--no-wait)", aa+"+"+za)) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("multi --no-wait on a held name: code %d, stdout %q, stderr %q; want %d and one line naming the lock %s", r.code, r.stdout, r.stderr, exitNotAcquired, aa+"+"+za)
		}
		if e := b.entries(t, aa); len(e) != 0 {
			t.Errorf("lock %s: the failed multi run left entries: %v", aa, e)
		}
		p3.stdin.Close()
		if code := p3.wait(30 * time.Second); code != 0 {
			t.Fatalf("plain holder: code %d, stderr %s", code, p3.stderr)
		}
	})
}

// checkMultiStatus checks that status marks the multi-lock entry holding
// locks a and z (with token tok of a): on etcd from one name alone, on
// ZooKeeper from both names given.
func checkMultiStatus(ctx context.Context, t *testing.T, b *testBackend, a, z string, tok distlock.Token) {
	t.Helper()
	both := []string{a, z}
	line := fmt.Sprintf("multi: entry 1 holds %s+%s together: ", a, z)
	if b.name == "etcd" {
		r := cli(ctx, t, nil, b.args("status", z)...)
		t.Logf("status %s:\n%s", z, r.stdout)
		if r.code != 0 || !strings.Contains(r.stdout, line+"one acquisition of 2 locks") {
			t.Errorf("status %s: code %d, stdout %q, stderr %q; want a line %q", z, r.code, r.stdout, r.stderr, line)
		}
		st := parseStatus(t, cli(ctx, t, nil, b.args("status", "--json", a)...))
		if m := st.Entries[0].Multi; m == nil || !slices.Equal(m.Locks, both) || !m.Complete {
			t.Errorf("status --json %s: multi %+v, want locks %q, complete", a, m, both)
		}
	} else {
		// One name: ZooKeeper cannot tell.
		r := cli(ctx, t, nil, b.args("status", z)...)
		if r.code != 0 || strings.Contains(r.stdout, "multi:") {
			t.Errorf("status %s on ZooKeeper: code %d, stdout %q", z, r.code, r.stdout)
		}
	}
	r := cli(ctx, t, nil, b.args("status", a, z)...)
	t.Logf("status %s %s:\n%s", a, z, r.stdout)
	parts := strings.Split(r.stdout, "\n\n")
	if r.code != 0 || len(parts) != 2 || !strings.HasPrefix(parts[0], "lock "+a+": held") || !strings.HasPrefix(parts[1], "lock "+z+": held") ||
		!strings.Contains(parts[0], line) || !strings.Contains(parts[1], line) {
		t.Errorf("status %s %s: code %d, stdout %q, stderr %q; want both queues, each with a line %q", a, z, r.code, r.stdout, r.stderr, line)
	}
	sts := parseStatusList(t, cli(ctx, t, nil, b.args("status", "--json", z, a)...))
	if len(sts) != 2 || sts[0].Lock != z || sts[1].Lock != a {
		t.Fatalf("status --json %s %s: %+v, want both, in the order given", z, a, sts)
	}
	for _, st := range sts {
		e := st.Entries[0]
		if m := e.Multi; len(st.Entries) != 1 || m == nil || !slices.Equal(m.Locks, both) || m.Complete != (b.name == "etcd") || e.Seq != tok.Seq || e.Owner != fmt.Sprintf("%x", tok.Owner) {
			t.Errorf("status --json of %s: entries %+v, multi %+v; want one, of token SEQ %d, multi %q, complete on etcd only", st.Lock, st.Entries, m, tok.Seq, both)
		}
	}
}

func parseStatusList(t *testing.T, r result) []lockStatus {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("status --json: exit %d, stderr %q", r.code, r.stderr)
	}
	var sts []lockStatus
	if err := json.Unmarshal([]byte(r.stdout), &sts); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r.stdout)
	}
	return sts
}

// TestRunMultiLoss: the loss of one name's entry is the loss of the
// multi-lock: COMMAND gets SIGTERM, distlock exits 76 naming the lock and
// the name whose entry went, and releases the other names.
func TestRunMultiLoss(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *testBackend) {
		t.Parallel()
		ctx := testCtx(t)
		base := lockName(t)
		a, z := base+"/a", base+"/z"
		file := filepath.Join(t.TempDir(), "trap")
		script := fmt.Sprintf(`trap 'echo got TERM >> %s; exit 0' TERM; echo ready; while :; do sleep 0.05; done`, file)
		holder := start(ctx, t, b.args("run", "--lock", a, "--lock", z, "--ttl=10s", "--", "sh", "-c", script)...)
		holder.waitLine(ctx, "ready")

		b.remove(t, z)
		if code := holder.wait(30 * time.Second); code != exitLost {
			t.Fatalf("code %d, want %d; stderr %s", code, exitLost, holder.stderr)
		}
		t.Logf("lost: %s", holder.stderr)
		if s := holder.stderr.String(); !regexp.MustCompile(`(?m)^distlock: lock "`+regexp.QuoteMeta(a+"+"+z)+`" lost while the command ran; .*`+regexp.QuoteMeta(z)+`.*deleted.*$`).MatchString(s) || strings.Count(s, "distlock:") != 1 {
			t.Errorf("stderr: want one line naming the lock, the name lost, and why: %q", s)
		}
		fileSays(t, file, "got TERM")
		if e := b.entries(t, a); len(e) != 0 {
			t.Errorf("lock %s: entries left behind after the loss: %v", a, e)
		}
	})
}

// TestRunMultiRevoke: a forced revocation of one name takes a multi-lock
// that does not follow revocations (exit 76); one that does stops its
// command on a revocation of any of its names and releases them all.
func TestRunMultiRevoke(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *testBackend) {
		t.Parallel()
		ctx := testCtx(t)
		base := lockName(t)
		a, z := base+"/a", base+"/z"

		holder := start(ctx, t, b.args("run", "--lock", z, "--lock", a, "--revocable=false", "--", "sh", "-c", "echo ready; read x; exit 0")...)
		holder.waitLine(ctx, "ready")
		r := cli(ctx, t, nil, b.args("revoke", "--reason", "take it", "--force", "--grace", "0", z)...)
		t.Logf("forced revoke: code %d\n%s%s", r.code, r.stdout, r.stderr)
		if r.code != 0 {
			t.Fatalf("revoke --force %s: code %d, stderr %q", z, r.code, r.stderr)
		}
		if code := holder.wait(30 * time.Second); code != exitLost {
			t.Fatalf("forced holder: code %d, want %d; stderr %s", code, exitLost, holder.stderr)
		}
		if s := holder.stderr.String(); !strings.Contains(s, fmt.Sprintf("lock %q lost while the command ran", a+"+"+z)) {
			t.Errorf("forced holder's stderr: %q", s)
		}

		file := filepath.Join(t.TempDir(), "trap")
		script := fmt.Sprintf(`trap 'echo got TERM >> %s; exit 0' TERM; echo ready; while :; do sleep 0.05; done`, file)
		holder = start(ctx, t, b.args("run", "--lock", z, "--lock", a, "--ttl=10s", "--", "sh", "-c", script)...)
		holder.waitLine(ctx, "ready")
		r = cli(ctx, t, nil, b.args("revoke", "--reason", "maintenance", "--by", "ops-test", "--grace", "20s", a)...)
		t.Logf("revoke: code %d\n%s%s", r.code, r.stdout, r.stderr)
		if r.code != 0 || !holderLine(a, `released [0-9.]+m?s after the request$`).MatchString(r.stdout) {
			t.Fatalf("revoke %s: code %d, stdout %q, stderr %q; want 0 and released", a, r.code, r.stdout, r.stderr)
		}
		if code := holder.wait(30 * time.Second); code != 0 {
			t.Fatalf("revoked holder: code %d, want its command's 0; stderr %s", code, holder.stderr)
		}
		fileSays(t, file, "got TERM")
		if s := holder.stderr.String(); !strings.Contains(s, fmt.Sprintf(`distlock: lock %q revoked: by ops-test: "maintenance"`, a+"+"+z)) {
			t.Errorf("revoked holder's stderr: %q", s)
		}
		for _, n := range []string{a, z} {
			if e := b.entries(t, n); len(e) != 0 {
				t.Errorf("lock %s: entries left behind: %v", n, e)
			}
		}
	})
}

// TestRunMultiConcurrent: multi runs of the same names in opposite
// orders, with plain runs of each name mixed in, all at once: every one
// runs (none deadlocks), and never two at once on a name.
func TestRunMultiConcurrent(t *testing.T) {
	t.Parallel()
	b := etcdBackend(t)
	ctx := testCtx(t)
	base := lockName(t)
	a, z := base+"/a", base+"/z"
	dir := t.TempDir()
	// Each command marks the names it holds for a moment; finding a
	// mark already there means two held a name at once.
	hold := func(names ...string) string {
		var s []string
		for _, n := range names {
			f := filepath.Join(dir, strings.ReplaceAll(n, "/", "_"))
			s = append(s, fmt.Sprintf(`if [ -e %[1]s ]; then echo overlap; fi; touch %[1]s`, f))
		}
		s = append(s, "sleep 0.2")
		for _, n := range names {
			s = append(s, "rm -f "+filepath.Join(dir, strings.ReplaceAll(n, "/", "_")))
		}
		return strings.Join(s, "; ") + "; echo done"
	}
	var procs []*bgProc
	for i := range 3 {
		procs = append(procs,
			start(ctx, t, b.args("run", "--lock", a, "--lock", z, "--wait", "2m", "--shell", "--", hold(a, z))...),
			start(ctx, t, b.args("run", "--lock", z, "--lock", a, "--wait", "2m", "--shell", "--", hold(a, z))...),
			start(ctx, t, b.args("run", "--lock", []string{a, z}[i%2], "--wait", "2m", "--shell", "--", hold([]string{a, z}[i%2]))...))
	}
	for i, p := range procs {
		if l := p.nextLine(ctx, "a run's command"); l != "done" {
			t.Errorf("run %d: %q", i, l)
		}
		if code := p.wait(time.Minute); code != 0 {
			t.Errorf("run %d: code %d, stderr %s", i, code, p.stderr)
		}
	}
}

// TestRunMultiUsage: bad --lock lists are usage errors, in one line.
func TestRunMultiUsage(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	const e = "--etcd=127.0.0.1:1"
	var many []string
	for i := range distlock.MaxMultiNames + 1 {
		many = append(many, "--lock", fmt.Sprintf("l%d", i))
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", e, "--lock", "a", "--lock", "b", "--lock", "a", "--", "true"}, `--lock "a" given twice`},
		{append(append([]string{"run", e}, many...), "--", "true"), "--lock given 33 times: at most 32 locks"},
		{[]string{"run", e, "--lock", "a", "--lock", "b//c", "--", "true"}, `--lock "b//c": invalid lock name`},
		{[]string{"run", e, "--lock", "a", "--lock", "b", "--permits", "2", "--", "true"}, "--permits with --lock given 2 times"},
		{[]string{"once", e, "--lock", "a", "--lock", "b", "--slot", "s", "--", "true"}, "--lock given 2 times; once takes one lock"},
		{[]string{"status", e, "a", "b", "a"}, `lock "a" given twice`},
		{[]string{"status", e, "--watch", "a", "b"}, "--watch follows one lock"},
		{[]string{"status", e, "--fence", "/f", "a", "b"}, "--fence audits one lock's fence"},
	} {
		r := cli(ctx, t, []string{"ETCDCTL_ENDPOINTS=", "DISTLOCK_ZK="}, tc.args...)
		if r.code != exitUsage || !strings.HasPrefix(r.stderr, "distlock: "+tc.want) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%q: code %d, stderr %q; want %d and one line starting %q", tc.args, r.code, r.stderr, exitUsage, "distlock: "+tc.want)
		}
	}
	r := cli(ctx, t, nil, "run", "--help")
	for _, want := range []string{"DISTLOCK_TOKENS", "DISTLOCK_LOCKS", "--lock NAME [--lock NAME...]", "deadlock"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("run --help lacks %q", want)
		}
	}
	r = cli(ctx, t, nil, "status", "--help")
	for _, want := range []string{"NAME [NAME...]", "multi:", `"multi"`} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("status --help lacks %q", want)
		}
	}
}
