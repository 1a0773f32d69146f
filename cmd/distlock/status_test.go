package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/cmd/internal/backend"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/fencing/etcdfence"
	"github.com/distlock/distlock/fencing/zkfence"
	"github.com/distlock/distlock/integration/locktest"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var update = flag.Bool("update", false, "rewrite testdata/status.golden from this run's output")

// testBackend is one of the run's shared clusters as a test of the binary
// sees it: the flags that point the binary at it (under a prefix of the
// test's own) and, for the test process itself, a way to take locks with
// the library directly and to read what the binary wrote.
type testBackend struct {
	name   string   // "etcd" or "zk"
	flags  []string // --etcd=... or --zk=..., and --prefix=...
	prefix string
	etcd   *clientv3.Client
	ens    func() *zk.Conn // a new connection with a session of its own
	zk     *zk.Conn
}

var prefixSeq atomic.Int64

// forEachBackend runs f as a subtest on the etcd cluster and on the
// ZooKeeper ensemble.
func forEachBackend(t *testing.T, f func(t *testing.T, b *testBackend)) {
	t.Run("etcd", func(t *testing.T) { f(t, etcdBackend(t)) })
	t.Run("zk", func(t *testing.T) { f(t, zkBackend(t)) })
}

// etcdBackend is the run's etcd cluster, under a prefix of the test's own.
func etcdBackend(t *testing.T) *testBackend {
	p := fmt.Sprintf("/t%d/", prefixSeq.Add(1))
	cli, err := etcdCluster(t).Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return &testBackend{name: "etcd", flags: []string{etcdFlag(t), "--prefix=" + p}, prefix: p, etcd: cli}
}

// zkBackend is the run's ZooKeeper ensemble, under a prefix of the test's
// own.
func zkBackend(t *testing.T) *testBackend {
	p := fmt.Sprintf("/t%d", prefixSeq.Add(1))
	ens := zkEnsemble(t)
	connect := func() *zk.Conn {
		conn, events, err := ens.Connect(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for range events {
			}
		}()
		t.Cleanup(conn.Close)
		return conn
	}
	return &testBackend{name: "zk", flags: []string{zkFlag(t), "--prefix=" + p}, prefix: p, ens: connect, zk: connect()}
}

// args returns the binary's arguments: sub, the backend's flags, then rest.
func (b *testBackend) args(sub string, rest ...string) []string {
	return append(append([]string{sub}, b.flags...), rest...)
}

// mutex returns lock name on a new session (a connection of its own on
// ZooKeeper) whose entries say holder. The session ends with the test.
func (b *testBackend) mutex(t *testing.T, name, holder string) distlock.Locker {
	t.Helper()
	ctx := testCtx(t)
	var (
		m   distlock.Locker
		err error
	)
	switch b.name {
	case "etcd":
		s, serr := etcdlock.NewSession(ctx, b.etcd, recipe.WithPrefix(b.prefix), recipe.WithHolder(holder))
		if serr != nil {
			t.Fatal(serr)
		}
		t.Cleanup(func() { s.Close(context.Background()) })
		m, err = recipe.NewMutex(s, name)
	default:
		s, serr := zklock.NewSession(ctx, b.ens(), recipe.WithPrefix(b.prefix), recipe.WithHolder(holder))
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

// admin returns the library's Admin of b's locks.
func (b *testBackend) admin(t *testing.T) backend.Admin {
	t.Helper()
	var (
		a   backend.Admin
		err error
	)
	if b.name == "etcd" {
		a, err = etcdlock.NewAdmin(b.etcd, b.prefix)
	} else {
		a, err = zklock.NewAdmin(b.zk, b.prefix)
	}
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// inspect reads lock name's queue.
func (b *testBackend) inspect(t *testing.T, name string) []distlock.QueueEntry {
	t.Helper()
	q, err := b.admin(t).Inspect(testCtx(t), name)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// entries returns the keys of lock name's entries in the store.
func (b *testBackend) entries(t *testing.T, name string) []string {
	t.Helper()
	var keys []string
	for _, e := range b.inspect(t, name) {
		keys = append(keys, e.Key)
	}
	return keys
}

// remove deletes lock name's entries behind their holders' backs.
func (b *testBackend) remove(t *testing.T, name string) {
	t.Helper()
	keys := b.entries(t, name)
	if len(keys) == 0 {
		t.Fatalf("lock %s: no entry to remove", name)
	}
	for _, k := range keys {
		var err error
		if b.name == "etcd" {
			_, err = b.etcd.Delete(testCtx(t), k)
		} else {
			err = b.zk.Delete(k, -1)
		}
		if err != nil {
			t.Fatalf("delete %s: %v", k, err)
		}
	}
}

// waitQueued waits until lock name has at least n entries in its queue,
// on the store's notifications (the library's WatchQueue).
func (b *testBackend) waitQueued(t *testing.T, name string, n int) {
	t.Helper()
	enough := errors.New("enough entries")
	f := func(q []distlock.QueueEntry) error {
		if len(q) >= n {
			return enough
		}
		return nil
	}
	err := b.admin(t).WatchQueue(testCtx(t), name, f)
	if !errors.Is(err, enough) {
		t.Fatalf("waiting for %d entries queued for lock %s: %v", n, name, err)
	}
}

func TestStatus(t *testing.T) {
	golden := readGolden(t)
	got := map[string]string{}
	forEachBackend(t, func(t *testing.T, b *testBackend) {
		ctx := testCtx(t)
		const name = "reports/daily"

		// Free.
		r := cli(ctx, t, nil, b.args("status", name)...)
		if r.code != 0 {
			t.Fatalf("status of a free lock: exit %d, stderr %q", r.code, r.stderr)
		}
		got[b.name+"/free"] = r.stdout
		checkGolden(t, golden, b.name+"/free", r.stdout)
		r = cli(ctx, t, nil, b.args("status", "--json", name)...)
		st := parseStatus(t, r)
		if !st.Free || st.Holders != 0 || st.Waiters != 0 || st.Entries == nil || len(st.Entries) != 0 {
			t.Errorf("--json of a free lock: %+v", st)
		}

		// One holder, two waiters, held from this process.
		since := time.Now().UTC().Add(-90 * time.Second).Format(time.RFC3339)
		holders := []string{
			"host-a pid 100 holder since " + since,
			"host-b pid 200 waiter since " + since,
			"host-c pid 300 waiter",
		}
		lease, err := b.mutex(t, name, holders[0]).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer lease.Unlock(context.Background())
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		for i, h := range holders[1:] {
			go b.mutex(t, name, h).Lock(wctx)
			b.waitQueued(t, name, i+2)
		}

		r = cli(ctx, t, nil, b.args("status", name)...)
		if r.code != 0 {
			t.Fatalf("status of a held lock: exit %d, stderr %q", r.code, r.stderr)
		}
		t.Logf("status:\n%s", r.stdout)
		norm := normalizeStatus(r.stdout)
		got[b.name+"/held"] = norm
		checkGolden(t, golden, b.name+"/held", norm)
		// The whole token, as its holder's DISTLOCK_TOKEN says it.
		if !regexp.MustCompile(`(?m)^1\s+holder\s+exclusive\s+` + regexp.QuoteMeta(lease.Token().String()) + `\s`).MatchString(r.stdout) {
			t.Errorf("the holder's token %v is not in the output's first row", lease.Token())
		}

		// Flags after the name work too.
		r = cli(ctx, t, nil, append([]string{"status", name, "--json"}, b.flags...)...)
		st = parseStatus(t, r)
		if st.Free || st.Holders != 1 || st.Waiters != 2 || len(st.Entries) != 3 || st.Lock != name {
			t.Fatalf("--json of a held lock: %+v", st)
		}
		want := map[string]string{"etcd": "etcd", "zk": "zookeeper"}[b.name]
		if st.Backend != want {
			t.Errorf("backend %q, want %q", st.Backend, want)
		}
		for i, e := range st.Entries {
			role := "waiting"
			if i == 0 {
				role = "holder"
			}
			if e.Position != i+1 || e.Role != role || e.Holder != holders[i] || e.Kind != "exclusive" || e.Owner == "" || e.Key == "" {
				t.Errorf("entry %d: %+v", i, e)
			}
			tok, err := distlock.ParseToken(e.Token)
			if err != nil || tok.Seq != e.Seq || tok.Name != name || fmt.Sprintf("%x", tok.Owner) != e.Owner {
				t.Errorf("entry %d: token %q, seq %d: %v", i, e.Token, e.Seq, err)
			}
		}
		// etcd: the age comes from the entry's "since" (90s ago);
		// ZooKeeper: from the node's ctime (just now).
		minAge := map[string]int64{"etcd": 89, "zk": 0}[b.name]
		if e := st.Entries[0]; e.Token != lease.Token().String() || e.AgeSeconds == nil || *e.AgeSeconds < minAge || e.Created == nil {
			t.Errorf("holder entry %+v, want token %v, age ≥ %ds", e, lease.Token(), minAge)
		}
		// The third has no "since": known on ZooKeeper (ctime), not on etcd.
		if e := st.Entries[2]; (e.AgeSeconds == nil) != (b.name == "etcd") {
			t.Errorf("entry 3's age %v on %s", e.AgeSeconds, b.name)
		}
	})
	if *update {
		writeGolden(t, golden, got)
	}
}

func TestStatusUsage(t *testing.T) {
	ctx := testCtx(t)
	for _, args := range [][]string{
		{"status", "--etcd=127.0.0.1:1"},
		{"status", "--etcd=127.0.0.1:1", "a", "b", "a"},
		{"status", "--etcd=127.0.0.1:1", "a@1"},
		{"status", "--bogus", "a"},
		{"status", "a"}, // no cluster
	} {
		r := cli(ctx, t, []string{"ETCDCTL_ENDPOINTS=", "DISTLOCK_ZK="}, args...)
		if r.code != exitUsage || r.stderr == "" {
			t.Errorf("%q: exit %d, stderr %q; want %d", args, r.code, r.stderr, exitUsage)
		}
	}
	r := cli(ctx, t, nil, "status", "--help")
	if r.code != 0 || !strings.Contains(r.stdout, "Examples:") || !strings.Contains(r.stdout, `"age_seconds"`) {
		t.Errorf("--help: exit %d, stdout %q", r.code, r.stdout)
	}
	r = cli(ctx, t, nil, "status", "--etcd=127.0.0.1:1", "--dial-timeout=300ms", "a")
	if r.code != exitUnreachable {
		t.Errorf("unreachable etcd: exit %d, stderr %q; want %d", r.code, r.stderr, exitUnreachable)
	}
}

func parseStatus(t *testing.T, r result) lockStatus {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("status --json: exit %d, stderr %q", r.code, r.stderr)
	}
	var st lockStatus
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r.stdout)
	}
	return st
}

var (
	// A row of status's table: POS, ROLE ("leader" for an election's),
	// KIND ("candidate pP" for a candidate of priority P), TOKEN ("-" for
	// a waiting candidate), OWNER, AGE, HOLDER.
	statusRow = regexp.MustCompile(`^(\d+)\s+(holder|waiting|leader)\s+(exclusive|shared|counted|slot \d+|candidate(?: p-?\d+)?)\s+(?:\S+@\d+\.[0-9a-f]+|-)\s+(?:lease|session) [0-9a-f]+\s+(\S+)\s+(.*)$`)
	rfc3339   = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)
)

// normalizeStatus replaces what varies from run to run in status's table
// (tokens, owners, ages, times) with placeholders, and single-spaces it.
func normalizeStatus(s string) string {
	var out []string
	for _, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if m := statusRow.FindStringSubmatch(line); m != nil {
			age := "<AGE>"
			if m[4] == "-" {
				age = "-"
			}
			line = strings.Join([]string{m[1], m[2], m[3], "<TOKEN>", "<OWNER>", age, m[5]}, " ")
		} else {
			line = strings.Join(strings.Fields(line), " ")
		}
		out = append(out, rfc3339.ReplaceAllString(line, "<TIME>"))
	}
	return strings.Join(out, "\n") + "\n"
}

// The golden file holds sections "-- NAME --\n" followed by the text.
var goldenPath = filepath.Join("testdata", "status.golden")

func readGolden(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(goldenPath)
	if os.IsNotExist(err) && *update {
		return map[string]string{}
	}
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	out := map[string]string{}
	var cur string
	for _, line := range strings.SplitAfter(string(data), "\n") {
		if strings.HasPrefix(line, "-- ") && strings.HasSuffix(line, " --\n") {
			cur = strings.TrimSuffix(strings.TrimPrefix(line, "-- "), " --\n")
			out[cur] = ""
			continue
		}
		if cur != "" {
			out[cur] += line
		}
	}
	return out
}

func checkGolden(t *testing.T, golden map[string]string, section, got string) {
	t.Helper()
	if *update {
		return
	}
	want, ok := golden[section]
	if !ok {
		t.Errorf("%s: no section %q (run with -update)", goldenPath, section)
		return
	}
	if got != want {
		t.Errorf("%s, section %q differs (run with -update if intended):\ngot:\n%s\nwant:\n%s", goldenPath, section, got, want)
	}
}

func writeGolden(t *testing.T, golden, got map[string]string) {
	t.Helper()
	for k, v := range got {
		golden[k] = v
	}
	var b strings.Builder
	for _, k := range []string{"etcd/free", "etcd/held", "zk/free", "zk/held"} {
		if v, ok := golden[k]; ok {
			fmt.Fprintf(&b, "-- %s --\n%s", k, v)
		}
	}
	if err := os.MkdirAll("testdata", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(goldenPath, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestStatusWatch runs status --watch --json --changes 3 and moves the
// queue under it, one step per line it prints: the lock free, then held,
// then held with a waiter, then handed to the waiter. Each line is read
// before the next step, so the test waits on the command's own output,
// driven by the store's notifications.
func TestStatusWatch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *testBackend) {
		ctx := testCtx(t)
		const name = "watched/lock"
		p := start(ctx, t, b.args("status", "--watch", "--json", "--changes", "3", name)...)
		next := func(what string) lockStatus {
			t.Helper()
			line := p.nextLine(ctx, what)
			var st lockStatus
			if err := json.Unmarshal([]byte(line), &st); err != nil {
				t.Fatalf("%s: %q: %v", what, line, err)
			}
			return st
		}
		if st := next("first snapshot"); !st.Free {
			t.Fatalf("first snapshot: %+v, want free", st)
		}
		first, err := b.mutex(t, name, "first").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st := next("after Lock"); st.Holders != 1 || st.Waiters != 0 || st.Entries[0].Seq != first.Token().Seq {
			t.Fatalf("after Lock: %+v, want held by token %d", st, first.Token().Seq)
		}
		waiting := locktest.LockAsync(ctx, b.mutex(t, name, "second"))
		if st := next("after a waiter joined"); st.Holders != 1 || st.Waiters != 1 || st.Entries[1].Holder != "second" {
			t.Fatalf("after a waiter joined: %+v", st)
		}
		if err := first.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		r := <-waiting
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		defer r.Lease.Unlock(context.Background())
		if st := next("after the handoff"); st.Holders != 1 || st.Waiters != 0 || st.Entries[0].Seq != r.Lease.Token().Seq {
			t.Fatalf("after the handoff: %+v, want held by token %d", st, r.Lease.Token().Seq)
		}
		if code := p.wait(time.Minute); code != 0 {
			t.Fatalf("status --watch --changes 3 exited %d after 3 changes; stderr %s", code, p.stderr)
		}
	})
}

// TestStatusWatchText: off a terminal, --watch prints each table after a
// "--- TIME" line.
func TestStatusWatchText(t *testing.T) {
	b := etcdBackend(t)
	ctx := testCtx(t)
	const name = "watched/text"
	p := start(ctx, t, b.args("status", "--watch", "--changes", "1", name)...)
	var got []string
	for !strings.HasPrefix(last(got), "lock "+name+": free") {
		got = append(got, p.nextLine(ctx, "the free lock's table"))
	}
	l, err := b.mutex(t, name, "texter").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(context.Background())
	for line := range p.lines {
		got = append(got, line)
	}
	if code := p.wait(time.Minute); code != 0 {
		t.Fatalf("exit %d; stderr %s", code, p.stderr)
	}
	var tables int
	for _, line := range got {
		if strings.HasPrefix(line, "--- ") {
			tables++
		}
	}
	text := strings.Join(got, "\n")
	if tables != 2 || !strings.Contains(text, "lock "+name+": held (1 holder, 0 waiting)") || !strings.Contains(text, "texter") {
		t.Errorf("status --watch (text) printed:\n%s\nwant two tables, free then held by texter", text)
	}
}

func last(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	return lines[len(lines)-1]
}

// TestStatusFence: --fence shows the fence's newest token beside the
// holder's, and says whether the holder's writes reach the resource.
func TestStatusFence(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *testBackend) {
		ctx := testCtx(t)
		const name = "fenced/audit"
		var key string
		var admit func(distlock.Token) error
		if b.name == "etcd" {
			key = b.prefix + "fences/audit"
			f, err := etcdfence.New(b.etcd, key, name)
			if err != nil {
				t.Fatal(err)
			}
			admit = func(tok distlock.Token) error { return f.Admit(ctx, tok) }
		} else {
			key = b.prefix + "-fences/audit"
			f, err := zkfence.New(b.zk, key, name)
			if err != nil {
				t.Fatal(err)
			}
			admit = func(tok distlock.Token) error { return f.Admit(ctx, tok) }
		}
		state := func(what string) lockStatus {
			t.Helper()
			st := parseStatus(t, cli(ctx, t, nil, b.args("status", "--json", "--fence", key, name)...))
			if st.Fence == nil || st.Fence.Key != key {
				t.Fatalf("%s: no fence audit in %+v", what, st)
			}
			return st
		}
		if st := state("free"); st.Fence.State != "free" || st.Fence.Newest != "" {
			t.Errorf("free lock: fence %+v, want free and nothing admitted", st.Fence)
		}
		first, err := b.mutex(t, name, "first").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st := state("held, nothing admitted"); st.Fence.State != "none" {
			t.Errorf("held, nothing admitted: fence %+v, want none", st.Fence)
		}
		if err := admit(first.Token()); err != nil {
			t.Fatal(err)
		}
		if st := state("held, admitted"); st.Fence.State != "current" || st.Fence.Newest != first.Token().String() {
			t.Errorf("held, its token admitted: fence %+v, want current with %v", st.Fence, first.Token())
		}
		if err := first.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		second, err := b.mutex(t, name, "second").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer second.Unlock(context.Background())
		if st := state("new holder"); st.Fence.State != "behind" || st.Fence.Newest != first.Token().String() {
			t.Errorf("a new holder that has not written: fence %+v, want behind, still %v", st.Fence, first.Token())
		}
		r := cli(ctx, t, nil, b.args("status", "--fence", key, name)...)
		if !strings.Contains(r.stdout, "fence "+key+": newest admitted token "+first.Token().String()+"; older than the holder's") {
			t.Errorf("text output:\n%s", r.stdout)
		}
	})
}

// TestStatusWatchTerminal: on a terminal, --watch clears the screen and
// draws the table with a footer, and redraws it on a change.
func TestStatusWatchTerminal(t *testing.T) {
	b := etcdBackend(t)
	ctx := testCtx(t)
	const name = "watched/tty"
	master, slave := openPTY(t)
	cmd := exec.CommandContext(ctx, binary(t), b.args("status", "--watch", "--changes", "1", name)...)
	cmd.Stdout = slave
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	r := bufio.NewReader(master)
	var seen strings.Builder
	readUntil := func(s string) {
		t.Helper()
		for !strings.Contains(seen.String(), s) {
			line, err := r.ReadString('\n')
			seen.WriteString(line)
			if err != nil {
				t.Fatalf("the terminal never showed %q: %q (%v)", s, seen.String(), err)
			}
		}
	}
	readUntil("watching lock " + name + " on etcd")
	if !strings.Contains(seen.String(), "\x1b[H\x1b[2J") || !strings.Contains(seen.String(), "lock "+name+": free") {
		t.Fatalf("first screen: %q", seen.String())
	}
	l, err := b.mutex(t, name, "tty holder").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(context.Background())
	readUntil("tty holder")
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
}

// TestStatusFenceBadKey: a --fence that is no fence's key is a usage
// error, with and without --watch.
func TestStatusFenceBadKey(t *testing.T) {
	b := zkBackend(t)
	ctx := testCtx(t)
	for _, args := range [][]string{{"--fence", "not/absolute"}, {"--watch", "--fence", "not/absolute"}} {
		r := cli(ctx, t, nil, b.args("status", append(args, "some/lock")...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "--fence") {
			t.Errorf("status %v: exit %d, stderr %q; want a usage error naming --fence", args, r.code, r.stderr)
		}
	}
}

// TestStatusSlots: status shows a lock's done-markers (how many, and the
// newest), in text and JSON, once `distlock once` has marked slots.
func TestStatusSlots(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *testBackend) {
		ctx := testCtx(t)
		lock := lockName(t)
		for _, slot := range []string{"2026-11-30", "2026-12-01"} {
			if r := cli(ctx, t, nil, b.args("once", "--lock", lock, "--slot", slot, "--", "true")...); r.code != 0 {
				t.Fatalf("once --slot %s: code %d, stderr %q", slot, r.code, r.stderr)
			}
		}
		r := cli(ctx, t, nil, b.args("status", lock)...)
		if r.code != 0 || !strings.Contains(r.stdout, "slots done: 2") || !strings.Contains(r.stdout, "  2026-12-01 by ") {
			t.Fatalf("status: code %d, stdout %q", r.code, r.stdout)
		}
		if i, j := strings.Index(r.stdout, "2026-12-01 by"), strings.Index(r.stdout, "2026-11-30 by"); i < 0 || j < 0 || i > j {
			t.Errorf("status: the newest slot is not first: %q", r.stdout)
		}
		r = cli(ctx, t, nil, b.args("status", "--json", lock)...)
		var st lockStatus
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
			t.Fatalf("%q: %v", r.stdout, err)
		}
		if st.Slots == nil || st.Slots.Done != 2 || len(st.Slots.Newest) != 2 || st.Slots.Newest[0].Slot != "2026-12-01" {
			t.Fatalf("status --json slots: %+v", st.Slots)
		}
	})
}

// TestStatusLockDelay: while a waiter serves a lock-delay (its
// predecessor's entry went without a release: etcd, the holder's lease
// revoked; ZooKeeper, the holder's node deleted by another client),
// status says so, with the entry that went and when the delay ends; once
// the waiter holds, it no longer does.
func TestStatusLockDelay(t *testing.T) {
	const delay = 4 * time.Second
	forEachBackend(t, func(t *testing.T, b *testBackend) {
		ctx := testCtx(t)
		lock := lockName(t)
		var holder, waiter distlock.Locker
		var end func()
		switch b.name {
		case "etcd":
			hs, err := etcdlock.NewSession(ctx, b.etcd, recipe.WithPrefix(b.prefix))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { hs.Close(context.Background()) })
			ws, err := etcdlock.NewSession(ctx, b.etcd, recipe.WithPrefix(b.prefix), recipe.WithHolder("delayed"), recipe.WithLockDelay(delay))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ws.Close(context.Background()) })
			holder, _ = recipe.NewMutex(hs, lock)
			waiter, _ = recipe.NewMutex(ws, lock)
			end = func() {
				if _, err := b.etcd.Revoke(ctx, hs.ID()); err != nil {
					t.Fatal(err)
				}
			}
		default:
			hs, err := zklock.NewSession(ctx, b.ens(), recipe.WithPrefix(b.prefix))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { hs.Close(context.Background()) })
			ws, err := zklock.NewSession(ctx, b.ens(), recipe.WithPrefix(b.prefix), recipe.WithHolder("delayed"), recipe.WithLockDelay(delay))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ws.Close(context.Background()) })
			holder, _ = recipe.NewMutex(hs, lock)
			waiter, _ = recipe.NewMutex(ws, lock)
			end = func() {
				if err := b.zk.Delete(b.entries(t, lock)[0], -1); err != nil {
					t.Fatal(err)
				}
			}
		}
		if _, err := holder.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		res := locktest.LockAsync(ctx, waiter)
		b.waitQueued(t, lock, 2)
		gone := b.entries(t, lock)[0]
		ended := time.Now()
		end()
		// The record is the waiter's own write, in the background once it
		// saw the entry go: read until it shows (milliseconds), within
		// the delay.
		var st lockStatus
		for {
			r := cli(ctx, t, nil, b.args("status", "--json", lock)...)
			if r.code != 0 {
				t.Fatalf("status --json: code %d, stderr %q", r.code, r.stderr)
			}
			st = lockStatus{}
			if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
				t.Fatalf("%q: %v", r.stdout, err)
			}
			if len(st.LockDelays) > 0 {
				break
			}
			if time.Since(ended) > delay/2 {
				t.Fatalf("status shows no lock-delay %v after the holder's entry went: %q", time.Since(ended), r.stdout)
			}
			time.Sleep(50 * time.Millisecond)
		}
		d := st.LockDelays[0]
		if d.Gone != gone || d.Holder != "delayed" || !strings.HasPrefix(d.Token, lock+"@") || d.Until.Before(ended.Add(delay)) || d.Until.After(ended.Add(delay+5*time.Second)) {
			t.Fatalf("lock_delays[0] = %+v, want gone %s, holder \"delayed\", until about %v", d, gone, ended.Add(delay))
		}
		r := cli(ctx, t, nil, b.args("status", lock)...)
		if r.code != 0 || !strings.Contains(r.stdout, "lock-delay: granted to "+d.Token+" after the previous holder's entry "+gone+" went without a release") {
			t.Fatalf("status: code %d, stdout %q", r.code, r.stdout)
		}
		got := locktest.Recv(t, res, "the delayed waiter")
		if got.Err != nil {
			t.Fatal(got.Err)
		}
		defer got.Lease.Unlock(context.Background())
		if got.Lease.Token().String() != d.Token {
			t.Fatalf("granted %v, status named %s", got.Lease.Token(), d.Token)
		}
		r = cli(ctx, t, nil, b.args("status", "--json", lock)...)
		st = lockStatus{}
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
			t.Fatalf("%q: %v", r.stdout, err)
		}
		if len(st.LockDelays) != 0 {
			t.Fatalf("status --json after the delay: lock_delays %+v", st.LockDelays)
		}
	})
}
