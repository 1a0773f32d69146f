package main

import (
	"bytes"
	"context"
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
