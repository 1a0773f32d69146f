package etcdlock_test

import (
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/fencing/etcdfence"
	"github.com/distlock/distlock/integration/locktest"
	"github.com/distlock/distlock/recipe"
)

// TestOnce runs the distlock.Once cases on one real 3-member etcd cluster,
// a lock name per case.
func TestOnce(t *testing.T) {
	locktest.RunOnce(t, &etcdOnceBackend{etcdBackend{clus: newCluster(t)}})
}

type etcdOnceBackend struct{ etcdBackend }

// Session's sessions are *etcdSession, which have Marks.
var _ locktest.OnceSession = (*etcdSession)(nil)

func (s *etcdSession) Marks(name string) (distlock.SlotMarks, error) {
	m, err := recipe.NewMarks(s.s, name)
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (b *etcdOnceBackend) DeleteEntry(t *testing.T, name string) {
	t.Helper()
	keys := queueKeys(t, b.clus.Client(0), name)
	if len(keys) == 0 {
		t.Fatalf("lock %q has no entry", name)
	}
	if _, err := b.clus.Client(0).Delete(testCtx(t), keys[0]); err != nil {
		t.Fatal(err)
	}
}

func (b *etcdOnceBackend) AdmitNewer(t *testing.T, name string, tok distlock.Token) {
	t.Helper()
	f, err := etcdfence.New(b.clus.Client(0), etcdlock.DefaultPrefix+"@once/"+name+"/@fence", name)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Admit(testCtx(t), tok); err != nil {
		t.Fatal(err)
	}
}

func (b *etcdOnceBackend) RawMarker(t *testing.T, name, slot string) (string, bool) {
	t.Helper()
	resp, err := b.clus.Client(0).Get(testCtx(t), etcdlock.DefaultPrefix+"@once/"+name+"/@slot/"+slot)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return "", false
	}
	return string(resp.Kvs[0].Value), true
}
