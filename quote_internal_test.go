package distlock

import "testing"

func TestQuoteWhole(t *testing.T) {
	if quoteWhole != MaxNameLen {
		t.Fatalf("quoteWhole = %d, MaxNameLen = %d: every valid name must be quoted whole", quoteWhole, MaxNameLen)
	}
}
