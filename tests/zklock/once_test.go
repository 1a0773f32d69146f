package zklock_test

import (
	"errors"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing/zkfence"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/integration/locktest"
	"github.com/distlock/distlock/recipe"
	"github.com/go-zookeeper/zk"
)

// TestOnce runs the distlock.Once cases on a real ZooKeeper ensemble,
// under a prefix of their own, a lock name per case.
func TestOnce(t *testing.T) {
	ens := integration.NewZooKeeper(t)
	admin, events := connect(t, ens)
	drain(events)
	locktest.RunOnce(t, &zkOnceBackend{newBackend(t, ens, admin)})
}

type zkOnceBackend struct{ *zkBackend }

// Session's sessions are *zkSession, which have Marks.
var _ locktest.OnceSession = (*zkSession)(nil)

func (s *zkSession) Marks(name string) (distlock.SlotMarks, error) {
	m, err := recipe.NewMarks(s.s, name)
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (b *zkOnceBackend) DeleteEntry(t *testing.T, name string) {
	t.Helper()
	es := b.Entries(t, name)
	if len(es) == 0 {
		t.Fatalf("lock %q has no entry", name)
	}
	if err := b.admin.Delete(b.prefix+"/"+name+"/"+es[0], -1); err != nil {
		t.Fatal(err)
	}
}

func (b *zkOnceBackend) AdmitNewer(t *testing.T, name string, tok distlock.Token) {
	t.Helper()
	f, err := zkfence.New(b.admin, b.prefix+"/@once/"+name+"/@fence", name)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Admit(testCtx(t), tok); err != nil {
		t.Fatal(err)
	}
}

func (b *zkOnceBackend) RawMarker(t *testing.T, name, slot string) (string, bool) {
	t.Helper()
	p := b.prefix + "/@once/" + name + "/@slot/" + slot
	if _, err := b.admin.Sync(p); err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatal(err)
	}
	data, _, err := b.admin.Get(p)
	if errors.Is(err, zk.ErrNoNode) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(data), true
}
