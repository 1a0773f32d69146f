package distlock_test

import (
	"errors"
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
