package distlock

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
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

// SlotLockName returns the name of the lock a run of slot of job lock
// name holds: name + "/once-" + slot, with each ':' of the slot written
// as '-' (lock names have no ':'); "once-", not "slot-", so that it never
// names a semaphore permit's slot (SlotName). A result longer than MaxNameLen is
// name + "/once-sha256-" and the SHA-256 of the slot in hex, cut to fit;
// where name leaves room for fewer than 16 hex digits, it is
// "once-sha256/" and the SHA-256 of name, a newline and slot.
//
// Each slot has a lock of its own so that a holder of one slot that died
// delays no other slot: the next slot's runs take another lock, while the
// dead holder's entry waits out its session. The slot's done-marker stays
// name's (the markers are kept per job, see SlotMarks), and its Mark
// accepts a lease of either lock. Two slots may map to one lock name
// ("10:00" and "10-00"): that is harmless, they merely exclude each other;
// their markers stay apart, since markers are per slot.
func SlotLockName(name, slot string) string {
	s := name + "/once-" + strings.ReplaceAll(slot, ":", "-")
	if len(s) <= MaxNameLen {
		return s
	}
	sum := sha256.Sum256([]byte(slot))
	s = name + "/once-sha256-"
	if room := MaxNameLen - len(s); room >= 16 {
		h := hex.EncodeToString(sum[:])
		return s + h[:min(room, len(h))]
	}
	sum = sha256.Sum256([]byte(name + "\n" + slot))
	return "once-sha256/" + hex.EncodeToString(sum[:])
}
