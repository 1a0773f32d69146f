package fencing_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
)

func TestCompareAndReason(t *testing.T) {
	tok := func(seq int64, owner uint64) distlock.Token {
		return distlock.Token{Name: "ledger", Seq: seq, Owner: owner}
	}
	tests := []struct {
		t, newest distlock.Token
		reason    string
	}{
		{tok(5, 1), distlock.Token{}, ""},                           // nothing admitted yet
		{tok(5, 1), tok(4, 2), ""},                                  // newer, any owner
		{tok(5, 1), tok(5, 1), ""},                                  // the same acquisition again
		{tok(4, 1), tok(5, 1), "stale"},                             // older, same owner
		{tok(4, 2), tok(5, 1), "stale"},                             // older, another owner
		{tok(5, 2), tok(5, 1), "fork"},                              // same number, another owner
		{tok(5, 1), distlock.Token{Name: "ledger", Seq: 5}, "fork"}, // stored without owner: unknown
		{tok(6, 1), distlock.Token{Name: "ledger", Seq: 5}, ""},
		{tok(4, 1), distlock.Token{Name: "ledger", Seq: 5}, "stale"},
	}
	for _, tt := range tests {
		err := fencing.Compare("r", tt.t, tt.newest)
		if got := fencing.Reason(err); got != tt.reason {
			t.Errorf("Compare(%v, newest %#v) = %v: reason %q, want %q", tt.t, tt.newest, err, got, tt.reason)
		}
		var fork *fencing.ForkError
		if errors.As(err, &fork) && (fork.Token != tt.t || fork.Admitted != tt.newest) {
			t.Errorf("fork error names %v and %v", fork.Token, fork.Admitted)
		}
	}
	for err, want := range map[error]string{
		nil:                                  "",
		errors.New("store down"):             "",
		fencing.ErrNoToken:                   "malformed",
		distlock.ErrInvalidToken:             "malformed",
		fencing.ErrForeignToken:              "foreign",
		fmt.Errorf("x: %w", fencing.ErrFork): "fork",
	} {
		if got := fencing.Reason(err); got != want {
			t.Errorf("Reason(%v) = %q, want %q", err, got, want)
		}
	}
	// A fork stored without owner says so instead of printing "@5.0".
	err := fencing.Compare("r", tok(5, 1), distlock.Token{Name: "ledger", Seq: 5})
	if want := "ledger@5 (owner not recorded)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("legacy fork: %v, want it to say %q", err, want)
	}
}
