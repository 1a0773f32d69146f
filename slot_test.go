package distlock_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/distlock/distlock"
)

func TestValidateSlot(t *testing.T) {
	for _, ok := range []string{"2026-12-01", "2026-12-01T05:30Z", "a", "x_y.z-1:2"} {
		if err := distlock.ValidateSlot(ok); err != nil {
			t.Errorf("ValidateSlot(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "-x", "a/b", "a@b", "a b", string(make([]byte, distlock.MaxSlotLen+1))} {
		if err := distlock.ValidateSlot(bad); !errors.Is(err, distlock.ErrInvalidSlot) {
			t.Errorf("ValidateSlot(%q) = %v, want ErrInvalidSlot", bad, err)
		}
	}
}

func TestSlotLockName(t *testing.T) {
	if got := distlock.SlotLockName("jobs/report", "2026-12-01T08:00:00Z"); got != "jobs/report/once-2026-12-01T08-00-00Z" {
		t.Errorf("SlotLockName = %q", got)
	}
	long := strings.Repeat("n", distlock.MaxNameLen-20) // too long for "/once-sha256-" and 16 hex digits
	seen := map[string]string{}
	for _, slot := range []string{"a", "2026-12-01T08:00:00Z", strings.Repeat("s", distlock.MaxSlotLen), strings.Repeat("t", distlock.MaxSlotLen)} {
		for _, name := range []string{"x", long} {
			got := distlock.SlotLockName(name, slot)
			if err := distlock.ValidateName(got); err != nil {
				t.Errorf("SlotLockName(%q, %q) = %q: %v", name, slot, got, err)
			}
			if name == "x" && !strings.HasPrefix(got, name+"/once-") {
				t.Errorf("SlotLockName(%q, %q) = %q: not under the job's name", name, slot, got)
			}
			if prev, ok := seen[got]; ok {
				t.Errorf("slots %q and %q share lock %q", prev, slot, got)
			}
			seen[got] = slot
		}
	}
}
