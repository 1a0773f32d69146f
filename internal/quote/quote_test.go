package quote

import (
	"strings"
	"testing"
)

func TestQ(t *testing.T) {
	if got := Q("ledger"); got != `"ledger"` {
		t.Errorf("Q(ledger) = %s", got)
	}
	whole := strings.Repeat("a", Whole)
	if got := Q(whole); got != `"`+whole+`"` {
		t.Errorf("a %d-byte string is not quoted whole: %s", Whole, got)
	}
	long := strings.Repeat("b", 5000)
	if got, want := Q(long), `"`+strings.Repeat("b", Head)+`"…(5000 bytes)`; got != want {
		t.Errorf("Q of 5000 bytes = %s, want %s", got, want)
	}
	// A cut inside a multi-byte character moves back to its start.
	multi := strings.Repeat("a", Head-1) + strings.Repeat("ä", 200)
	if got, want := Q(multi), `"`+strings.Repeat("a", Head-1)+`"…(463 bytes)`; got != want {
		t.Errorf("Q = %s, want %s", got, want)
	}
}
