package distlock

import (
	"errors"
	"fmt"
)

// A once-per-slot job (the daily report) runs once per slot across a
// fleet: every instance computes the slot of the run that is due, and the
// first to take the lock for that slot runs it (see the distlock once
// command). Package schedule names slots by time, so that instances agree
// on them without talking to each other.

// MaxSlotLen is the longest slot name ValidateSlot accepts.
const MaxSlotLen = 128

// ErrInvalidSlot is wrapped by ValidateSlot's errors.
var ErrInvalidSlot = errors.New("invalid slot")

// ValidateSlot checks a slot name: 1 to MaxSlotLen ASCII letters,
// digits, '.', '_', '-' and ':', starting with a letter or digit. Slots
// become part of a key or znode path, where '/' and '@' would be taken
// for structure.
func ValidateSlot(s string) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("distlock: slot %q: %w: %s", s, ErrInvalidSlot, fmt.Sprintf(format, args...))
	}
	switch {
	case s == "":
		return fail("empty")
	case len(s) > MaxSlotLen:
		return fail("longer than %d bytes", MaxSlotLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if i == 0 && !alnum {
			return fail("must start with a letter or digit, not %q", c)
		}
		if !alnum && c != '.' && c != '_' && c != '-' && c != ':' {
			return fail("character %q: only ASCII letters, digits, '.', '_', '-' and ':' are allowed", c)
		}
	}
	return nil
}
