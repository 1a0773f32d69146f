package qlock

import (
	"fmt"
	"os"

	"github.com/distlock/distlock"
)

// CheckMark checks the arguments of a marker store's Mark (etcdlock's and
// zklock's Marks) for lock name, and fills in mk's holder: holder (the
// session's), else the host and pid.
func CheckMark(name string, lease *distlock.Lease, mk *distlock.SlotMarker, holder string) error {
	switch {
	case lease == nil:
		return fmt.Errorf("lock %q: mark slot %q: nil Lease", name, mk.Slot)
	case lease.Token().Name != name:
		return fmt.Errorf("lock %q: mark slot %q: the lease is lock %q's", name, mk.Slot, lease.Token().Name)
	}
	if err := distlock.ValidateSlot(mk.Slot); err != nil {
		return fmt.Errorf("lock %q: mark: %w", name, err)
	}
	if mk.Holder == "" {
		mk.Holder = holder
	}
	if mk.Holder == "" {
		host, _ := os.Hostname()
		mk.Holder = fmt.Sprintf("%s pid %d", host, os.Getpid())
	}
	return nil
}
