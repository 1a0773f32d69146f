package etcdfence

import (
	"bytes"
	"context"
	"fmt"
	"strconv"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrNotHeld reports a WriteHeld refused because the writer's lock key no
// longer exists with the token's create revision and lease: the lock was
// released, or its session expired, and the write may overlap a
// successor's. It matches distlock.ErrLost with errors.Is.
var ErrNotHeld = fmt.Errorf("etcdfence: lock key gone: %w", distlock.ErrLost)

// width is the number of decimal digits a stored token's sequence number
// is padded to: the largest int64 has 19, so byte order is numeric order
// for every token. ownerWidth is the number of hex digits of its owner.
const (
	width      = 20
	ownerWidth = 16
)

// Fence guards one resource with the tokens of one lock; the newest token
// admitted is stored in etcd under its key. It is safe for concurrent use,
// and any number of Fence values, in any processes, may share a key.
type Fence struct {
	client *clientv3.Client
	key    string
	lock   string
	tel    []fencing.Option // until New makes telemetry of them
	obs    *fencing.Telemetry
}

// Option configures a Fence.
type Option func(*Fence)

// WithTelemetry says where the fence counts its decisions and traces its
// refusals (fencing.WithMeterProvider, fencing.WithTracerProvider);
// default: OpenTelemetry's global providers.
func WithTelemetry(opts ...fencing.Option) Option {
	return func(f *Fence) { f.tel = append(f.tel, opts...) }
}

var _ fencing.Fence = (*Fence)(nil)

// New returns the fence stored under key for a resource guarded by the
// lock called lock. It touches nothing in etcd: a key that does not exist
// yet means no token was admitted.
func New(client *clientv3.Client, key, lock string, opts ...Option) (*Fence, error) {
	if client == nil {
		return nil, fmt.Errorf("etcdfence: new fence %q: %w: *clientv3.Client is nil", key, distlock.ErrNilClient)
	}
	if key == "" {
		return nil, fmt.Errorf("etcdfence: new fence: %w: empty key", fencing.ErrInvalidArgument)
	}
	if err := distlock.ValidateName(lock); err != nil {
		return nil, fmt.Errorf("etcdfence: new fence %q: %w", key, err)
	}
	f := &Fence{client: client, key: key, lock: lock}
	for _, o := range opts {
		o(f)
	}
	f.obs, f.tel = fencing.NewTelemetry("etcd", lock, f.tel...), nil
	return f, nil
}

// Key returns the etcd key the fence's token is stored under.
func (f *Fence) Key() string { return f.key }

// Lock returns the name of the lock whose tokens the fence admits.
func (f *Fence) Lock() string { return f.lock }

func (f *Fence) resource() string { return fmt.Sprintf("etcd fence %q", f.key) }

// Admit records t as the newest token if no newer one was admitted before,
// nor another acquisition with t's sequence number, and otherwise returns
// a *fencing.StaleError or a *fencing.ForkError. It is Write without
// operations.
func (f *Fence) Admit(ctx context.Context, t distlock.Token) error {
	_, err := f.write(ctx, t, "", nil)
	return err
}

// Write admits t and applies ops in one etcd Txn: both happen only if no
// token newer than t was admitted before, nor another acquisition with t's
// sequence number (t itself may have been), and then the response has one
// entry in Responses per op, in order (the fence's own put is left out).
// Otherwise nothing is written and the error is a *fencing.StaleError
// naming the newer token or a *fencing.ForkError naming the other
// acquisition's, read in the same Txn.
// A token of another lock or an invalid one is refused before etcd is
// asked. The ops must not write or delete the fence's key, and together
// with it must stay within the server's limit on operations per Txn.
//
// The check and the ops are one linearizable step: no other Write or
// Admit, from any client, can come between them.
func (f *Fence) Write(ctx context.Context, t distlock.Token, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	return f.write(ctx, t, "", ops)
}

// WriteHeld is Write with one more condition in the same Txn: lockKey, the
// writer's lock entry, must exist with create revision t.Seq, bound to the
// lease t.Owner (an etcd lock's token is its holder key's create revision
// and lease). If t is stale or forked, the error is the same as Write's;
// otherwise, if the key is gone or was re-created, nothing is written and
// the error wraps ErrNotHeld (and so distlock.ErrLost). HolderKey finds
// the key of an etcdlock lock's token.
func (f *Fence) WriteHeld(ctx context.Context, t distlock.Token, lockKey string, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	if lockKey == "" {
		return nil, fmt.Errorf("etcdfence: %s: %w: empty lock key", f.resource(), fencing.ErrInvalidArgument)
	}
	return f.write(ctx, t, lockKey, ops)
}

func (f *Fence) write(ctx context.Context, t distlock.Token, lockKey string, ops []clientv3.Op) (*clientv3.TxnResponse, error) {
	resp, err := f.decide(ctx, t, lockKey, ops)
	f.obs.Record(ctx, t, err)
	return resp, err
}

// decide is write's check and Txn.
func (f *Fence) decide(ctx context.Context, t distlock.Token, lockKey string, ops []clientv3.Op) (*clientv3.TxnResponse, error) {
	if err := fencing.Check(f.resource(), f.lock, t); err != nil {
		return nil, err
	}
	for i, op := range ops {
		if (op.IsPut() || op.IsDelete()) && string(op.KeyBytes()) == f.key {
			return nil, fmt.Errorf("etcdfence: %s: %w: op %d writes the fence's own key", f.resource(), fencing.ErrInvalidArgument, i)
		}
	}
	v := encode(t)
	commit := append([]clientv3.Op{clientv3.OpPut(f.key, v)}, ops...)
	if lockKey != "" {
		commit = []clientv3.Op{clientv3.OpTxn(
			[]clientv3.Cmp{
				clientv3.Compare(clientv3.CreateRevision(lockKey), "=", t.Seq),
				clientv3.Compare(clientv3.LeaseValue(lockKey), "=", clientv3.LeaseID(t.Owner)),
			},
			commit, nil)}
	}
	// Admitted: no token stored yet (a Value compare on a missing key is
	// false whatever the operator, so that needs a test of its own); a
	// stored sequence number below t's ("the stored value sorts before
	// t's padded number alone", as the fixed width makes byte order
	// numeric order); or exactly t stored (a retry). Anything else — a
	// newer number, or t's number with another owner — is read back and
	// refused.
	resp, err := f.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(f.key), "=", 0)).
		Then(commit...).
		Else(clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.Value(f.key), "<", encodeSeq(t.Seq))},
			commit,
			[]clientv3.Op{clientv3.OpTxn(
				[]clientv3.Cmp{clientv3.Compare(clientv3.Value(f.key), "=", v)},
				commit,
				[]clientv3.Op{clientv3.OpGet(f.key)})})).
		Commit()
	if err != nil {
		return nil, fmt.Errorf("etcdfence: %s: token %v: %w", f.resource(), t, err)
	}
	rs := resp.Responses
	if !resp.Succeeded {
		in := rs[0].GetResponseTxn()
		if !in.Succeeded {
			in = in.Responses[0].GetResponseTxn()
			if !in.Succeeded {
				stored, err := f.decode(in.Responses[0].GetResponseRange().Kvs)
				if err != nil {
					return nil, err
				}
				if err := fencing.Compare(f.resource(), t, stored); err != nil {
					return nil, err
				}
				return nil, fmt.Errorf("etcdfence: %s: token %v refused, although the stored token %v admits it", f.resource(), t, stored)
			}
		}
		rs = in.Responses
	}
	if lockKey != "" {
		in := rs[0].GetResponseTxn()
		if !in.Succeeded {
			return nil, fmt.Errorf("%w: token %v: key %s does not exist with create revision %d and lease %x", ErrNotHeld, t, lockKey, t.Seq, t.Owner)
		}
		rs = in.Responses
	}
	return &clientv3.TxnResponse{Header: resp.Header, Succeeded: true, Responses: rs[1:]}, nil
}

// Newest returns the newest token admitted, or the zero Token if none was.
// The read is linearizable.
func (f *Fence) Newest(ctx context.Context) (distlock.Token, error) {
	resp, err := f.client.Get(ctx, f.key)
	if err != nil {
		return distlock.Token{}, fmt.Errorf("etcdfence: %s: %w", f.resource(), err)
	}
	if len(resp.Kvs) == 0 {
		return distlock.Token{}, nil
	}
	return f.decode(resp.Kvs)
}

// HolderKey returns the key of the lock entry whose create revision is
// t.Seq and whose lease is t.Owner, for WriteHeld: prefix is the session's key prefix (etcdlock's
// DefaultPrefix, "/distlock/", unless the session was made with
// WithPrefix). The error wraps ErrNotHeld if no such entry exists. The
// lookup is a separate read; WriteHeld checks the key again in its Txn.
func HolderKey(ctx context.Context, client *clientv3.Client, prefix string, t distlock.Token) (string, error) {
	if client == nil {
		return "", fmt.Errorf("etcdfence: holder key: %w: *clientv3.Client is nil", distlock.ErrNilClient)
	}
	if err := t.Validate(); err != nil {
		return "", fmt.Errorf("etcdfence: holder key: %w", err)
	}
	dir := prefix + t.Name + "/@"
	// Not WithKeysOnly: etcd then answers from its index alone, without
	// the keys' leases.
	resp, err := client.Get(ctx, dir, clientv3.WithPrefix(),
		clientv3.WithMinCreateRev(t.Seq), clientv3.WithMaxCreateRev(t.Seq))
	if err != nil {
		return "", fmt.Errorf("etcdfence: holder key of %v: %w", t, err)
	}
	for _, kv := range resp.Kvs {
		if uint64(kv.Lease) == t.Owner {
			return string(kv.Key), nil
		}
	}
	return "", fmt.Errorf("%w: token %v: no key under %s with create revision %d and lease %x", ErrNotHeld, t, dir, t.Seq, t.Owner)
}

// encode writes a token as its sequence number in width decimal digits,
// '.', and its owner in ownerWidth hex digits.
func encode(t distlock.Token) string {
	return fmt.Sprintf("%s.%0*x", encodeSeq(t.Seq), ownerWidth, t.Owner)
}

func encodeSeq(seq int64) string { return fmt.Sprintf("%0*d", width, seq) }

// decode reads the token stored in kvs (the fence key, read back).
func (f *Fence) decode(kvs []*mvccpb.KeyValue) (distlock.Token, error) {
	if len(kvs) == 0 {
		return distlock.Token{}, fmt.Errorf("etcdfence: %s: the key vanished while read back", f.resource())
	}
	v := kvs[0].Value
	num, own, withOwner := bytes.Cut(v, []byte("."))
	seq, err := strconv.ParseInt(string(bytes.TrimLeft(num, "0")), 10, 64)
	bad := len(num) != width || err != nil || seq <= 0 || len(bytes.Trim(num, "0123456789")) > 0
	var owner uint64
	if withOwner {
		// A value without owner is a sequence number stored by a version
		// before tokens named their owner: Owner 0, which refuses every
		// token of the same number as a fork (fencing.Compare).
		owner, err = strconv.ParseUint(string(own), 16, 64)
		bad = bad || len(own) != ownerWidth || err != nil || owner == 0 || string(own) != fmt.Sprintf("%0*x", ownerWidth, owner)
	}
	if bad {
		return distlock.Token{}, fmt.Errorf("etcdfence: %s: stored value %q is not a token written by this package", f.resource(), v)
	}
	return distlock.Token{Name: f.lock, Seq: seq, Owner: owner}, nil
}
