package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
)

// election returns election name on a new session of its own (a
// connection of its own on ZooKeeper), following revocations if revocable.
// The session ends with the test.
func (b *testBackend) election(t *testing.T, name, holder string, revocable bool) distlock.Elector {
	t.Helper()
	ctx := testCtx(t)
	var (
		el  distlock.Elector
		err error
	)
	switch b.name {
	case "etcd":
		opts := []recipe.Option{recipe.WithPrefix(b.prefix), recipe.WithHolder(holder)}
		if revocable {
			opts = append(opts, recipe.WithRevocable())
		}
		s, serr := etcdlock.NewSession(ctx, b.etcd, opts...)
		if serr != nil {
			t.Fatal(serr)
		}
		t.Cleanup(func() { s.Close(context.Background()) })
		el, err = recipe.NewElection(s, name)
	default:
		opts := []recipe.Option{recipe.WithPrefix(b.prefix), recipe.WithHolder(holder)}
		if revocable {
			opts = append(opts, recipe.WithRevocable())
		}
		s, serr := zklock.NewSession(ctx, b.ens(), opts...)
		if serr != nil {
			t.Fatal(serr)
		}
		t.Cleanup(func() { s.Close(context.Background()) })
		el, err = recipe.NewElection(s, name)
	}
	if err != nil {
		t.Fatal(err)
	}
	return el
}

// campaignResult is what a Campaign returned.
type campaignResult struct {
	lead distlock.Leadership
	err  error
}

// campaignAsync campaigns in the background.
func campaignAsync(ctx context.Context, el distlock.Elector, value string, opts ...distlock.CampaignOption) <-chan campaignResult {
	ch := make(chan campaignResult, 1)
	go func() {
		l, err := el.Campaign(ctx, value, opts...)
		ch <- campaignResult{l, err}
	}()
	return ch
}

// leads waits for the campaign res to win.
func leads(ctx context.Context, t *testing.T, res <-chan campaignResult, what string) distlock.Leadership {
	t.Helper()
	select {
	case r := <-res:
		if r.err != nil {
			t.Fatalf("%s: Campaign: %v", what, r.err)
		}
		return r.lead
	case <-ctx.Done():
		t.Fatalf("%s never led: %v", what, ctx.Err())
		return nil
	}
}

// ended waits for lead's Done.
func ended(ctx context.Context, t *testing.T, lead distlock.Leadership, what string) {
	t.Helper()
	select {
	case <-lead.Done():
	case <-ctx.Done():
		t.Fatalf("%s: the leader's Done never closed: %v", what, ctx.Err())
	}
}

// tableRows returns the rows of status's table in out, as statusRow's
// submatches (1 position, 2 role, 3 kind, 4 age, 5 holder) with the
// whole row (0).
func tableRows(out string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(out, "\n") {
		if m := statusRow.FindStringSubmatch(line); m != nil {
			rows = append(rows, m)
		}
	}
	return rows
}

// TestStatusElection: an election shows under a line of its own, its
// leader first (role "leader", its term's token), then the waiting
// candidates in the order they would lead, the higher priority first; a
// lock of the same name shows beside it, apart.
func TestStatusElection(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *testBackend) {
		ctx := testCtx(t)
		name := lockName(t)
		lead, err := b.election(t, name, "s-leader", false).Campaign(ctx, "host-1", distlock.WithPriority(5))
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		// The oldest waiting candidate, of priority 0, then a younger one
		// of priority 3 (below the leader's 5: no preemption), which
		// leads next.
		second := campaignAsync(wctx, b.election(t, name, "s-2", false), "host-2")
		b.waitQueued(t, name, 2)
		third := campaignAsync(wctx, b.election(t, name, "s-3", false), "host-3", distlock.WithPriority(3))
		b.waitQueued(t, name, 3)

		r := cli(ctx, t, nil, b.args("status", name)...)
		t.Logf("status:\n%s", r.stdout)
		if r.code != 0 {
			t.Fatalf("status: exit %d, stderr %q", r.code, r.stderr)
		}
		if first, _, _ := strings.Cut(r.stdout, "\n"); first != "election "+name+": led (1 leader, 2 waiting)" {
			t.Errorf("first line %q, want the election's", first)
		}
		rows := tableRows(r.stdout)
		want := []struct{ role, kind, holder string }{
			{"leader", "candidate p5", "host-1"},
			{"waiting", "candidate p3", "host-3"},
			{"waiting", "candidate", "host-2"},
		}
		if len(rows) != len(want) {
			t.Fatalf("%d rows, want %d:\n%s", len(rows), len(want), r.stdout)
		}
		for i, w := range want {
			if m := rows[i]; m[1] != fmt.Sprint(i+1) || m[2] != w.role || m[3] != w.kind || m[5] != w.holder {
				t.Errorf("row %d: %q, want %d %s %s ... %s", i+1, m[0], i+1, w.role, w.kind, w.holder)
			}
		}
		if !regexp.MustCompile(`^1\s+leader\s+candidate p5\s+` + regexp.QuoteMeta(lead.Token().String()) + `\s`).MatchString(rows[0][0]) {
			t.Errorf("the leader's row %q lacks its term's token %v", rows[0][0], lead.Token())
		}
		for _, m := range rows[1:] {
			if !regexp.MustCompile(`^\d+\s+waiting\s+candidate(?: p3)?\s+-\s`).MatchString(m[0]) {
				t.Errorf("a waiting candidate's row %q shows a token", m[0])
			}
		}
		if strings.Contains(r.stdout, "multi:") {
			t.Errorf("candidates marked as a multi-lock's:\n%s", r.stdout)
		}

		st := parseStatus(t, cli(ctx, t, nil, b.args("status", "--json", name)...))
		if st.Free || st.Holders != 1 || st.Waiters != 2 || len(st.Entries) != 3 {
			t.Fatalf("--json: %+v, want 1 holder (the leader), 2 waiting", st)
		}
		prios := []int{5, 3, 0}
		for i, e := range st.Entries {
			role, token, seq := "waiting", "", int64(0)
			if i == 0 {
				role, token, seq = "holder", lead.Token().String(), lead.Token().Seq
			}
			if e.Position != i+1 || e.Role != role || e.Kind != "candidate" || e.Holder != want[i].holder || e.Token != token || e.Seq != seq ||
				e.Priority == nil || *e.Priority != prios[i] || e.Key == "" || e.Owner == "" || e.Multi != nil {
				t.Errorf("--json entry %d: %+v (priority %v), want %s, priority %d, token %q", i, e, e.Priority, role, prios[i], token)
			}
		}

		// A lock of the same name: its line and entries first, apart.
		l, err := b.mutex(t, name, "host-9 pid 9 distlock run").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Unlock(context.Background())
		r = cli(ctx, t, nil, b.args("status", name)...)
		t.Logf("status, with a lock of the same name:\n%s", r.stdout)
		lines := strings.Split(r.stdout, "\n")
		if len(lines) < 2 || lines[0] != "lock "+name+": held (1 holder, 0 waiting)" || lines[1] != "election "+name+": led (1 leader, 2 waiting)" {
			t.Errorf("status: %q, want the lock's line, then the election's", r.stdout)
		}
		if rows = tableRows(r.stdout); len(rows) != 4 || rows[0][2] != "holder" || rows[0][3] != "exclusive" || rows[1][2] != "leader" || rows[1][5] != "host-1" {
			t.Errorf("rows %q, want the lock's holder, then the leader", rows)
		}
		st = parseStatus(t, cli(ctx, t, nil, b.args("status", "--json", name)...))
		if st.Holders != 2 || st.Waiters != 2 || len(st.Entries) != 4 || st.Entries[0].Priority != nil || st.Entries[0].Token != l.Token().String() {
			t.Errorf("--json: %+v, want the lock's holder first, without a priority", st)
		}
		for i, e := range st.Entries {
			// Each queue counts its own places: the lock's, the election's.
			if want := max(i, 1); e.Position != i+1 || e.Place != want {
				t.Errorf("--json entry %d: position %d, place %d; want %d, %d", i, e.Position, e.Place, i+1, want)
			}
		}

		cancel()
		for _, c := range []<-chan campaignResult{second, third} {
			if r := <-c; r.err == nil {
				t.Errorf("a waiting candidate led: %v", r.lead.Token())
			}
		}
	})
}

// TestRevokeElectionForced: revoke --force --grace 0 of an election's
// name deletes its leader's entry at once, whether its session follows
// revocations or not: the leader's Done closes, the next candidate leads
// with a larger token, the record stays, and status shows the new leader
// and the past revocation.
func TestRevokeElectionForced(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *testBackend) {
		for _, revocable := range []bool{false, true} {
			t.Run(map[bool]string{false: "plain", true: "revocable"}[revocable], func(t *testing.T) {
				ctx := testCtx(t)
				name := lockName(t)
				lead, err := b.election(t, name, "leader session", revocable).Campaign(ctx, "leader-1")
				if err != nil {
					t.Fatal(err)
				}
				next := campaignAsync(ctx, b.election(t, name, "next session", false), "next-2")
				b.waitQueued(t, name, 2)

				r := cli(ctx, t, nil, b.args("revoke", name, "--force", "--grace", "0", "--reason", "x")...)
				t.Logf("revoke: code %d\n%s%s", r.code, r.stdout, r.stderr)
				want := `(?m)^token ` + regexp.QuoteMeta(lead.Token().String()) + ` \(leader leader-1\): forced after the 0s grace period: its entry was deleted, the leader lost its term`
				if r.code != 0 || !regexp.MustCompile(want).MatchString(r.stdout) || strings.Count(r.stdout, "\n") != 1 {
					t.Fatalf("revoke --force --grace 0: code %d, stdout %q; want 0 and one line matching %s", r.code, r.stdout, want)
				}

				ended(ctx, t, lead, "forced")
				if err := lead.Err(); !errors.Is(err, distlock.ErrEntryGone) && !errors.Is(err, distlock.ErrRevoked) {
					t.Errorf("the forced leader's Err: %v, want ErrEntryGone or ErrRevoked", err)
				} else if !revocable && !errors.Is(err, distlock.ErrEntryGone) {
					t.Errorf("the forced leader's Err on a session that does not follow revocations: %v, want ErrEntryGone", err)
				}
				succ := leads(ctx, t, next, "the next candidate")
				defer succ.Resign(context.Background())
				if succ.Token().Seq <= lead.Token().Seq {
					t.Errorf("the successor's token %v is not larger than the forced leader's %v", succ.Token(), lead.Token())
				}

				rs := b.revocations(t, name)
				if len(rs) != 1 || rs[0].Outcome != distlock.RevokeForced || rs[0].Token != lead.Token().String() || rs[0].Holder != "leader-1" || rs[0].Reason != "x" {
					t.Errorf("records: %+v, want the leader's, forced", rs)
				}
				st := parseStatus(t, cli(ctx, t, nil, b.args("status", "--json", name)...))
				if len(st.Entries) != 1 || st.Entries[0].Role != "holder" || st.Entries[0].Kind != "candidate" || st.Entries[0].Token != succ.Token().String() || st.Entries[0].Holder != "next-2" {
					t.Errorf("status --json entries: %+v, want the successor leading with %v", st.Entries, succ.Token())
				}
				if rv := st.Revocations; rv == nil || len(rv.Pending) != 0 || len(rv.Past) != 1 || rv.Past[0].Outcome != distlock.RevokeForced || rv.Past[0].Holding {
					t.Errorf("status --json revocations: %+v, want one past, forced", rv)
				}
				r = cli(ctx, t, nil, b.args("status", name)...)
				t.Logf("status:\n%s", r.stdout)
				if !strings.HasPrefix(r.stdout, "election "+name+": led (1 leader, 0 waiting)\n") ||
					!strings.Contains(r.stdout, "  leader token "+lead.Token().String()+": forced at ") {
					t.Errorf("status: %q, want the successor leading and the forced leader's revocation", r.stdout)
				}
			})
		}
	})
}

// TestRevokeElectionStepDown: revoke without --force asks a leader on a
// revocable session to step down: its Done closes with the RevokedError
// while it leads, status shows the request pending, and once it resigns
// the next candidate leads and revoke exits 0 with the leader released.
func TestRevokeElectionStepDown(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *testBackend) {
		t.Parallel()
		ctx := testCtx(t)
		name := lockName(t)
		lead, err := b.election(t, name, "leader session", true).Campaign(ctx, "leader-1")
		if err != nil {
			t.Fatal(err)
		}
		next := campaignAsync(ctx, b.election(t, name, "next session", false), "next-2")
		b.waitQueued(t, name, 2)

		rev := start(ctx, t, b.args("revoke", "--reason", "rolling restart", "--by", "carol", "--grace", "60s", name)...)
		ended(ctx, t, lead, "asked to step down")
		var re *distlock.RevokedError
		if err := lead.Err(); !errors.As(err, &re) || re.By != "carol" || re.Reason != "rolling restart" {
			t.Fatalf("the leader's Err: %v, want a RevokedError from carol", err)
		}

		r := cli(ctx, t, nil, b.args("status", name)...)
		t.Logf("status:\n%s", r.stdout)
		lines := strings.Split(r.stdout, "\n")
		want := fmt.Sprintf("REVOKED: leader token %s asked to step down by carol at ", lead.Token())
		if r.code != 0 || len(lines) < 2 || lines[0] != "election "+name+": led (1 leader, 1 waiting)" || !strings.HasPrefix(lines[1], want) {
			t.Errorf("status: code %d, stdout %q; want the election's line, then one starting %q", r.code, r.stdout, want)
		}

		// Still leading: it hands over.
		if err := lead.Resign(ctx); err != nil {
			t.Fatalf("Resign of a revoked leader: %v", err)
		}
		succ := leads(ctx, t, next, "the next candidate")
		defer succ.Resign(context.Background())
		if succ.Token().Seq <= lead.Token().Seq {
			t.Errorf("the successor's token %v is not larger than the revoked leader's %v", succ.Token(), lead.Token())
		}
		if code := rev.wait(30 * time.Second); code != 0 {
			t.Fatalf("revoke: code %d; stderr %s", code, rev.stderr)
		}
		if l := rev.nextLine(ctx, "revoke's line"); !holderLine(name, `released [0-9.]+m?s after the request$`).MatchString(l) || !strings.Contains(l, "(leader leader-1)") {
			t.Errorf("revoke: %q, want the leader released", l)
		}
	})
}
