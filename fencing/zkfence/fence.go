package zkfence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
	"github.com/go-zookeeper/zk"
)

// Fence guards one resource with the tokens of one lock; the newest token
// admitted is stored in the data of the znode at its path. It is safe for
// concurrent use, and any number of Fence values, on any connections, may
// share a path.
type Fence struct {
	conn *zk.Conn
	path string
	lock string
	acl  []zk.ACL
	tel  []fencing.Option // until New makes telemetry of them
	obs  *fencing.Telemetry
}

// Option configures a Fence.
type Option func(*Fence)

// WithACL sets the ACL of the fence node and of the parents Write creates
// (default zk.WorldACL(zk.PermAll)).
func WithACL(acl ...zk.ACL) Option { return func(f *Fence) { f.acl = acl } }

// WithTelemetry says where the fence counts its decisions and traces its
// refusals (fencing.WithMeterProvider, fencing.WithTracerProvider);
// default: OpenTelemetry's global providers.
func WithTelemetry(opts ...fencing.Option) Option {
	return func(f *Fence) { f.tel = append(f.tel, opts...) }
}

var _ fencing.Fence = (*Fence)(nil)

// New returns the fence stored at path for a resource guarded by the lock
// called lock. New touches nothing in ZooKeeper: a node that does not
// exist yet means no token was admitted.
func New(conn *zk.Conn, path, lock string, opts ...Option) (*Fence, error) {
	if conn == nil {
		return nil, fmt.Errorf("zkfence: new fence %q: %w: *zk.Conn is nil", path, distlock.ErrNilClient)
	}
	if err := checkPath(path); err != nil {
		return nil, fmt.Errorf("zkfence: new fence: %w", err)
	}
	if err := distlock.ValidateName(lock); err != nil {
		return nil, fmt.Errorf("zkfence: new fence %q: %w", path, err)
	}
	f := &Fence{conn: conn, path: path, lock: lock}
	for _, o := range opts {
		o(f)
	}
	if len(f.acl) == 0 {
		f.acl = zk.WorldACL(zk.PermAll)
	}
	f.obs, f.tel = fencing.NewTelemetry("zookeeper", lock, f.tel...), nil
	return f, nil
}

// checkPath accepts an absolute znode path other than the root, without
// empty, "." or ".." segments or a trailing '/'.
func checkPath(p string) error {
	if p == "" || p[0] != '/' || p == "/" || strings.HasSuffix(p, "/") {
		return fmt.Errorf("%w: path %q is not an absolute znode path below the root", fencing.ErrInvalidArgument, p)
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "" || seg == "." || seg == ".." || strings.ContainsRune(seg, 0) {
			return fmt.Errorf("%w: path %q has an empty, \".\", \"..\" or invalid segment", fencing.ErrInvalidArgument, p)
		}
	}
	return nil
}

// Path returns the path of the fence node.
func (f *Fence) Path() string { return f.path }

// Lock returns the name of the lock whose tokens the fence admits.
func (f *Fence) Lock() string { return f.lock }

func (f *Fence) resource() string { return fmt.Sprintf("zookeeper fence %q", f.path) }

// Admit records t as the newest token if no newer one was admitted before,
// nor another acquisition with t's sequence number, and otherwise returns
// a *fencing.StaleError or a *fencing.ForkError. It is Write without
// operations.
func (f *Fence) Admit(ctx context.Context, t distlock.Token) error {
	_, err := f.Write(ctx, t)
	return err
}

// Write admits t and applies ops in one ZooKeeper multi: both happen only
// if no token newer than t was admitted before, nor another acquisition
// with t's sequence number (t itself may have been), and then the result
// has one zk.MultiResponse per op, in order (the fence's own set or create
// is left out). Otherwise nothing is written and the error is a
// *fencing.StaleError naming the newer token, or a *fencing.ForkError
// naming the other acquisition's. Each op is a
// *zk.CreateRequest, *zk.SetDataRequest, *zk.DeleteRequest or
// *zk.CheckVersionRequest, and none may be on the fence's path. If one of
// the ops fails, nothing is applied, t is not recorded either, and the
// error wraps the op's ZooKeeper error (zk.ErrNodeExists, ...).
//
// A concurrent writer of the fence makes the multi fail its version check
// (or its creation); Write then syncs, reads the node again and decides
// again, until it commits, is refused, or ctx ends.
func (f *Fence) Write(ctx context.Context, t distlock.Token, ops ...any) ([]zk.MultiResponse, error) {
	rs, err := f.decide(ctx, t, ops)
	f.obs.Record(ctx, t, err)
	return rs, err
}

// decide is Write's check and multi.
func (f *Fence) decide(ctx context.Context, t distlock.Token, ops []any) ([]zk.MultiResponse, error) {
	if err := fencing.Check(f.resource(), f.lock, t); err != nil {
		return nil, err
	}
	if err := f.checkOps(ops); err != nil {
		return nil, err
	}
	data := encode(t)
	for conflicts := 0; ; conflicts++ {
		if conflicts > 0 {
			// Our read lost a race, or the server answering it lagged:
			// make it catch up with the leader before reading again.
			if _, err := call(ctx, func() (string, error) { return f.conn.Sync(f.path) }); err != nil && !errors.Is(err, zk.ErrNoNode) {
				return nil, f.storeErr(t, "sync", err)
			}
		}
		newest, stat, err := f.read(ctx)
		if err != nil {
			return nil, f.storeErr(t, "read", err)
		}
		if err := fencing.Compare(f.resource(), t, newest); err != nil {
			return nil, err
		}
		var first any = &zk.CreateRequest{Path: f.path, Data: data, Acl: f.acl}
		if stat != nil {
			first = &zk.SetDataRequest{Path: f.path, Data: data, Version: stat.Version}
		}
		rs, err := call(ctx, func() ([]zk.MultiResponse, error) { return f.conn.Multi(append([]any{first}, ops...)...) })
		i, cause := multiErr(rs, err)
		switch {
		case cause == nil:
			return rs[1:], nil
		case i == 0 && (errors.Is(cause, zk.ErrBadVersion) || errors.Is(cause, zk.ErrNodeExists)):
			continue // another writer got there first
		case i == 0 && errors.Is(cause, zk.ErrNoNode) && stat != nil:
			continue // the node was deleted since we read it
		case i == 0 && errors.Is(cause, zk.ErrNoNode):
			if err := f.createParents(ctx); err != nil {
				return nil, f.storeErr(t, "create parents", err)
			}
			continue
		case i > 0:
			return nil, fmt.Errorf("zkfence: %s: token %v: op %d (%T): %w", f.resource(), t, i-1, ops[i-1], cause)
		}
		return nil, f.storeErr(t, "multi", cause)
	}
}

func (f *Fence) checkOps(ops []any) error {
	for i, op := range ops {
		p, err := opPath(op)
		if err != nil {
			return fmt.Errorf("zkfence: %s: op %d %w", f.resource(), i, err)
		}
		if p == f.path {
			return fmt.Errorf("zkfence: %s: %w: op %d (%T) is on the fence node itself", f.resource(), fencing.ErrInvalidArgument, i, op)
		}
	}
	return nil
}

// opPath returns the path of an op of a multi, or why it is no such op.
func opPath(op any) (string, error) {
	var p string
	switch o := op.(type) {
	case *zk.CreateRequest:
		if o != nil {
			p = o.Path
		}
	case *zk.SetDataRequest:
		if o != nil {
			p = o.Path
		}
	case *zk.DeleteRequest:
		if o != nil {
			p = o.Path
		}
	case *zk.CheckVersionRequest:
		if o != nil {
			p = o.Path
		}
	default:
		return "", fmt.Errorf("%w: is a %T, not a *zk.CreateRequest, *zk.SetDataRequest, *zk.DeleteRequest or *zk.CheckVersionRequest", fencing.ErrInvalidArgument, op)
	}
	if p == "" {
		return "", fmt.Errorf("%w: (%T) is nil or has no path", fencing.ErrInvalidArgument, op)
	}
	return p, nil
}

// multiErr returns the index and the error of the operation that made a
// multi fail: ZooKeeper reports success for the ops before it and a
// runtime inconsistency for those after. i is -1 when no op says.
func multiErr(rs []zk.MultiResponse, err error) (int, error) {
	for i, r := range rs {
		if r.Error != nil {
			return i, r.Error
		}
	}
	return -1, err
}

// read returns the stored token (zero if none) and the node's Stat (nil
// if it does not exist). A node with no data holds no token.
func (f *Fence) read(ctx context.Context) (distlock.Token, *zk.Stat, error) {
	type got struct {
		data []byte
		stat *zk.Stat
	}
	g, err := call(ctx, func() (got, error) {
		data, stat, err := f.conn.Get(f.path)
		return got{data, stat}, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return distlock.Token{}, nil, nil
	}
	if err != nil {
		return distlock.Token{}, nil, err
	}
	if len(g.data) == 0 {
		// A node created empty (as the parent of another fence's node,
		// or by an operator) holds no token yet.
		return distlock.Token{}, g.stat, nil
	}
	t, err := f.decode(g.data)
	if err != nil {
		return distlock.Token{}, nil, err
	}
	return t, g.stat, nil
}

// encode writes the data of a fence node: the part of t's text form after
// the lock's name and '@', "seq.owner".
func encode(t distlock.Token) []byte {
	s := t.String()
	return []byte(s[len(t.Name)+1:])
}

// decode reads the data of a fence node: "seq.owner", or a decimal "seq"
// alone, as stored by versions before tokens named their owner; that
// token's Owner is 0, which makes fencing.Compare refuse every token of
// the same number as a fork (the owner is unknown).
func (f *Fence) decode(data []byte) (distlock.Token, error) {
	bad := fmt.Errorf("stored data %q is not a token written by this package", data)
	if !bytes.ContainsRune(data, '.') {
		seq, err := strconv.ParseInt(string(data), 10, 64)
		if err != nil || seq <= 0 || data[0] == '0' || data[0] == '+' {
			return distlock.Token{}, bad
		}
		return distlock.Token{Name: f.lock, Seq: seq}, nil
	}
	t, err := distlock.ParseToken(f.lock + "@" + string(data))
	if err != nil {
		return distlock.Token{}, bad
	}
	return t, nil
}

// createParents creates the fence node's missing ancestors, persistent.
func (f *Fence) createParents(ctx context.Context) error {
	for i := 1; i < len(f.path); i++ {
		if f.path[i] != '/' {
			continue
		}
		p := f.path[:i]
		_, err := call(ctx, func() (string, error) { return f.conn.Create(p, nil, 0, f.acl) })
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", p, err)
		}
	}
	return nil
}

// Newest returns the newest token admitted, or the zero Token if none was.
// It syncs first, so that the read sees every write the leader committed
// before the call.
func (f *Fence) Newest(ctx context.Context) (distlock.Token, error) {
	if _, err := call(ctx, func() (string, error) { return f.conn.Sync(f.path) }); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return distlock.Token{}, fmt.Errorf("zkfence: %s: sync: %w", f.resource(), err)
	}
	t, _, err := f.read(ctx)
	if err != nil {
		return distlock.Token{}, fmt.Errorf("zkfence: %s: %w", f.resource(), err)
	}
	return t, nil
}

func (f *Fence) storeErr(t distlock.Token, op string, err error) error {
	return fmt.Errorf("zkfence: %s: token %v: %s: %w", f.resource(), t, op, err)
}

// call runs f, a blocking go-zookeeper request, and returns its result, or
// ctx's cause as soon as ctx ends; the request then completes unobserved
// (go-zookeeper offers no way to cancel one). A ctx that has already ended
// sends nothing. (The lock drivers have the same helper; the fence keeps
// its own so that package fencing imports nothing of the engine's.)
func call[T any](ctx context.Context, f func() (T, error)) (T, error) {
	if ctx.Err() != nil {
		var zero T
		return zero, context.Cause(ctx)
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, context.Cause(ctx)
	}
}
