package chaos

import (
	"strings"
	"testing"
)

// The distlock-run workload's checker on hand-written histories: it must
// pass a correct one and flag each violation it exists for.
func TestCheckCommandHistory(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		history              string
		overlapOK, endLastOK bool
		commands             int
	}{
		{"one after the other", "start r1\ntick r1\ntick r1\nend r1\nstart r2\ntick r2\n", true, true, 2},
		{"a killed one's ticks stop before the next start", "start r1\ntick r1\ntick r1\nstart r2\ntick r2\nend r2\n", true, true, 2},
		{"empty", "", true, true, 0},
		{"an orphan ticks on after the next start", "start r1\ntick r1\nstart r2\ntick r1\ntick r2\n", false, true, 2},
		{"an orphan's grandchild ticks on", "start r1\ntick r1\ntick r1\nstart r2\ntick r2\nend r2\nstart r3\ntick r1\n", false, true, 3},
		{"starts inside another's interval", "start r1\ntick r1\nstart r2\nend r2\nend r1\n", false, true, 2},
		{"a line after end", "start r1\nend r1\ntick r1\n", true, false, 1},
		{"no start", "tick r1\n", false, true, 1},
		{"garbage", "start r1\nhello\n", false, true, 1},
	} {
		overlap, ends, n := checkCommandHistory(tc.history)
		if overlap.OK != tc.overlapOK || ends.OK != tc.endLastOK || n != tc.commands {
			t.Errorf("%s: no-overlap %v (want %v), end-is-last %v (want %v), %d commands (want %d): %s; %s",
				tc.name, overlap.OK, tc.overlapOK, ends.OK, tc.endLastOK, n, tc.commands, overlap, ends)
		}
		if !overlap.OK && !strings.Contains(overlap.Detail, "line") {
			t.Errorf("%s: the detail does not say where: %q", tc.name, overlap.Detail)
		}
	}
}
