package distlock

import (
	"context"
	"strconv"
)

// MaxPermits is the largest permit count a semaphore accepts: every
// acquisition that has to wait reads the semaphore's permits once, so N
// bounds that read.
const MaxPermits = 1024

// Permit is one held permit of a semaphore (recipe.Semaphore,
// recipe.Semaphore). It has a Lease's whole surface — Token, Done, Err,
// Context, Deadline, Unlock — with the same meaning, and the slot it
// holds.
//
// # Fencing a permit
//
// A permit is bound to a numbered slot, 0 to N-1: one that was free when
// it was granted. At most one permit holds a slot at a time, and the token
// of each successive holder of one slot is strictly larger than the one
// before (etcd create revisions and ZooKeeper zxids only grow), so a
// resource that belongs to a slot (a shard, a worker ID, a connection
// pool's seat) fences its writers exactly as a lock's resource does, with
// package fencing. The token's Name is the slot's: SlotName(name, slot),
// e.g. "migrations/slot-2", so a fence made for one slot refuses a permit
// of another slot (fencing.Check compares names) instead of letting two
// permits' tokens interleave.
//
// What the token does not promise: order across slots (tokens of
// different slots are comparable numbers, but a permit of slot 1 is not
// "newer" than one of slot 0 in any sense a resource can use), nor that
// at most N holders work at an instant when a holder is paused past its
// session (as for a lock, only fences stop a late writer).
type Permit struct {
	*Lease
	slot int
}

// Slot returns the permit's slot, 0 to N-1.
func (p *Permit) Slot() int { return p.slot }

// Release gives the permit back; it is Unlock under the name a semaphore's
// users expect.
func (p *Permit) Release(ctx context.Context) error { return p.Unlock(ctx) }

// SlotName returns the token name of slot slot of semaphore name:
// name + "/slot-" + slot. It is a valid lock name, so package fencing
// takes it; a Mutex of that very name would share its fence, so don't
// name a lock like a semaphore's slots.
func SlotName(name string, slot int) string { return name + "/slot-" + strconv.Itoa(slot) }

// NewPermit returns the permit of slot slot held through l (see NewLease):
// the semaphores of the store packages make theirs with it.
func NewPermit(l *Lease, slot int) *Permit { return &Permit{Lease: l, slot: slot} }
