package zkq

import (
	"path"
	"testing"
)

// TestElectionEntryPriority: the priorities in candidates' names as the
// driver writes them, and names that are no candidate's.
func TestElectionEntryPriority(t *testing.T) {
	const guid = "0123456789abcdef0123456789abcdef"
	for key, want := range map[string]int{
		"/distlock/sched/@e-" + guid + "-0000000007":      0,
		"/distlock/sched/@e-" + guid + "-p3-0000000007":   3,
		"/distlock/sched/@e-" + guid + "-p-12-0000000007": -12,
	} {
		_, got, _, ok := parseElectionEntry(path.Base(key))
		if !ok || got != want {
			t.Errorf("parseElectionEntry(%q) = %d, %v; want %d", key, got, ok, want)
		}
		if !CandidateNode("/distlock", "sched", key) {
			t.Errorf("CandidateNode(%q) = false", key)
		}
	}
	for _, key := range []string{
		"/distlock/sched/@w-" + guid + "-0000000007",
		"/distlock/sched/x/@e-" + guid + "-0000000007", // election sched/x's
		"/distlock/@revoke/sched/00000000000000000007",
	} {
		if CandidateNode("/distlock", "sched", key) {
			t.Errorf("CandidateNode(%q) = true", key)
		}
	}
}
