package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/distlock/distlock"
)

// TestMessageOnePrefix: a library error, bare or wrapped by the command,
// is printed after one "distlock: ".
func TestMessageOnePrefix(t *testing.T) {
	lockErr := &distlock.LockError{Op: distlock.OpLock, Name: "ledger", Backend: "etcd", Err: context.Canceled}
	for _, err := range []error{
		lockErr,
		fmt.Errorf("lock %q not acquired: %w", "ledger", lockErr),
		exit(exitUnreachable, fmt.Errorf("status of lock %q: %w", "ledger", lockErr)),
	} {
		var out bytes.Buffer
		code(err, &out)
		if n := bytes.Count(out.Bytes(), []byte("distlock:")); n != 1 {
			t.Errorf("%q: %d prefixes, want 1", out.String(), n)
		}
		if !bytes.Contains(out.Bytes(), []byte(`etcd lock "ledger": lock: context canceled`)) {
			t.Errorf("%q lacks the lock error", out.String())
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatal("test error")
		}
	}
}
