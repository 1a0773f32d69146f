package qlock

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/distlock/distlock"
)

// offered lists, for each store (Backend.Name) and compatibility mode,
// the recipes ("mutex", "rwmutex", "election") whose entries the store's
// driver can name as that mode's foreign recipe does. A semaphore and a
// multi-lock are in none: no foreign recipe keeps permits or several
// locks the way they do (docs/interop.md says why).
var offered = map[string]map[distlock.Compat][]string{
	"zookeeper": {
		distlock.CompatCurator:      {"mutex", "rwmutex", "election"},
		distlock.CompatCuratorLatch: {"election"},
		distlock.CompatKazoo:        {"mutex", "rwmutex", "election"},
		distlock.CompatGoZookeeper:  {"mutex"},
	},
	"etcd": {
		distlock.CompatEtcd:        {"mutex"},
		distlock.CompatEtcdRecipes: {"rwmutex"},
	},
}

// refusals says why a mode whose foreign client has the recipe is still
// not offered for it.
var refusals = map[string]string{
	"etcd/etcd/election": "etcd's Election takes the oldest key under the election's prefix for its leader and waits for every older key there, and distlock's election keeps its term record under that prefix",
}

// CheckCompat returns nil if b offers mode c for a recipe of kind what
// (see offered) called name, and otherwise an error that says why: an
// unknown mode wraps distlock.ErrInvalidOption, one b does not offer for
// what wraps errors.ErrUnsupported.
func (b Backend) CheckCompat(c distlock.Compat, what, name string) error {
	if c == "" {
		return nil
	}
	if !c.Known() {
		return fmt.Errorf("%s: %s %s: %w: unknown compatibility mode %q", b.Pkg, what, strconv.Quote(name), distlock.ErrInvalidOption, string(c))
	}
	for _, w := range offered[b.Name][c] {
		if w == what {
			return nil
		}
	}
	why, ok := refusals[b.Name+"/"+string(c)+"/"+what]
	if !ok {
		why = "its recipes hold no " + what
	}
	for store, modes := range offered {
		if _, in := modes[c]; in && store != b.Name {
			why = "it names a recipe of " + store + "'s"
		}
	}
	return fmt.Errorf("%s: %s %s: compatibility mode %q is not offered: %s: %w", b.Pkg, what, strconv.Quote(name), string(c), why, errors.ErrUnsupported)
}
