package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/cmd/internal/backend"
)

// TestStatusTableClient renders a ZooKeeper queue shared with Curator and
// kazoo, with a child no known client made: a CLIENT column, distlock's
// own entries named so, the unknown child without position or token.
func TestStatusTableClient(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 10, 0, time.UTC)
	tok := func(seq int64, owner uint64) distlock.Token {
		return distlock.Token{Name: "backup", Seq: seq, Owner: owner}
	}
	q := []distlock.QueueEntry{
		{Key: "/distlock/backup/_c_5e1f-lock-0000000001", Holding: true, Token: tok(4101, 0x1a2b), Owner: "1a2b",
			Holder: "10.0.0.7", Created: now.Add(-5 * time.Second), Position: 1, Client: distlock.ClientCurator},
		{Key: "/distlock/backup/@w-0123456789abcdef0123456789abcdef-0000000002", Token: tok(4102, 0x3c4d), Owner: "3c4d",
			Holder: "web2 pid 4712 distlock run since 2026-11-30T10:00:08Z", Created: now.Add(-2 * time.Second), Position: 2},
		{Key: "/distlock/backup/9f0e__lock__0000000003", Token: tok(4103, 0x5e6f), Owner: "5e6f",
			Created: now.Add(-time.Second), Position: 3, Client: distlock.ClientKazoo},
		{Key: "/distlock/backup/notes", Owner: "", Created: now.Add(-time.Hour), Client: distlock.ClientUnknown},
	}
	st := newStatus("backup", backend.ZooKeeper, q, now)
	if st.Free || st.Holders != 1 || st.Waiters != 2 || st.Unknown != 1 {
		t.Errorf("free %v, %d holders, %d waiters, %d unknown; want false, 1, 2, 1", st.Free, st.Holders, st.Waiters, st.Unknown)
	}
	var b bytes.Buffer
	st.writeText(&b)
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	want := [][]string{
		{"lock", "backup:", "held", "(1", "holder,", "2", "waiting)"},
		{"POS", "ROLE", "KIND", "CLIENT", "TOKEN", "OWNER", "AGE", "HOLDER"},
		{"1", "holder", "exclusive", "curator", "backup@4101.1a2b", "session", "1a2b", "5s", "10.0.0.7"},
		{"2", "waiting", "exclusive", "distlock", "backup@4102.3c4d", "session", "3c4d", "2s", "web2", "pid", "4712", "distlock", "run", "since", "2026-11-30T10:00:08Z"},
		{"3", "waiting", "exclusive", "kazoo", "backup@4103.5e6f", "session", "5e6f", "1s", "-"},
		{"-", "unknown", "-", "unknown", "-", "-", "1h0m0s", "-"},
	}
	if len(lines) != len(want)+1 {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want)+1, b.String())
	}
	for i, w := range want {
		if got := strings.Fields(lines[i]); strings.Join(got, " ") != strings.Join(w, " ") {
			t.Errorf("line %d: %q, want %q", i+1, lines[i], strings.Join(w, "  "))
		}
	}
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "unknown: 1 child of the lock's queue") {
		t.Errorf("last line %q, want the count of unknown children", last)
	}
	// The columns line up: every row's TOKEN starts where the header's does.
	col := strings.Index(lines[1], "TOKEN")
	for _, l := range lines[2:6] {
		if len(l) <= col || l[col-1] != ' ' || l[col] == ' ' {
			t.Errorf("row %q: TOKEN column not at %d", l, col)
		}
	}

	js, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Unknown int `json:"unknown"`
		Entries []struct {
			Role   string `json:"role"`
			Client string `json:"client"`
			Token  string `json:"token"`
			Place  int    `json:"place"`
		} `json:"entries"`
	}
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Unknown != 1 || len(doc.Entries) != 4 || doc.Entries[0].Client != "curator" || doc.Entries[1].Client != "" ||
		doc.Entries[3].Role != "unknown" || doc.Entries[3].Token != "" || doc.Entries[3].Place != 0 {
		t.Errorf("JSON: %s", js)
	}
	if bytes.Contains(js, []byte(`"client":""`)) {
		t.Errorf("JSON names distlock's own client: %s", js)
	}
}

// TestStatusTableClientOwn renders a queue of distlock's entries alone as
// it always did: no CLIENT column, no "unknown" field.
func TestStatusTableClientOwn(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 10, 0, time.UTC)
	q := []distlock.QueueEntry{
		{Key: "/distlock/backup/@w694d_1", Holding: true, Token: distlock.Token{Name: "backup", Seq: 1042, Owner: 0x694d}, Owner: "694d", Position: 1},
	}
	st := newStatus("backup", backend.Etcd, q, now)
	var b bytes.Buffer
	st.writeText(&b)
	if strings.Contains(b.String(), "CLIENT") || strings.Contains(b.String(), "unknown") {
		t.Errorf("own queue shows a client:\n%s", b.String())
	}
	if !strings.Contains(b.String(), "POS  ROLE    KIND       TOKEN") {
		t.Errorf("header changed:\n%s", b.String())
	}
	js, _ := json.Marshal(st)
	if bytes.Contains(js, []byte(`"unknown"`)) || bytes.Contains(js, []byte(`"client"`)) {
		t.Errorf("JSON of an own queue: %s", js)
	}
}

// TestStatusTableClientOnlyUnknown: a queue of unknown children alone is
// free, and still lists them.
func TestStatusTableClientOnlyUnknown(t *testing.T) {
	q := []distlock.QueueEntry{{Key: "/distlock/backup/x", Client: distlock.ClientUnknown}}
	st := newStatus("backup", backend.ZooKeeper, q, time.Now())
	var b bytes.Buffer
	st.writeText(&b)
	out := b.String()
	if !st.Free || !strings.HasPrefix(out, "lock backup: free") || !strings.Contains(out, "CLIENT") || !strings.Contains(out, "unknown: 1 child") {
		t.Errorf("free %v:\n%s", st.Free, out)
	}
}
