package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/integration/locktest"
	"github.com/distlock/distlock/recipe"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// memberTTL is the lease TTL of the sessions under a member fault: short,
// so that two TTLs pass quickly, and long enough that a keepalive has
// about 5.6 s to get through before the client-side deadline (7/15 of
// the TTL). With 5 s, CI runs under -race (two test packages at once on
// two cores) saw the surviving members stall for over 2.3 s right after a
// follower was killed, with no election, and holders whose clients did
// not even know the killed member lost their locks; with 8 s, one run saw
// them answer "no leader" for about 4 s, again with no election (the term
// unchanged), and sessions expire. The stalls are the loaded machine's,
// not the cluster's: 12 s.
const memberTTL = 12 * time.Second

// memberTries is how many holders (or waiters) live through each fault at
// once, each with a client, a session and a lock of its own.
const memberTries = 5

// memberFault is one way a member fails: apply makes member i fail and
// checks that it did; heal undoes it and waits until the cluster is whole.
type memberFault struct {
	name  string
	apply func(t *testing.T, c *integration.EtcdCluster, i int)
	heal  func(t *testing.T, c *integration.EtcdCluster, i int)
}

var memberFaults = []memberFault{
	{"SIGSTOP",
		func(t *testing.T, c *integration.EtcdCluster, i int) {
			if err := c.Pause(i); err != nil {
				t.Fatal(err)
			}
			assertSilent(t, c, i)
		},
		func(t *testing.T, c *integration.EtcdCluster, i int) {
			if err := c.Resume(i); err != nil {
				t.Fatal(err)
			}
			waitHealthy(t, c)
		}},
	{"kill",
		func(t *testing.T, c *integration.EtcdCluster, i int) {
			if err := c.Kill(i); err != nil {
				t.Fatal(err)
			}
			assertSilent(t, c, i)
		},
		func(t *testing.T, c *integration.EtcdCluster, i int) {
			if err := c.Restart(testCtx(t), i); err != nil {
				t.Fatal(err)
			}
			waitHealthy(t, c)
		}},
	{"cut",
		func(t *testing.T, c *integration.EtcdCluster, i int) {
			c.Cut(i)
			// The cut took effect when the member itself (asked directly,
			// around its proxies) has lost its leader.
			ctx := testCtx(t)
			for {
				st, err := c.Status(ctx, i)
				if err == nil && st.Leader == 0 {
					return
				}
				select {
				case <-ctx.Done():
					t.Fatalf("member %d cut off, but it still has a leader: the cut did not take effect", i)
				case <-time.After(50 * time.Millisecond):
				}
			}
		},
		func(t *testing.T, c *integration.EtcdCluster, i int) {
			c.Heal(i)
			waitHealthy(t, c)
		}},
}

// raftState describes each member's raft term and leader, to tell a
// failure of the library from an election the machine's load caused.
func raftState(c *integration.EtcdCluster) string {
	var b strings.Builder
	for i := range c.Members {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := c.Status(ctx, i)
		cancel()
		if err != nil {
			fmt.Fprintf(&b, "member %d: %v; ", i, err)
			continue
		}
		fmt.Fprintf(&b, "member %d (%x): term %d, leader %x; ", i, st.Header.MemberId, st.RaftTerm, st.Leader)
	}
	return b.String()
}

// maxTerm is the highest raft term the members that answer report.
func maxTerm(c *integration.EtcdCluster) uint64 {
	var term uint64
	for i := range c.Members {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := c.Status(ctx, i)
		cancel()
		if err == nil {
			term = max(term, st.RaftTerm)
		}
	}
	return term
}

// electedDuring reports whether the cluster held an election since it
// was at term before. A follower failing does not cost the others their
// leader; when they lose it all the same (seen only with the machine
// loaded so far that heartbeats come late), no keepalive can be
// confirmed until a new leader is elected, and a session whose
// client-side deadline passes meanwhile ends by design: the lost signal
// is conservative. Such a loss says nothing about one member's failure.
func electedDuring(t *testing.T, c *integration.EtcdCluster, before uint64) bool {
	after := maxTerm(c)
	if after > before {
		t.Logf("the surviving members held an election during the fault (term %d -> %d; %s): a lock lost meanwhile is the conservative lost signal, not a failure to move off the faulty member", before, after, raftState(c))
		return true
	}
	return false
}

// assertSilent checks that member i, asked directly, does not answer.
func assertSilent(t *testing.T, c *integration.EtcdCluster, i int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := c.Status(ctx, i); err == nil {
		t.Fatalf("member %d still answers: the fault did not take effect", i)
	}
}

func waitHealthy(t *testing.T, c *integration.EtcdCluster) {
	t.Helper()
	if err := c.WaitHealthy(testCtx(t)); err != nil {
		t.Fatal(err)
	}
}

// allMembersClient returns a client that knows every member, as a
// production client would, and has a connection to each of them.
func allMembersClient(t *testing.T, c *integration.EtcdCluster) *clientv3.Client {
	t.Helper()
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	// The balancer spreads requests over the members in turn: a few reads
	// make sure every connection is up before the fault.
	for range 2 * len(c.Members) {
		if _, err := cli.Get(testCtx(t), "warm-up"); err != nil {
			t.Fatal(err)
		}
	}
	return cli
}

// stillHeld checks that l is held and its entry is still the one its token
// names.
func stillHeld(t *testing.T, admin *clientv3.Client, l *distlock.Lease, what string) error {
	t.Helper()
	if err := l.Err(); err != nil {
		return fmt.Errorf("%s lost its lock: %w", what, err)
	}
	keys := queueKeys(t, admin, l.Token().Name)
	if len(keys) == 0 {
		return fmt.Errorf("%s: lock %s has no entry", what, l.Token().Name)
	}
	resp, err := admin.Get(testCtx(t), keys[0])
	if err != nil {
		return err
	}
	if len(resp.Kvs) != 1 || resp.Kvs[0].CreateRevision != l.Token().Seq {
		return fmt.Errorf("%s: the lock's oldest entry %s is not the holder's (token %v)", what, keys[0], l.Token())
	}
	return nil
}

// TestOneMemberDown freezes (SIGSTOP), kills or cuts off one follower of a
// 3-member cluster for two TTLs while holders and waiters whose clients
// know all three members use it. Two healthy members are there to serve
// them, so every holder must keep its lock (Done not closed, its entry
// still the oldest, with its token) and every waiter its place; once the
// holders release, every waiter acquires. memberTries holders (or waiters)
// go through each fault at once, on locks of their own.
func TestOneMemberDown(t *testing.T) {
	c := integration.NewEtcd(t)
	for _, f := range memberFaults {
		t.Run(f.name+"/holder", func(t *testing.T) { holdersThroughFault(t, c, f) })
		t.Run(f.name+"/waiter", func(t *testing.T) { waitersThroughFault(t, c, f) })
		t.Run(f.name+"/enqueue", func(t *testing.T) { enqueuesThroughFault(t, c, f) })
	}
}

// enqueuesThroughFault calls Lock while the member is already down: about
// a third of the enqueue Txns go to it first, and each must be sent again
// to another member (moving the session's guard) rather than wait for the
// caller's context. Every Lock must queue behind its holder, keep its
// place, and acquire when the holder releases during the fault; nothing
// is left behind.
func enqueuesThroughFault(t *testing.T, c *integration.EtcdCluster, f memberFault) {
	victim, admin := follower(t, c)
	holders := make([]*distlock.Lease, memberTries)
	mutexes := make([]*recipe.Mutex, memberTries)
	for i := range holders {
		name := fmt.Sprintf("down-%s-enqueue-%d", f.name, i)
		// The holders are not under test here: a session that outlasts
		// any stall of the loaded machine.
		holders[i] = mustLock(t, newMutex(t, newSession(t, admin, etcdlock.WithTTL(30*time.Second)), name))
		s := newSession(t, allMembersClient(t, c), etcdlock.WithTTL(memberTTL), recipe.WithLogger(debugLog(t, fmt.Sprintf("locker %d", i))))
		mutexes[i] = newMutex(t, s, name)
	}
	healed := false
	defer func() {
		if !healed {
			f.heal(t, c, victim)
		}
	}()
	f.apply(t, c, victim)
	// Bounded well below the test's timeout, so a Lock stuck on the
	// silent member fails here, naming itself.
	ctx, cancel := context.WithTimeout(testCtx(t), 4*memberTTL)
	defer cancel()
	results := make([]<-chan result, memberTries)
	for i, m := range mutexes {
		results[i] = lockAsync(ctx, m)
	}
	// Each Lock is queued once its key shows behind the holder's.
	for i, h := range holders {
		prefix := etcdlock.DefaultPrefix + h.Token().Name + "/@"
		for {
			resp, err := admin.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
			if err != nil {
				t.Fatalf("locker %d: %v", i, err)
			}
			if resp.Count >= 2 {
				break
			}
			// Any change after the count: count again.
			wctx, wcancel := context.WithCancel(ctx)
			select {
			case <-admin.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1)):
			case r := <-results[i]:
				t.Fatalf("locker %d returned while its lock is held (member %d down, %s): %v", i, victim, f.name, r.Err)
			case <-ctx.Done():
				t.Fatalf("locker %d did not queue behind its holder (member %d down, %s): %v", i, victim, f.name, ctx.Err())
			}
			wcancel()
		}
	}
	for _, h := range holders {
		mustUnlock(t, h)
	}
	for i, res := range results {
		l := successor(t, res, holders[i].Token(), fmt.Sprintf("locker %d, enqueued with member %d down (%s)", i, victim, f.name))
		mustUnlock(t, l)
	}
	f.heal(t, c, victim)
	healed = true
}

// follower returns a follower of c and a client of the other two members.
func follower(t *testing.T, c *integration.EtcdCluster) (int, *clientv3.Client) {
	t.Helper()
	lead, err := c.Leader(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	f := (lead + 1) % 3
	t.Logf("leader %d; the fault hits member %d; %s", lead, f, raftState(c))
	admin, err := c.Client(lead, (lead+2)%3)
	if err != nil {
		t.Fatal(err)
	}
	return f, admin
}

func holdersThroughFault(t *testing.T, c *integration.EtcdCluster, f memberFault) {
	victim, admin := follower(t, c)
	st, err := c.Status(testCtx(t), victim)
	if err != nil {
		t.Fatal(err)
	}
	hedges := &hedgeLog{}
	leases := make([]*distlock.Lease, memberTries)
	for i := range leases {
		log := slog.New(hedges.handler(debugLog(t, fmt.Sprintf("holder %d", i)).Handler()))
		s := newSession(t, allMembersClient(t, c), etcdlock.WithTTL(memberTTL), recipe.WithLogger(log))
		leases[i] = mustLock(t, newMutex(t, s, fmt.Sprintf("down-%s-holder-%d", f.name, i)))
	}
	// Healed however the test ends, also when apply finds that the fault
	// did not take effect.
	healed := false
	defer func() {
		if !healed {
			f.heal(t, c, victim)
		}
	}()
	term := maxTerm(c)
	f.apply(t, c, victim)
	// On a loaded machine keepalives may need hedging before the fault,
	// too, and be answered by any member: count from here.
	hedges.reset()
	lost := watchLost(leases)
	select {
	case i := <-lost:
		if electedDuring(t, c, term) {
			return
		}
		t.Fatalf("holder %d lost its lock with member %d down (%s): %v (%s)", i, victim, f.name, leases[i].Err(), raftState(c))
	case <-time.After(2 * memberTTL):
	}
	kept := 0
	for i, l := range leases {
		if err := stillHeld(t, admin, l, fmt.Sprintf("holder %d", i)); err != nil {
			t.Error(err)
			continue
		}
		kept++
	}
	t.Logf("%s: %d of %d holders kept their locks for %v", f.name, kept, len(leases), 2*memberTTL)
	// Proof that retries reached other members: under a frozen or cut-off
	// member, about a third of the keepalives go to it first, and each of
	// them must have been answered by another member. (A killed member's
	// connections are gone, so the balancer skips it and nothing needs
	// hedging.)
	answered := hedges.members()
	t.Logf("%s: %d keepalives answered only after hedging, by members %x", f.name, len(answered), answered)
	if f.name != "kill" && len(answered) == 0 {
		t.Errorf("%s: no keepalive needed hedging with member %d silent: did the fault reach the clients?", f.name, victim)
	}
	for _, m := range answered {
		if m == st.Header.MemberId {
			t.Errorf("%s: a hedged keepalive was answered by the silent member %x", f.name, m)
		}
	}
	f.heal(t, c, victim)
	healed = true
	for _, l := range leases {
		mustUnlock(t, l)
	}
}

func waitersThroughFault(t *testing.T, c *integration.EtcdCluster, f memberFault) {
	victim, admin := follower(t, c)
	taps := &hedgeLog{}
	holders := make([]*distlock.Lease, memberTries)
	sessions := make([]*etcdlock.Session, memberTries)
	results := make([]<-chan result, memberTries)
	for i := range holders {
		name := fmt.Sprintf("down-%s-waiter-%d", f.name, i)
		// The holders' clients know the healthy members only: the
		// waiters are under test here.
		holders[i] = mustLock(t, newMutex(t, newSession(t, admin, etcdlock.WithTTL(memberTTL)), name))
		// The fault must find the waiter waiting, past its enqueue (a
		// Lock made during the fault is enqueuesThroughFault's case).
		// The put showing in the queue is not enough (its answer may
		// still be on its way), so wait for the session to log it.
		enqueued := make(chan struct{})
		log := slog.New(signalOn("etcdlock: enqueued", enqueued, taps.handler(debugLog(t, fmt.Sprintf("waiter %d", i)).Handler())))
		sessions[i] = newSession(t, allMembersClient(t, c), etcdlock.WithTTL(memberTTL), recipe.WithLogger(log))
		results[i] = lockAsync(testCtx(t), newMutex(t, sessions[i], name))
		select {
		case <-enqueued:
		case r := <-results[i]:
			t.Fatalf("waiter %d's Lock returned before the fault, its lock held: %v", i, r.Err)
		case <-time.After(locktest.Timeout):
			t.Fatalf("waiter %d not enqueued after %v, before any fault (session: %v; %s)", i, locktest.Timeout, sessions[i].Err(), raftState(c))
		}
	}
	// Healed however the test ends, also when apply finds that the fault
	// did not take effect.
	healed := false
	defer func() {
		if !healed {
			f.heal(t, c, victim)
		}
	}()
	term := maxTerm(c)
	f.apply(t, c, victim)
	taps.reset()
	ended := make(chan int, memberTries)
	for i, s := range sessions {
		go func() {
			select {
			case <-s.Done():
				ended <- i
			case <-t.Context().Done():
			}
		}()
	}
	select {
	case i := <-ended:
		if electedDuring(t, c, term) {
			return
		}
		t.Fatalf("waiter %d's session ended with member %d down (%s): %v (%s)", i, victim, f.name, sessions[i].Err(), raftState(c))
	case <-time.After(2 * memberTTL):
	}
	for i, res := range results {
		select {
		case r := <-res:
			t.Fatalf("waiter %d returned while its lock is held (err %v)", i, r.Err)
		default:
		}
	}
	// Released while the member is still down: the waiters must hear it
	// even if their watch streams sat on that member.
	for _, h := range holders {
		mustUnlock(t, h)
	}
	acquired := 0
	for i, res := range results {
		l := successor(t, res, holders[i].Token(), fmt.Sprintf("waiter %d with member %d down (%s)", i, victim, f.name))
		acquired++
		mustUnlock(t, l)
	}
	t.Logf("%s: %d of %d waiters kept their places for %v and acquired after the release", f.name, acquired, len(holders), 2*memberTTL)
	t.Logf("%s: %d watch streams moved off a silent member", f.name, taps.streamsMoved())
	f.heal(t, c, victim)
	healed = true
}

// watchLost reports the index of every lease that is lost (not
// released).
func watchLost(leases []*distlock.Lease) <-chan int {
	lost := make(chan int, len(leases))
	for i, l := range leases {
		go func() {
			<-l.Done()
			if !errors.Is(l.Err(), distlock.ErrReleased) {
				lost <- i
			}
		}()
	}
	return lost
}

// hedgeLog collects, from sessions' logs, the members that answered
// keepalives only after hedging, and counts the watch streams moved off a
// silent member.
type hedgeLog struct {
	mu    sync.Mutex
	ids   []uint64
	moved int
}

func (h *hedgeLog) reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ids, h.moved = nil, 0
}

func (h *hedgeLog) streamsMoved() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.moved
}

func (h *hedgeLog) members() []uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]uint64(nil), h.ids...)
}

// handler returns a slog.Handler that records into h and passes every
// record on to next.
func (h *hedgeLog) handler(next slog.Handler) slog.Handler { return hedgeHandler{h, next} }

type hedgeHandler struct {
	h    *hedgeLog
	next slog.Handler
}

func (x hedgeHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || x.next.Enabled(ctx, l)
}

func (x hedgeHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "etcdlock: watch stream silent; moving the session's watches to a new stream" {
		x.h.mu.Lock()
		x.h.moved++
		x.h.mu.Unlock()
	}
	if r.Message == "etcdlock: keepalive answered after hedging" {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "member" {
				if id, err := strconv.ParseUint(a.Value.String(), 16, 64); err == nil {
					x.h.mu.Lock()
					x.h.ids = append(x.h.ids, id)
					x.h.mu.Unlock()
				}
			}
			return true
		})
	}
	if x.next.Enabled(ctx, r.Level) {
		return x.next.Handle(ctx, r)
	}
	return nil
}

func (x hedgeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return hedgeHandler{x.h, x.next.WithAttrs(as)}
}

func (x hedgeHandler) WithGroup(g string) slog.Handler {
	return hedgeHandler{x.h, x.next.WithGroup(g)}
}

// signalOn returns a slog.Handler that closes ch on the first record with
// message msg and passes every record on to next.
func signalOn(msg string, ch chan struct{}, next slog.Handler) slog.Handler {
	return &signalHandler{msg: msg, ch: ch, once: &sync.Once{}, next: next}
}

type signalHandler struct {
	msg  string
	ch   chan struct{}
	once *sync.Once
	next slog.Handler
}

func (x *signalHandler) Enabled(ctx context.Context, l slog.Level) bool { return true }

func (x *signalHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == x.msg {
		x.once.Do(func() { close(x.ch) })
	}
	if x.next.Enabled(ctx, r.Level) {
		return x.next.Handle(ctx, r)
	}
	return nil
}

func (x *signalHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &signalHandler{x.msg, x.ch, x.once, x.next.WithAttrs(as)}
}

func (x *signalHandler) WithGroup(g string) slog.Handler {
	return &signalHandler{x.msg, x.ch, x.once, x.next.WithGroup(g)}
}

type tlog struct{ t *testing.T }

func (w tlog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// debugLog is the debug log of one session of a member-fault test: with
// DISTLOCK_DEBUG set, written to the test's log as it happens; otherwise
// kept (the last 64 KiB) and written to the test's log only if the test
// fails, so that a failure on CI says what the session did.
func debugLog(t *testing.T, who string) *slog.Logger {
	if os.Getenv("DISTLOCK_DEBUG") != "" {
		return slog.New(slog.NewTextHandler(tlog{t}, &slog.HandlerOptions{Level: slog.LevelDebug})).With("who", who)
	}
	kept := &tailBuffer{max: 64 << 10}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("debug log of %s:\n%s", who, kept.String())
		}
	})
	return slog.New(slog.NewTextHandler(kept, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (w *tailBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b = append(w.b, p...)
	if over := len(w.b) - w.max; over > 0 {
		w.b = append(w.b[:0], w.b[over:]...)
	}
	return len(p), nil
}

func (w *tailBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.b)
}
