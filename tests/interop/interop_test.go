// Package interop_test runs distlock's locks against the real lock
// clients that share their queues (Curator, kazoo, etcdctl, go-zookeeper,
// etcd's concurrency package, its recipes and its v3lock and v3election
// services): for each pair, in both directions, whether the contender
// waits while the holder holds, and how soon after the holder's entry is
// gone the contender is granted. -interop.report=FILE (after -args in
// go test's package mode) writes the measured matrix as markdown.
//
// The milliseconds run from the moment the suite's own watch saw the
// holder's entry gone to the contender's grant as the contender reports
// it (its "held" line, or its Lock call's return): the two are separate
// clients' notifications of the same delete, so a fraction of a
// millisecond either way is their race, not a grant before the release.
package interop_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock/integration/interop"
)

// rowTimeout bounds one pair's run: a failure bound, not a timing
// assertion.
const rowTimeout = 60 * time.Second

// heldWindow is how long a contender whose entry is in the queue must go
// without a grant to count as waiting.
const heldWindow = 500 * time.Millisecond

// grantBound is the stated requirement: a waiting contender is granted
// within this long of the holder's entry going.
const grantBound = 100 * time.Millisecond

// oneWayGrant bounds how long a contender that ignores the holder takes
// to be granted anyway (a JVM's or Python's start is in it).
const oneWayGrant = 30 * time.Second

var reportFile = flag.String("interop.report", "", "write the measured interop matrix to this file, as markdown")

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if *reportFile != "" {
		if err := os.WriteFile(*reportFile, []byte(report("")+"\n"+pivot("")), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// expect is what a pair does today.
type expect string

const (
	// waits: the contender waits while the holder holds and is granted
	// once its entry is gone.
	waits expect = "waits"
	// knownOneWay: the contender does not see the holder's entry and is
	// granted while the holder holds. On ZooKeeper the foreign clients
	// know only their own node names, so they do not see distlock's
	// entries; the compat modes, which write entries under the names a
	// foreign client waits for, close this direction.
	knownOneWay expect = "knownOneWay"
	// knownFails: the contender's request fails while the holder holds.
	// go-zookeeper's zk.Lock reads every child of its directory as one of
	// its own nodes, and returns the parse error of the first name that
	// is not (distlock's entries): it neither waits nor takes the lock.
	knownFails expect = "knownFails"
	// shares: both are readers, so the contender is granted while the
	// holder holds, as a reader must be.
	shares expect = "shares"
)

// row is one measured pair of the report.
type row struct {
	store, holder, contender string
	expect                   expect
	result                   string
	ms                       string
	ok                       bool
}

var (
	rowsMu sync.Mutex
	rows   []row
)

func record(r row) {
	rowsMu.Lock()
	defer rowsMu.Unlock()
	rows = append(rows, r)
}

// report is the matrix of store (all of it for "") as a markdown
// table, in the order the pairs ran.
func report(store string) string {
	rowsMu.Lock()
	defer rowsMu.Unlock()
	var b strings.Builder
	b.WriteString("| store | holder | contender | expected | result | granted after the entry went (ms) |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	for _, r := range rows {
		if store != "" && r.store != store {
			continue
		}
		res := r.result
		if !r.ok {
			res = "FAIL: " + res
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", r.store, r.holder, r.contender, r.expect, res, r.ms)
	}
	return b.String()
}

// pivot is the matrix of store (all of it for "") by foreign client and
// recipe, a row each, with what happens in each direction against
// distlock's counterparts, in the shape of docs/interop.md's table.
func pivot(store string) string {
	rowsMu.Lock()
	defer rowsMu.Unlock()
	type key struct{ store, client string }
	var order []key
	cells := map[key]*[2][]string{}
	for _, r := range rows {
		if store != "" && r.store != store {
			continue
		}
		hd, cd := strings.HasPrefix(r.holder, "distlock "), strings.HasPrefix(r.contender, "distlock ")
		if hd == cd {
			continue // a control
		}
		k, dir, ours := key{r.store, r.holder}, 0, r.contender
		if hd {
			k, dir, ours = key{r.store, r.contender}, 1, r.holder
		}
		if cells[k] == nil {
			cells[k] = new([2][]string)
			order = append(order, k)
		}
		// "distlock <store> <kind> [(compat <mode>)]": the kind on.
		kind := ours
		if f := strings.Fields(ours); len(f) > 2 {
			kind = strings.Join(f[2:], " ")
		}
		cells[k][dir] = append(cells[k][dir], kind+": "+verdict(r))
	}
	var b strings.Builder
	b.WriteString("| store | client and recipe | foreign holds → distlock waits | distlock holds → foreign waits |\n")
	b.WriteString("|---|---|---|---|\n")
	for _, k := range order {
		c := cells[k]
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", k.store, k.client, strings.Join(c[0], "; "), strings.Join(c[1], "; "))
	}
	return b.String()
}

// verdict is a row's result in a word or two, and its milliseconds.
func verdict(r row) string {
	switch {
	case !r.ok:
		return "FAIL (" + r.result + ")"
	case r.expect == waits:
		return "yes, " + r.ms + " ms"
	case r.expect == shares:
		return "shared"
	case r.expect == knownFails:
		return "no (" + r.result + ")"
	}
	return "no"
}

// logReport logs store's matrix, for pasting into docs/interop.md.
func logReport(t *testing.T, store string) {
	t.Helper()
	t.Logf("interop matrix, %s:\n%s\nby client:\n%s", store, report(store), pivot(store))
}

// need ends the test when a client is missing: a failure under CI, which
// must run every pair, and a skip elsewhere.
func need(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if errors.Is(err, interop.ErrMissing) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	t.Fatal(err)
}

var names atomic.Int64

// newName returns a lock name no other pair uses.
func newName() string { return fmt.Sprintf("r%d", names.Add(1)) }

// pair is one holder and one contender of the same lock.
type pair struct {
	holder, contender interop.Holder
	expect            expect
}

// runPair acquires with the holder, asks with the contender, checks that
// the contender waits (or, knownOneWay, that it is granted while the
// holder holds), releases the holder and measures the contender's grant
// from the moment the holder's entry was seen gone on a watch.
func runPair(t *testing.T, store string, obs interop.Observer, p pair) {
	t.Helper()
	r := row{store: store, holder: p.holder.Name(), contender: p.contender.Name(), expect: p.expect, ms: "–"}
	defer func() {
		r.ok = !t.Failed()
		if r.result == "" {
			r.result = "error"
		}
		record(r)
		t.Logf("%s: %s → %s: expected %s, %s, %s ms", store, r.holder, r.contender, r.expect, r.result, r.ms)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), rowTimeout)
	defer cancel()
	defer p.holder.Close()
	defer p.contender.Close()

	before, err := obs.Entries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := interop.Acquire(ctx, p.holder); err != nil {
		r.result = "holder not granted"
		t.Fatal(err)
	}
	now, err := obs.Entries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mine := interop.Diff(now, before)
	if len(mine) == 0 {
		r.result = "holder wrote no entry"
		t.Fatalf("%s holds, but wrote no entry that the observer sees", p.holder.Name())
	}
	if err := p.contender.Start(ctx); err != nil {
		r.result = "contender did not start"
		t.Fatal(err)
	}
	if err := obs.WaitNew(ctx, now); err != nil {
		r.result = "contender wrote no entry"
		t.Fatal(err)
	}

	switch p.expect {
	case knownOneWay, knownFails, shares:
		// The contender does not wait for the holder: it is granted, or
		// fails, while the holder holds.
		wctx, wcancel := context.WithTimeout(ctx, oneWayGrant)
		err := interop.WaitGranted(wctx, p.contender)
		wcancel()
		switch {
		case err == nil && p.expect == knownOneWay:
			r.result = "granted while held (one-way)"
		case err == nil && p.expect == shares:
			r.result = "granted while held (shared)"
		case err == nil:
			r.result = "granted while held"
			t.Fatalf("%s was granted while %s held the lock; expect knownOneWay for this pair", p.contender.Name(), p.holder.Name())
		case p.contender.Err() != nil && p.expect == knownFails:
			r.result = "contender fails: " + shortErr(p.contender.Err())
			t.Logf("%s while %s holds: %v", p.contender.Name(), p.holder.Name(), p.contender.Err())
			if err := p.holder.Release(ctx); err != nil {
				t.Fatal(err)
			}
			return
		case p.contender.Err() != nil:
			r.result = "contender failed"
			t.Fatalf("%s while %s holds: %v", p.contender.Name(), p.holder.Name(), p.contender.Err())
		default:
			r.result = "waits"
			t.Fatalf("%s now waits for %s: the one-way gap is closed; expect waits for this pair", p.contender.Name(), p.holder.Name())
		}
		if err := p.contender.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := p.holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		return
	case waits:
		select {
		case <-p.contender.Granted():
			r.result = "granted while held"
			t.Fatalf("%s was granted while %s held the lock", p.contender.Name(), p.holder.Name())
		case <-time.After(heldWindow):
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
		if err := p.contender.Err(); err != nil {
			r.result = "contender failed"
			t.Fatal(err)
		}
	}

	gone, err := obs.WatchGone(ctx, mine)
	if err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	if err := p.holder.Release(ctx); err != nil {
		r.result = "holder release failed"
		t.Fatal(err)
	}
	if err := interop.WaitGranted(ctx, p.contender); err != nil {
		r.result = "not granted after release"
		left, _ := obs.Entries(context.Background())
		t.Fatalf("%v; entries left: %v", err, slices.Sorted(maps.Keys(left)))
	}
	var goneAt time.Time
	select {
	case goneAt = <-gone:
	case <-ctx.Done():
		r.result = "holder's entry never went"
		t.Fatal(ctx.Err())
	}
	lat := p.contender.GrantedAt().Sub(goneAt)
	r.ms = fmt.Sprintf("%.1f", float64(lat.Microseconds())/1000)
	r.result = "waits, granted after release"
	t.Logf("%s granted %.1f ms after %s's entry went (%.1f ms after release was sent)",
		p.contender.Name(), float64(lat.Microseconds())/1000, p.holder.Name(), float64(p.contender.GrantedAt().Sub(sent).Microseconds())/1000)
	if lat > grantBound {
		r.result = "granted late"
		t.Errorf("%s granted %v after %s's entry went, want within %v", p.contender.Name(), lat, p.holder.Name(), grantBound)
	}
	if err := p.contender.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// shortErr is an error's last line, cut to fit a table cell.
func shortErr(err error) string {
	s := strings.TrimSpace(err.Error())
	// Past "interop: <holder>: ".
	if rest, ok := strings.CutPrefix(s, "interop: "); ok {
		if i := strings.Index(rest, ": "); i >= 0 {
			s = rest[i+2:]
		}
	}
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return strings.ReplaceAll(s, "|", "/")
}
