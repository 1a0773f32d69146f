package etcdlock_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/recipe"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/tests/v3/framework/integration"
	"go.uber.org/zap"
)

// eventLog records the order in which things were observed.
type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) add(e string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *eventLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.events...)
}

// holderHearsFirst applies fault (which must cut the holder off), waits
// until both the holder's Done and the successor's Lock have come back,
// heals, and checks that the holder was told first, with its session
// expired, and that the successor got a newer token. It returns the
// successor's lease.
func holderHearsFirst(t *testing.T, holder *distlock.Lease, res <-chan result, fault, heal func()) *distlock.Lease {
	t.Helper()
	var log eventLog
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		<-holder.Done()
		log.add("holder lost")
	}()
	var succ result
	go func() {
		defer wg.Done()
		succ = recv(t, res, "successor")
		log.add("successor acquired")
	}()
	fault()
	wg.Wait()
	heal()
	if succ.Err != nil {
		t.Fatal(succ.Err)
	}
	if got := log.list(); got[0] != "holder lost" {
		t.Fatalf("events %v: the successor acquired before the cut-off holder was told", got)
	}
	if err := holder.Err(); !errors.Is(err, distlock.ErrSessionExpired) || !errors.Is(err, distlock.ErrLost) {
		t.Fatalf("holder Err: %v, want ErrLost and ErrSessionExpired", err)
	}
	if !succ.Lease.Token().Newer(holder.Token()) {
		t.Fatal("successor's token is not newer")
	}
	return succ.Lease
}

// TestPartitionedHolderHearsFirst cuts the holder's client off from the
// only member it talks to. The holder must be told it lost the lock before
// the successor's Lock returns: the session's client-side deadline runs out
// before the server can expire the lease.
func TestPartitionedHolderHearsFirst(t *testing.T) {
	clus := newCluster(t)
	hs := newSession(t, newClient(t, clus, 0), etcdlock.WithTTL(etcdlock.MinTTL))
	holder := mustLock(t, newMutex(t, hs, "partition"))
	qw := watchQueue(t, clus.Client(1), "partition")
	res := lockAsync(testCtx(t), newMutex(t, newSession(t, newClient(t, clus, 1)), "partition"))
	qw.nextPut()

	succ := holderHearsFirst(t, holder, res,
		clus.Members[0].Bridge().Blackhole, clus.Members[0].Bridge().Unblackhole)
	mustUnlock(t, succ)
}

// TestLeaderStoppedWhileHeld stops the cluster leader while a lock is held
// and waited for; the handoff goes on under the new leader and tokens keep
// growing, also after the old leader returns.
func TestLeaderStoppedWhileHeld(t *testing.T) {
	clus := newCluster(t)
	lead := clus.WaitLeader(t)
	a, b := (lead+1)%3, (lead+2)%3
	ma := newMutex(t, newSession(t, newClient(t, clus, a)), "leader")
	mb := newMutex(t, newSession(t, newClient(t, clus, b)), "leader")
	holder := mustLock(t, ma)
	qw := watchQueue(t, clus.Client(a), "leader")
	res := lockAsync(testCtx(t), mb)
	qw.nextPut()

	clus.Members[lead].Stop(t)
	clus.WaitMembersForLeader(t, []*integration.Member{clus.Members[a], clus.Members[b]})
	select {
	case <-holder.Done():
		t.Fatalf("holder lost the lock on a leader change: %v", holder.Err())
	default:
	}
	mustUnlock(t, holder)
	r := recv(t, res, "waiter under the new leader")
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	prev := r.Lease.Token()
	if !prev.Newer(holder.Token()) {
		t.Fatalf("token %v not newer than %v", prev, holder.Token())
	}
	mustUnlock(t, r.Lease)

	if err := clus.Members[lead].Restart(t); err != nil {
		t.Fatal(err)
	}
	clus.WaitLeader(t)
	mc := newMutex(t, newSession(t, newClient(t, clus, lead)), "leader")
	for _, m := range []*recipe.Mutex{mc, ma, mb, mc} {
		l := mustLock(t, m)
		if !l.Token().Newer(prev) {
			t.Fatalf("token %v not newer than %v", l.Token(), prev)
		}
		prev = l.Token()
		mustUnlock(t, l)
	}
}

// TestWaiterMemberRestarts stops and restarts, one after the other, the
// followers a waiter's client may be talking to; its watches move to
// another member and the handoff still reaches it.
func TestWaiterMemberRestarts(t *testing.T) {
	clus := newCluster(t)
	lead := clus.WaitLeader(t)
	holder := mustLock(t, newMutex(t, newSession(t, newClient(t, clus, lead)), "restart"))
	wcli, err := clientv3.New(clientv3.Config{Endpoints: clus.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wcli.Close() })
	qw := watchQueue(t, clus.Client(lead), "restart")
	res := lockAsync(testCtx(t), newMutex(t, newSession(t, wcli), "restart"))
	qw.nextPut()

	for _, i := range []int{(lead + 1) % 3, (lead + 2) % 3} {
		clus.Members[i].Stop(t)
		if err := clus.Members[i].Restart(t); err != nil {
			t.Fatal(err)
		}
		clus.WaitLeader(t)
	}
	mustUnlock(t, holder)
	r := successor(t, res, holder.Token(), "waiter after member restarts")
	mustUnlock(t, r)
}
