package etcdq

import (
	"testing"

	"github.com/distlock/distlock"
)

// TestCandidatePriority: the priorities in candidates' keys as the
// driver writes them, and keys that are no priority candidate's.
func TestCandidatePriority(t *testing.T) {
	for key, want := range map[string]int{
		"/distlock/sched/@e694d9b1c2a3f4e01_1":      0,
		"/distlock/sched/@ep3.694d9b1c2a3f4e01_1":   3,
		"/distlock/sched/@ep-12.694d9b1c2a3f4e01_a": -12,
		"/distlock/sched/@epx.694d_1":               0, // not a priority
	} {
		if got := candidatePriority("/distlock/sched/@", key); got != want {
			t.Errorf("candidatePriority(%q) = %d, want %d", key, got, want)
		}
	}
	if got := candidatePriority("/distlock/a/b/@", "/distlock/a/b/@ep1073741824.694d_1"); got != distlock.MaxPriority {
		t.Errorf("candidatePriority of MaxPriority's key = %d", got)
	}
	for key, want := range map[string]bool{
		"/distlock/sched/@e694d9b1c2a3f4e01_1":         true,
		"/distlock/sched/@ep3.694d9b1c2a3f4e01_1":      true,
		"/distlock/sched/@w694d9b1c2a3f4e01_1":         false,
		"/distlock/sched/x/@e694d9b1c2a3f4e01_1":       false, // lock sched/x's
		"/distlock/@revoke/sched/00000000000000000007": false,
	} {
		if got := CandidateKey("/distlock/", "sched", key); got != want {
			t.Errorf("CandidateKey(%q) = %v, want %v", key, got, want)
		}
	}
}

// TestExclusiveEntryLock: the lock of an exclusive entry's key, and none
// for other keys under the prefix.
func TestExclusiveEntryLock(t *testing.T) {
	for key, want := range map[string]string{
		"/distlock/a/b/@w694d_1":   "a/b",
		"/distlock/a/@w694d_1f":    "a",
		"/distlock/a/@r694d_1":     "",
		"/distlock/a/@e694d_1":     "",
		"/distlock/a/@p0_":         "",
		"/distlock/@revoke/a/0001": "",
		"/other/a/@w694d_1":        "",
	} {
		got, ok := exclusiveEntryLock("/distlock/", key)
		if !ok {
			got = ""
		}
		if got != want {
			t.Errorf("exclusiveEntryLock(%q) = %q, want %q", key, got, want)
		}
	}
}
