package etcdq

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
	"github.com/distlock/distlock/internal/testserve"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// watchCreates counts the watch create requests a client sends.
type watchCreates struct{ n atomic.Int64 }

func (w *watchCreates) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, err
	}
	return &countingStream{cs, w}, nil
}

type countingStream struct {
	grpc.ClientStream
	w *watchCreates
}

func (c *countingStream) SendMsg(m any) error {
	if r, ok := m.(*pb.WatchRequest); ok && r.GetCreateRequest() != nil {
		c.w.n.Add(1)
	}
	return c.ClientStream.SendMsg(m)
}

func followTestSession(t *testing.T, counter *watchCreates) (*Session, *clientv3.Client, context.Context) {
	t.Helper()
	eps := testserve.EtcdCluster(t, 1)
	cfg := clientv3.Config{Endpoints: []string{eps[0]}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	if counter != nil {
		cfg.DialOptions = []grpc.DialOption{grpc.WithChainStreamInterceptor(counter.stream)}
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	s, err := NewSession(ctx, cli, Config{TTL: 30 * time.Second, Options: qlock.Options{Prefix: "/distlock/"}.Defaults()})
	if err != nil {
		t.Fatal(err)
	}
	u := s.User()
	t.Cleanup(func() { u.Close(context.Background()) })
	return s, cli, ctx
}

// TestFollowOneWatchPerQueue: a session that takes the same lock again and
// again follows its entries with one watch, not one per acquisition; and a
// foreign delete of the held entry is still reported.
func TestFollowOneWatchPerQueue(t *testing.T) {
	var creates watchCreates
	s, cli, ctx := followTestSession(t, &creates)
	m, err := qlock.NewMutex(s.Engine(), "again", distlock.LockConfig{})
	if err != nil {
		t.Fatal(err)
	}
	const rounds = 50
	for range rounds {
		l, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := creates.n.Load(); n > 2 {
		t.Errorf("%d Lock/Unlock rounds sent %d watch creates; want one (two if a watch had to be moved)", rounds, n)
	}

	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Delete(ctx, s.Dir("again"), clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
		if !errors.Is(l.Err(), distlock.ErrEntryGone) {
			t.Errorf("lost with %v; want ErrEntryGone", l.Err())
		}
	case <-ctx.Done():
		t.Fatal("a foreign delete of the held entry was not reported")
	}
}

// TestFollowDeletionBeforeFollow: an entry registered before its put and
// deleted by someone else before Follow is called is reported as gone:
// at once when the follower's watch already ran and kept the news, and
// once the watch has gone back for it when the watch started after it.
func TestFollowDeletionBeforeFollow(t *testing.T) {
	s, cli, ctx := followTestSession(t, nil)
	dir := s.Dir("early")
	key := func(i int) string {
		return dir + exclusiveMark + strconv.FormatInt(int64(s.id), 16) + "_" + strconv.Itoa(100+i)
	}
	node := func(k string, rev int64) *qlock.Node {
		n := &qlock.Node{Entry: qlock.Entry{Key: k, Seq: rev, Kind: qlock.Exclusive}}
		n.Begin(s.Context())
		return n
	}
	put := func(i int) int64 {
		t.Helper()
		s.expect(key(i))
		resp, err := cli.Put(ctx, key(i), "", clientv3.WithLease(s.id))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	del := func(i int) {
		t.Helper()
		if _, err := cli.Delete(ctx, key(i)); err != nil {
			t.Fatal(err)
		}
	}
	reported := func(what string, ch <-chan error) {
		t.Helper()
		select {
		case err := <-ch:
			if !errors.Is(err, distlock.ErrEntryGone) {
				t.Fatalf("%s: %v; want ErrEntryGone", what, err)
			}
		case <-ctx.Done():
			t.Fatalf("%s: the deletion of a followed entry was not reported", what)
		}
	}

	// Entry 0 is put and deleted before entry 1 starts the watch: the
	// watch must go back for it.
	rev0 := put(0)
	del(0)
	rev1 := put(1)
	s.followers[followPrefix(key(1))].ensure(rev1 + 1)
	gone0 := make(chan error, 1)
	s.Follow(node(key(0), rev0), func(err error) { gone0 <- err })
	reported("entry deleted before the watch started", gone0)

	// Entry 2 is put and deleted while the watch runs, before Follow; then
	// entry 1 is deleted too. Once entry 1's deletion is reported, entry
	// 2's, which came earlier on the same watch, has been kept.
	rev2 := put(2)
	del(2)
	gone1 := make(chan error, 1)
	s.Follow(node(key(1), rev1), func(err error) { gone1 <- err })
	del(1)
	reported("entry deleted while followed", gone1)
	var first error
	s.Follow(node(key(2), rev2), func(err error) { first = err })
	if !errors.Is(first, distlock.ErrEntryGone) {
		t.Fatalf("Follow of an entry deleted before it: %v; want ErrEntryGone reported at once", first)
	}
}

// TestFollowAfterCompaction: a follower whose watch must start at a
// revision that was compacted meanwhile reads what is left of its entries
// instead, and reports the ones that are gone.
func TestFollowAfterCompaction(t *testing.T) {
	s, cli, ctx := followTestSession(t, nil)
	dir := s.Dir("compacted")
	gone := dir + exclusiveMark + strconv.FormatInt(int64(s.id), 16) + "_" + "a"
	kept := dir + exclusiveMark + strconv.FormatInt(int64(s.id), 16) + "_" + "b"
	node := func(k string, rev int64) *qlock.Node {
		n := &qlock.Node{Entry: qlock.Entry{Key: k, Seq: rev, Kind: qlock.Exclusive}}
		n.Begin(s.Context())
		return n
	}
	var revs [2]int64
	for i, k := range []string{gone, kept} {
		s.expect(k)
		resp, err := cli.Put(ctx, k, "", clientv3.WithLease(s.id))
		if err != nil {
			t.Fatal(err)
		}
		revs[i] = resp.Header.Revision
	}
	reports := make(chan string, 2)
	for i, k := range []string{gone, kept} {
		s.Follow(node(k, revs[i]), func(error) { reports <- k })
	}
	del, err := cli.Delete(ctx, gone)
	if err != nil {
		t.Fatal(err)
	}
	// Compact past the deletion before the watch starts: the watch from
	// the first entry's revision cannot be served.
	if _, err := cli.Compact(ctx, del.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	s.followers[followPrefix(gone)].ensure(revs[0] + 1)
	select {
	case k := <-reports:
		if k != gone {
			t.Fatalf("reported %s gone; want %s", k, gone)
		}
	case <-ctx.Done():
		t.Fatal("the deletion hidden by a compaction was not reported")
	}
	// The entry still there is not reported; the follower goes on
	// watching it: a deletion now is reported.
	if _, err := cli.Delete(ctx, kept); err != nil {
		t.Fatal(err)
	}
	select {
	case k := <-reports:
		if k != kept {
			t.Fatalf("reported %s; want %s", k, kept)
		}
	case <-ctx.Done():
		t.Fatal("a deletion after the resync was not reported")
	}
}
