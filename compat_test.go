package distlock_test

import (
	"errors"
	"testing"

	"github.com/distlock/distlock"
)

func TestParseCompat(t *testing.T) {
	for in, want := range map[string]distlock.Compat{
		"": "", "none": "", "curator": distlock.CompatCurator, "curator-latch": distlock.CompatCuratorLatch,
		"kazoo": distlock.CompatKazoo, "zk.Lock": distlock.CompatGoZookeeper, "go-zookeeper": distlock.CompatGoZookeeper,
		"etcd": distlock.CompatEtcd, "etcd-recipes": distlock.CompatEtcdRecipes,
	} {
		got, err := distlock.ParseCompat(in)
		if err != nil || got != want {
			t.Errorf("ParseCompat(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := distlock.ParseCompat("consul"); !errors.Is(err, distlock.ErrInvalidOption) {
		t.Fatalf("ParseCompat(consul) = %v, want ErrInvalidOption", err)
	}
	if got := distlock.CompatCuratorLatch.Client(); got != distlock.ClientCurator {
		t.Fatalf("CompatCuratorLatch.Client() = %q", got)
	}
	for _, c := range distlock.Compats {
		if c.Client() == "" {
			t.Errorf("%s.Client() is empty", c)
		}
	}
	if got := distlock.Compat("").String(); got != "none" {
		t.Fatalf("zero Compat String = %q", got)
	}
	if c := distlock.NewLockConfig(distlock.WithCompat(distlock.CompatKazoo)); c.Compat != distlock.CompatKazoo {
		t.Fatalf("WithCompat: %+v", c)
	}
	if c := distlock.NewElectionConfig(distlock.WithElectionCompat(distlock.CompatCuratorLatch)); c.Compat != distlock.CompatCuratorLatch {
		t.Fatalf("WithElectionCompat: %+v", c)
	}
}
