package main

import (
	"bytes"
	"context"
	"github.com/distlock/distlock/integration"
	"io"
	"strings"
	"testing"
	"time"
)

// TestQuickstart runs ./examples/quickstart, which the README's Quick
// start names, in-process, on an
// embedded etcd member.
func TestQuickstart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, &out, nil); err != nil {
		t.Fatalf("%v\noutput:\n%s", err, out.String())
	}
	for _, want := range []string{"worker-a holds", "lock is held by another owner", "worker-b holds it with token", "newer than", "lock lost", "runs the daily report"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestQuickstartNoEtcd: pointed at a port where no etcd listens, the
// quick start fails within seconds, naming the endpoint and the refusal.
func TestQuickstartNoEtcd(t *testing.T) {
	addr := integration.RefusedAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	begin := time.Now()
	err := run(ctx, io.Discard, []string{"http://" + addr})
	took := time.Since(begin)
	t.Logf("%v: %v", took.Round(time.Millisecond), err)
	if err == nil || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "refused") {
		t.Errorf("error %v: want one naming %s and \"refused\"", err, addr)
	}
	if took > 5*time.Second {
		t.Errorf("took %v, want < 5s", took)
	}
}
