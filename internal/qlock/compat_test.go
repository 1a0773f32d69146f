package qlock

import (
	"errors"
	"strings"
	"testing"

	"github.com/distlock/distlock"
)

// A mode is offered only for the recipes its foreign client has, on its
// own store; the refusal says why.
func TestCheckCompat(t *testing.T) {
	zk := Backend{Name: "zookeeper", Pkg: "zklock"}
	etcd := Backend{Name: "etcd", Pkg: "etcdlock"}
	for _, tc := range []struct {
		b    Backend
		c    distlock.Compat
		what string
		ok   bool
		why  string
	}{
		{zk, "", "semaphore", true, ""},
		{zk, distlock.CompatCurator, "mutex", true, ""},
		{zk, distlock.CompatCurator, "election", true, ""},
		{zk, distlock.CompatCuratorLatch, "mutex", false, "hold no mutex"},
		{zk, distlock.CompatKazoo, "rwmutex", true, ""},
		{zk, distlock.CompatKazoo, "semaphore", false, "hold no semaphore"},
		{zk, distlock.CompatEtcd, "mutex", false, "etcd's"},
		{etcd, distlock.CompatEtcd, "mutex", true, ""},
		{etcd, distlock.CompatEtcd, "election", false, "term record"},
		{etcd, distlock.CompatEtcdRecipes, "rwmutex", true, ""},
		{etcd, distlock.CompatCurator, "mutex", false, "zookeeper's"},
	} {
		err := tc.b.CheckCompat(tc.c, tc.what, "jobs")
		if tc.ok != (err == nil) {
			t.Errorf("%s %s %s: %v", tc.b.Name, tc.c, tc.what, err)
			continue
		}
		if err != nil && (!errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), tc.why) || !strings.Contains(err.Error(), `"jobs"`)) {
			t.Errorf("%s %s %s: %v, want ErrUnsupported saying %q", tc.b.Name, tc.c, tc.what, err, tc.why)
		}
	}
	if err := zk.CheckCompat("consul", "mutex", "jobs"); !errors.Is(err, distlock.ErrInvalidOption) {
		t.Errorf("unknown mode: %v", err)
	}
}
