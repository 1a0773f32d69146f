package recipe_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
	"github.com/go-zookeeper/zk"
)

// A store's own option given to the other store is refused before any
// client is used, naming the option.
func TestOptionOfTheOtherStore(t *testing.T) {
	ctx := context.Background()
	_, err := etcdlock.NewSession(ctx, nil, zklock.WithACL(zk.WorldACL(zk.PermAll)))
	if !errors.Is(err, distlock.ErrInvalidOption) || !strings.Contains(err.Error(), "zklock.WithACL") {
		t.Fatalf("etcd session with zklock.WithACL: %v", err)
	}
	_, err = zklock.NewSession(ctx, nil, etcdlock.WithTTL(5*time.Second))
	if !errors.Is(err, distlock.ErrInvalidOption) || !strings.Contains(err.Error(), "etcdlock.WithTTL") {
		t.Fatalf("zk session with etcdlock.WithTTL: %v", err)
	}
	for _, f := range []func() error{
		func() error { _, err := etcdlock.NewSession(ctx, nil, recipe.WithLockDelay(-time.Second)); return err },
		func() error { _, err := zklock.NewSession(ctx, nil, recipe.WithLockDelay(-time.Second)); return err },
	} {
		if err := f(); !errors.Is(err, distlock.ErrInvalidOption) {
			t.Fatalf("negative lock-delay: %v", err)
		}
	}
}

// Every constructor refuses a nil session, untyped or typed, with
// ErrNilClient rather than a panic.
func TestNilSession(t *testing.T) {
	var es *etcdlock.Session
	var zs *zklock.Session
	for _, b := range []recipe.Backend{nil, es, zs, (*recipe.Session)(nil)} {
		for what, f := range map[string]func() error{
			"mutex":       func() error { _, err := recipe.NewMutex(b, "x"); return err },
			"rwmutex":     func() error { _, err := recipe.NewRWMutex(b, "x"); return err },
			"multi-mutex": func() error { _, err := recipe.NewMultiMutex(b, "x", "y"); return err },
			"election":    func() error { _, err := recipe.NewElection(b, "x"); return err },
			"semaphore":   func() error { _, err := recipe.NewSemaphore(b, "x", 2); return err },
			"marks":       func() error { _, err := recipe.NewMarks(b, "x"); return err },
		} {
			pkg := map[recipe.Backend]string{nil: "recipe: ", es: "etcdlock: ", zs: "zklock: "}[b]
			if pkg == "" {
				pkg = "recipe: "
			}
			if err := f(); !errors.Is(err, distlock.ErrNilClient) || !strings.HasPrefix(err.Error(), pkg+"new "+what+" ") {
				t.Errorf("%T: new %s: %v", b, what, err)
			}
		}
	}
}
