package main

import (
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// TestRunCompat: distlock run --compat go-zookeeper takes the lock in
// zk.Lock's naming, so a real zk.Lock on the same path waits for the
// command and gets the lock once it is done; status --compat shows the
// entry's mode, and warns about one in distlock's own naming.
func TestRunCompat(t *testing.T) {
	b := zkBackend(t)
	ctx := testCtx(t)
	lock := lockName(t)
	p := start(ctx, t, b.args("run", "--compat", "go-zookeeper", "--lock", lock, "--", "sh", "-c", "echo held; read x; exit 0")...)
	p.waitLine(ctx, "held")

	zl := zk.NewLock(b.ens(), b.prefix+"/"+lock, zk.WorldACL(zk.PermAll))
	got := make(chan error, 1)
	go func() { got <- zl.Lock() }()
	select {
	case err := <-got:
		t.Fatalf("zk.Lock returned while distlock run holds: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	r := cli(ctx, t, nil, b.args("status", "--compat", "curator", lock)...)
	if r.code != 0 || !strings.Contains(r.stdout, "distlock (curator)") || strings.Contains(r.stdout, "warning:") {
		t.Errorf("status --compat curator: code %d, stdout %q; want the entry's mode and no warning", r.code, r.stdout)
	}
	r = cli(ctx, t, nil, b.args("status", "--compat", "kazoo", lock)...)
	if !strings.Contains(r.stdout, "warning: entry") {
		t.Errorf("status --compat kazoo: stdout %q; want a warning: kazoo does not count the entry", r.stdout)
	}
	p.stdin.Close()
	if code := p.wait(time.Minute); code != 0 {
		t.Fatalf("run: code %d; stderr %s", code, p.stderr)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("zk.Lock after the command: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("zk.Lock did not get the lock after distlock run released it")
	}
	if err := zl.Unlock(); err != nil {
		t.Fatal(err)
	}

	// What a mode cannot do is a usage error.
	for _, args := range [][]string{
		{"--compat", "curator", "--permits", "2"},
		{"--compat", "curator", "--lock", "other"},
		{"--compat", "consul"},
	} {
		r := cli(ctx, t, nil, b.args("run", append(append([]string{"--lock", lock}, args...), "--", "true")...)...)
		if r.code != 64 {
			t.Errorf("run %v: code %d, want 64 (usage); stderr %q", args, r.code, r.stderr)
		}
	}
	r = cli(ctx, t, nil, b.args("revoke", "--reason", "x", "--compat", "curator", lock)...)
	if r.code != 64 || !strings.Contains(r.stderr, "--force") {
		t.Errorf("revoke --compat without --force: code %d, stderr %q; want a usage error naming --force", r.code, r.stderr)
	}
}
