package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestSingleton runs the README's singleton-worker example in-process,
// on an embedded etcd member.
func TestSingleton(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, &out, nil); err != nil {
		t.Fatalf("%v\noutput:\n%s", err, out.String())
	}
	if n := strings.Count(out.String(), " leads with token "); n != 3 {
		t.Errorf("%d terms, want 3:\n%s", n, out.String())
	}
	for _, want := range []string{"dies (its session ends)", "ran under 3 leaders"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
