package distlock

import (
	"fmt"
	"strings"
)

// Compat names another client's lock recipe whose entries a lock's own
// take the form of (a compatibility mode), so that the other client's
// holders wait for distlock's as distlock's wait for theirs on the same
// lock path. Without one (the zero Compat), distlock still waits for every
// foreign entry it recognises (see QueueEntry.Client), but on ZooKeeper
// the foreign clients do not wait for distlock's entries: exclusion holds
// one way only. docs/interop.md has each recipe's naming rule and what
// mixing can and cannot promise.
//
// A mode is chosen per lock (WithCompat, WithElectionCompat), and every
// acquisition of that lock, by every process, must use the same one. What
// a mode cannot offer is refused with an error wrapping
// errors.ErrUnsupported: a priority, a HandOff or a preemption in an
// election whose foreign rule is "the oldest leads", a semaphore, a
// multi-lock.
type Compat string

const (
	// CompatCurator, on ZooKeeper: a Mutex's entries are those of
	// Curator's InterProcessMutex ("…lock-<seq>"), which go-zookeeper's
	// zk.Lock reads as its own too; an RWMutex's are those of Curator's
	// InterProcessReadWriteLock ("…__WRIT__<seq>", "…__READ__<seq>"); an
	// Election's candidates are those of Curator's LeaderSelector, which
	// is an InterProcessMutex ("…lock-<seq>").
	CompatCurator Compat = "curator"
	// CompatCuratorLatch, on ZooKeeper: an Election whose candidates are
	// those of Curator's LeaderLatch ("…latch-<seq>").
	CompatCuratorLatch Compat = "curator-latch"
	// CompatKazoo, on ZooKeeper: entries of kazoo's Lock and WriteLock
	// ("…__lock__<seq>"), ReadLock ("…__rlock__<seq>"), and an Election's
	// candidates those of kazoo's Election (a Lock).
	CompatKazoo Compat = "kazoo"
	// CompatGoZookeeper, on ZooKeeper, is a Mutex go-zookeeper's zk.Lock
	// shares: the same entries as CompatCurator's.
	CompatGoZookeeper Compat = "go-zookeeper"
	// CompatEtcd, on etcd: a Mutex shared with etcd's concurrency.Mutex,
	// the v3lock service and etcdctl lock, an Election with
	// concurrency.Election, v3election and etcdctl elect. Those wait for
	// every key under the lock's prefix, so distlock's own entries already
	// exclude them: the mode changes no key; an Election in it keeps
	// their rule that the oldest candidate leads.
	CompatEtcd Compat = "etcd"
	// CompatEtcdRecipes, on etcd: an RWMutex shared with the RWMutex of
	// etcd's contrib recipes, whose readers wait only for keys under
	// name + "/write/": distlock's writers are put there.
	CompatEtcdRecipes Compat = "etcd-recipes"
)

// Compats lists every compatibility mode, in the order ParseCompat's
// error names them.
var Compats = []Compat{CompatCurator, CompatCuratorLatch, CompatKazoo, CompatGoZookeeper, CompatEtcd, CompatEtcdRecipes}

// String returns the mode's name, "none" for the zero Compat.
func (c Compat) String() string {
	if c == "" {
		return "none"
	}
	return string(c)
}

// Known reports whether c is the zero Compat or one of Compats.
func (c Compat) Known() bool {
	if c == "" {
		return true
	}
	for _, k := range Compats {
		if c == k {
			return true
		}
	}
	return false
}

// ParseCompat parses a mode's name, as the command's --compat flag takes
// it: one of Compats, "none" or "" for none; "zk.Lock" names
// CompatGoZookeeper. An unknown name's error wraps ErrInvalidOption.
func ParseCompat(s string) (Compat, error) {
	switch s {
	case "", "none":
		return "", nil
	case "zk.Lock", "zklock":
		return CompatGoZookeeper, nil
	}
	if c := Compat(s); c.Known() {
		return c, nil
	}
	names := make([]string, len(Compats))
	for i, c := range Compats {
		names[i] = string(c)
	}
	return "", fmt.Errorf("%w: unknown compatibility mode %q (one of: none, %s)", ErrInvalidOption, s, strings.Join(names, ", "))
}

// LockOption configures a Mutex or an RWMutex (recipe.NewMutex,
// recipe.NewRWMutex).
type LockOption func(*LockConfig)

// LockConfig is what LockOptions set; the recipes read it with
// NewLockConfig.
type LockConfig struct {
	// Compat is WithCompat's.
	Compat Compat
}

// NewLockConfig applies opts to the defaults.
func NewLockConfig(opts ...LockOption) LockConfig {
	var c LockConfig
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithCompat makes a lock's entries those of another client's recipe
// (see Compat), so that its holders and distlock's exclude each other
// both ways. A mode of the other store, or one that has no such recipe
// (CompatCuratorLatch for a lock), is refused by the constructor with an
// error wrapping errors.ErrUnsupported.
func WithCompat(c Compat) LockOption { return func(l *LockConfig) { l.Compat = c } }
