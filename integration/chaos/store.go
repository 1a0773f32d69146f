package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/fencing/etcdfence"
	"github.com/distlock/distlock/fencing/zkfence"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/internal/zkctx"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Store names.
const (
	Etcd      = "etcd"
	ZooKeeper = "zk"
)

// Faults are the server faults both harness clusters offer
// (*integration.EtcdCluster and *integration.ZooKeeperEnsemble).
type Faults interface {
	Kill(i int) error
	Restart(ctx context.Context, i int) error
	Pause(i int) error
	Resume(i int) error
	Cut(i int) error
	Heal(i int)
	CheckAttribution() error
	Network() *integration.Network
	Leader(ctx context.Context) (int, error)
	WaitHealthy(ctx context.Context) error
}

// Store is a running cluster of one kind, as the runner, workloads and
// nemeses use it.
type Store interface {
	// Name is Etcd or ZooKeeper.
	Name() string
	// TTL is the workers' session TTL (etcd) or session timeout (zk).
	TTL() time.Duration
	// HolderTTL is the TTL of the child-process lock holder.
	HolderTTL() time.Duration
	// Size is the number of servers.
	Size() int
	// Node is server i's name in the cluster's Network.
	Node(i int) string
	// Faults injects faults into the servers.
	Faults() Faults
	// NewClient connects a client to every server.
	NewClient(ctx context.Context) (Client, error)
	// Holder describes a child-process holder of lock.
	Holder(lock string) integration.HolderSpec
	// Close stops the cluster.
	Close() error
}

// Client is one client connection with its own sessions.
type Client interface {
	// NewSession opens a lock session on the connection.
	NewSession(ctx context.Context, opts ...SessionOption) (Session, error)
	// Register returns the store-fenced register called name, guarded
	// by lock.
	Register(ctx context.Context, name, lock string) (Register, error)
	// Registers returns store-fenced registers, names[i] guarded by
	// locks[i], that one write of the store can set together.
	Registers(ctx context.Context, names, locks []string) (RegisterSet, error)
	// Entries lists the keys or znodes of lock's queue.
	Entries(ctx context.Context, lock string) ([]string, error)
	// Revoke revokes lock's holders (recipe.Admin.Revoke, recipe.Admin.Revoke).
	Revoke(ctx context.Context, lock string, r distlock.RevokeRequest) ([]distlock.Revocation, error)
	// Close closes the connection.
	Close() error
}

// Session is a lock session.
type Session interface {
	Mutex(name string) (distlock.Locker, error)
	// MultiMutex is the lock on several names at once
	// (etcdlock.NewMultiMutex, zklock.NewMultiMutex).
	MultiMutex(names ...string) (distlock.Locker, error)
	RWMutex(name string) (rw RW, err error)
	// Election is the election called name (etcdlock.NewElection,
	// zklock.NewElection), with opts (distlock.WithPreemptGrace).
	Election(name string, opts ...distlock.ElectionOption) (Election, error)
	Semaphore(name string, n int) (Semaphore, error)
	Done() <-chan struct{}
	Close(ctx context.Context) error
}

// RegisterSet is store-fenced registers, each guarded by a lock of its
// own, that one write of the store sets together, all or none
// (etcdfence.WriteAll, zkfence.WriteAll).
type RegisterSet interface {
	// Registers returns the registers, in the order they were asked for.
	Registers() []Register
	// WriteAll sets register idx[k] to vs[k] for every k, in one write
	// of the store, if every one of their fences admits its token of
	// tokens (the one of its lock; one token per register written). It
	// returns the write's position in the store's order.
	WriteAll(ctx context.Context, tokens []distlock.Token, idx []int, vs []int64) (order int64, err error)
}

// RW is a read-write lock of either backend.
type RW interface {
	Lock(ctx context.Context) (*distlock.Lease, error)
	RLock(ctx context.Context) (*distlock.Lease, error)
}

// Semaphore is a semaphore of either backend.
type Semaphore interface {
	Acquire(ctx context.Context) (*distlock.Permit, error)
}

// Election is an election of either backend.
type Election interface {
	Campaign(ctx context.Context, value string, opts ...distlock.CampaignOption) (distlock.Leadership, error)
	Observe(ctx context.Context) <-chan distlock.LeaderInfo
}

// SessionOption configures a session opened by Client.NewSession.
type SessionOption func(*sessionConfig)

type sessionConfig struct {
	revocable bool
}

// Revocable opens a revocable session (etcdlock.WithRevocable,
// zklock.WithRevocable): a revocation of one of its holders or leaders
// closes the Lease's or Leadership's Done with a *distlock.RevokedError
// before any force.
func Revocable() SessionOption { return func(c *sessionConfig) { c.revocable = true } }

func newSessionConfig(opts []SessionOption) sessionConfig {
	var c sessionConfig
	for _, o := range opts {
		o(&c)
	}
	return c
}

// zkClientFaults are the per-client faults only ZooKeeper's harness has.
type zkClientFaults interface {
	Expire(ctx context.Context) error
	HoldReplies() (release func(), err error)
	DropConnection() error
}

// compactor is a store that can compact its history (etcd).
type compactor interface {
	Compact(ctx context.Context) (int64, error)
}

// StartStore starts a 3-server cluster of the named store, with the
// harness options given (e.g. integration.WithTLS() for an etcd cluster
// that speaks TLS only, with client-certificate auth: workers, holders
// and checkers then all connect over TLS).
func StartStore(ctx context.Context, name string, log *slog.Logger, extra ...integration.Option) (Store, error) {
	opts := append([]integration.Option{integration.WithLogger(log)}, extra...)
	switch name {
	case Etcd:
		c, err := integration.StartEtcd(ctx, opts...)
		if err != nil {
			return nil, err
		}
		return &etcdStore{c: c}, nil
	case ZooKeeper:
		// Reconfiguration enabled, for the member-change nemesis.
		e, err := integration.StartZooKeeper(ctx, append(opts, integration.WithReconfig())...)
		if err != nil {
			return nil, err
		}
		return &zkStore{e: e}, nil
	}
	return nil, fmt.Errorf("chaos: unknown store %q (want %q or %q)", name, Etcd, ZooKeeper)
}

// etcdTTL is the workers' session TTL on etcd: short, so that faults
// expire sessions, but above etcdlock.MinTTL.
const etcdTTL = 3 * time.Second

type etcdStore struct{ c *integration.EtcdCluster }

func (s *etcdStore) Name() string             { return Etcd }
func (s *etcdStore) TTL() time.Duration       { return etcdTTL }
func (s *etcdStore) HolderTTL() time.Duration { return etcdlock.MinTTL }
func (s *etcdStore) Size() int                { return len(s.c.Members) }
func (s *etcdStore) Node(i int) string        { return s.c.Members[i].Name }
func (s *etcdStore) Faults() Faults           { return s.c }
func (s *etcdStore) Close() error             { return s.c.Close() }
func (s *etcdStore) Holder(lock string) integration.HolderSpec {
	return integration.HolderSpec{Backend: "etcd", Endpoints: s.c.Endpoints(), Lock: lock, TTL: s.HolderTTL(), TLS: s.c.TLS}
}

func (s *etcdStore) NewClient(ctx context.Context) (Client, error) {
	cli, relay, err := s.c.RelayedClient()
	if err != nil {
		return nil, err
	}
	admin, err := etcdlock.NewAdmin(cli, "")
	if err != nil {
		cli.Close()
		return nil, err
	}
	return &etcdClient{cli: cli, relay: relay, admin: admin}, nil
}

// Compact compacts the store's history up to its current revision, so
// that watches started from an older revision fail.
func (s *etcdStore) Compact(ctx context.Context) (int64, error) {
	cli, err := s.c.Client()
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	resp, err := cli.Get(ctx, "chaos-compact")
	if err != nil {
		return 0, err
	}
	rev := resp.Header.Revision
	_, err = cli.Compact(ctx, rev, clientv3.WithCompactPhysical())
	return rev, err
}

type etcdClient struct {
	cli   *clientv3.Client
	admin *recipe.Admin
	// relay stands between the client and the members, for the faults
	// of this client alone (nemesis_client.go).
	relay *integration.ClientRelay
}

func (c *etcdClient) Close() error { return nil } // closed with the cluster

func (c *etcdClient) NewSession(ctx context.Context, opts ...SessionOption) (Session, error) {
	o := []recipe.Option{etcdlock.WithTTL(etcdTTL)}
	if newSessionConfig(opts).revocable {
		o = append(o, recipe.WithRevocable())
	}
	s, err := etcdlock.NewSession(ctx, c.cli, o...)
	if err != nil {
		return nil, err
	}
	return etcdSession{s}, nil
}

func (c *etcdClient) Entries(ctx context.Context, lock string) ([]string, error) {
	es, err := c.admin.Inspect(ctx, lock)
	return entryKeys(es), err
}

func (c *etcdClient) Revoke(ctx context.Context, lock string, r distlock.RevokeRequest) ([]distlock.Revocation, error) {
	return c.admin.Revoke(ctx, lock, r)
}

func entryKeys(es []distlock.QueueEntry) []string {
	var keys []string
	for _, e := range es {
		keys = append(keys, fmt.Sprintf("%s(owner %s, token %s)", e.Key, e.Owner, e.Token))
	}
	return keys
}

type etcdSession struct{ s *etcdlock.Session }

func (s etcdSession) Mutex(name string) (distlock.Locker, error) { return recipe.NewMutex(s.s, name) }
func (s etcdSession) RWMutex(name string) (RW, error)            { return recipe.NewRWMutex(s.s, name) }
func (s etcdSession) MultiMutex(names ...string) (distlock.Locker, error) {
	return recipe.NewMultiMutex(s.s, names...)
}
func (s etcdSession) Election(name string, opts ...distlock.ElectionOption) (Election, error) {
	return recipe.NewElection(s.s, name, opts...)
}
func (s etcdSession) Semaphore(name string, n int) (Semaphore, error) {
	return recipe.NewSemaphore(s.s, name, n)
}
func (s etcdSession) Done() <-chan struct{}           { return s.s.Done() }
func (s etcdSession) Close(ctx context.Context) error { return s.s.Close(ctx) }

func (c *etcdClient) Register(ctx context.Context, name, lock string) (Register, error) {
	f, err := etcdfence.New(c.cli, "/chaos/fence/"+name, lock)
	if err != nil {
		return nil, err
	}
	return &etcdRegister{name: name, cli: c.cli, f: f, key: "/chaos/register/" + name}, nil
}

func (c *etcdClient) Registers(ctx context.Context, names, locks []string) (RegisterSet, error) {
	set := &etcdRegisterSet{}
	for i, name := range names {
		r, err := c.Register(ctx, name, locks[i])
		if err != nil {
			return nil, err
		}
		set.regs = append(set.regs, r.(*etcdRegister))
	}
	return set, nil
}

// etcdRegisterSet is etcd registers of one client written together by
// etcdfence.WriteAll: one Txn, guarded by every fence.
type etcdRegisterSet struct{ regs []*etcdRegister }

func (s *etcdRegisterSet) Registers() []Register {
	out := make([]Register, len(s.regs))
	for i, r := range s.regs {
		out[i] = r
	}
	return out
}

func (s *etcdRegisterSet) WriteAll(ctx context.Context, tokens []distlock.Token, idx []int, vs []int64) (int64, error) {
	fences := make([]*etcdfence.Fence, len(idx))
	ops := make([]clientv3.Op, len(idx))
	for k, i := range idx {
		fences[k] = s.regs[i].f
		ops[k] = clientv3.OpPut(s.regs[i].key, strconv.FormatInt(vs[k], 10))
	}
	resp, err := etcdfence.WriteAll(ctx, tokens, fences, ops...)
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

// etcdRegister is a register stored in etcd, fenced by etcdfence: a read
// admits the token first (so that an older holder's write after it is
// refused), a write is the fence's Txn.
type etcdRegister struct {
	name string
	cli  *clientv3.Client
	f    *etcdfence.Fence
	key  string
}

func (r *etcdRegister) Name() string { return r.name }
func (r *etcdRegister) Fenced() bool { return true }

func (r *etcdRegister) Read(ctx context.Context, t distlock.Token) (int64, error) {
	if err := r.f.Admit(ctx, t); err != nil {
		return 0, err
	}
	resp, err := r.cli.Get(ctx, r.key)
	if err != nil {
		return 0, err
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	return strconv.ParseInt(string(resp.Kvs[0].Value), 10, 64)
}

func (r *etcdRegister) Write(ctx context.Context, t distlock.Token, v int64) (int64, error) {
	resp, err := r.f.Write(ctx, t, clientv3.OpPut(r.key, strconv.FormatInt(v, 10)))
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

type zkStore struct {
	e *integration.ZooKeeperEnsemble
}

// zkTTL is the session timeout of the harness's ZooKeeper connections.
const zkTTL = 10 * time.Second

func (s *zkStore) Name() string             { return ZooKeeper }
func (s *zkStore) TTL() time.Duration       { return zkTTL }
func (s *zkStore) HolderTTL() time.Duration { return 4 * time.Second }
func (s *zkStore) Size() int                { return len(s.e.Servers) }
func (s *zkStore) Node(i int) string        { return s.e.Servers[i].Name }
func (s *zkStore) Faults() Faults           { return s.e }
func (s *zkStore) Close() error             { return s.e.Close() }
func (s *zkStore) Holder(lock string) integration.HolderSpec {
	return integration.HolderSpec{Backend: "zk", Endpoints: s.e.Addrs(), Lock: lock, TTL: s.HolderTTL()}
}

func (s *zkStore) NewClient(ctx context.Context) (Client, error) {
	conn, _, err := s.e.Connect(ctx)
	if err != nil {
		return nil, err
	}
	admin, err := zklock.NewAdmin(conn, "")
	if err != nil {
		return nil, err
	}
	return &zkClient{e: s.e, conn: conn, admin: admin}, nil
}

type zkClient struct {
	e     *integration.ZooKeeperEnsemble
	conn  *zk.Conn
	admin *recipe.Admin
}

func (c *zkClient) Close() error { return nil } // closed with the ensemble

func (c *zkClient) NewSession(ctx context.Context, opts ...SessionOption) (Session, error) {
	var o []recipe.Option
	if newSessionConfig(opts).revocable {
		o = append(o, recipe.WithRevocable())
	}
	s, err := zklock.NewSession(ctx, c.conn, o...)
	if err != nil {
		return nil, err
	}
	return zkSession{s}, nil
}

func (c *zkClient) Entries(ctx context.Context, lock string) ([]string, error) {
	es, err := c.admin.Inspect(ctx, lock)
	return entryKeys(es), err
}

func (c *zkClient) Revoke(ctx context.Context, lock string, r distlock.RevokeRequest) ([]distlock.Revocation, error) {
	return c.admin.Revoke(ctx, lock, r)
}

func (c *zkClient) Expire(ctx context.Context) error { return c.e.ExpireSession(ctx, c.conn) }
func (c *zkClient) HoldReplies() (func(), error)     { return c.e.HoldReplies(c.conn) }
func (c *zkClient) DropConnection() error            { return c.e.DropConnection(c.conn) }
func (c *zkClient) call(ctx context.Context, f func() error) error {
	_, err := zkctx.Call(ctx, func() (struct{}, error) { return struct{}{}, f() })
	return err
}

type zkSession struct{ s *zklock.Session }

func (s zkSession) Mutex(name string) (distlock.Locker, error) { return recipe.NewMutex(s.s, name) }
func (s zkSession) RWMutex(name string) (RW, error)            { return recipe.NewRWMutex(s.s, name) }
func (s zkSession) MultiMutex(names ...string) (distlock.Locker, error) {
	return recipe.NewMultiMutex(s.s, names...)
}
func (s zkSession) Election(name string, opts ...distlock.ElectionOption) (Election, error) {
	return recipe.NewElection(s.s, name, opts...)
}
func (s zkSession) Semaphore(name string, n int) (Semaphore, error) {
	return recipe.NewSemaphore(s.s, name, n)
}
func (s zkSession) Done() <-chan struct{}           { return s.s.Done() }
func (s zkSession) Close(ctx context.Context) error { return s.s.Close(ctx) }

func (c *zkClient) Register(ctx context.Context, name, lock string) (Register, error) {
	path := "/chaos-register-" + name
	err := c.call(ctx, func() error {
		_, err := c.conn.Create(path, []byte("0"), 0, zk.WorldACL(zk.PermAll))
		if errors.Is(err, zk.ErrNodeExists) {
			return nil
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	f, err := zkfence.New(c.conn, "/chaos-fence-"+name, lock)
	if err != nil {
		return nil, err
	}
	return &zkRegister{name: name, c: c, f: f, path: path}, nil
}

func (c *zkClient) Registers(ctx context.Context, names, locks []string) (RegisterSet, error) {
	set := &zkRegisterSet{}
	for i, name := range names {
		r, err := c.Register(ctx, name, locks[i])
		if err != nil {
			return nil, err
		}
		set.regs = append(set.regs, r.(*zkRegister))
	}
	return set, nil
}

// zkRegisterSet is znode registers of one connection written together by
// zkfence.WriteAll: one multi, guarded by every fence.
type zkRegisterSet struct{ regs []*zkRegister }

func (s *zkRegisterSet) Registers() []Register {
	out := make([]Register, len(s.regs))
	for i, r := range s.regs {
		out[i] = r
	}
	return out
}

func (s *zkRegisterSet) WriteAll(ctx context.Context, tokens []distlock.Token, idx []int, vs []int64) (int64, error) {
	fences := make([]*zkfence.Fence, len(idx))
	ops := make([]any, len(idx))
	for k, i := range idx {
		fences[k] = s.regs[i].f
		ops[k] = &zk.SetDataRequest{Path: s.regs[i].path, Data: []byte(strconv.FormatInt(vs[k], 10)), Version: -1}
	}
	rs, err := zkfence.WriteAll(ctx, tokens, fences, ops...)
	if err != nil {
		return 0, err
	}
	// Every op of the multi has its zxid.
	var order int64
	for _, r := range rs {
		if r.Stat != nil {
			order = max(order, r.Stat.Mzxid)
		}
	}
	return order, nil
}

// zkRegister is a register stored in a znode, fenced by zkfence: a read
// admits the token, syncs and reads; a write is the fence's multi.
type zkRegister struct {
	name string
	c    *zkClient
	f    *zkfence.Fence
	path string
}

func (r *zkRegister) Name() string { return r.name }
func (r *zkRegister) Fenced() bool { return true }

func (r *zkRegister) Read(ctx context.Context, t distlock.Token) (int64, error) {
	if err := r.f.Admit(ctx, t); err != nil {
		return 0, err
	}
	var data []byte
	err := r.c.call(ctx, func() error {
		if _, err := r.c.conn.Sync(r.path); err != nil {
			return err
		}
		var err error
		data, _, err = r.c.conn.Get(r.path)
		return err
	})
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(string(data), 10, 64)
}

func (r *zkRegister) Write(ctx context.Context, t distlock.Token, v int64) (int64, error) {
	rs, err := r.f.Write(ctx, t, &zk.SetDataRequest{Path: r.path, Data: []byte(strconv.FormatInt(v, 10)), Version: -1})
	if err != nil {
		return 0, err
	}
	if len(rs) == 1 && rs[0].Stat != nil {
		return rs[0].Stat.Mzxid, nil
	}
	return 0, nil
}
