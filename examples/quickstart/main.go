// Command quickstart shows distlock's etcd Mutex: fencing tokens, FIFO
// handoff, TryLock, the lost-lock signal and distlock.Do. Run it with
//
//	go run ./quickstart    (in the examples module: cd examples)
//
// and it starts an etcd member in this process (package
// github.com/distlock/distlock/integration/embedded), or point it at your
// own cluster with the -endpoints flag or the ETCD_ENDPOINTS environment
// variable (client URLs, comma-separated):
//
//	go run ./quickstart -endpoints http://10.0.0.1:2379,http://10.0.0.2:2379
//	ETCD_ENDPOINTS=http://127.0.0.1:2379 go run ./quickstart
//
// It uses the lock "reports/daily" and revokes one of its own sessions'
// leases. With no etcd at the endpoints given, it fails within seconds,
// saying why (e.g. "etcd 127.0.0.1:2379: connection refused"). Copied
// into a module of yours, it builds as it is.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/integration/embedded"
	"github.com/distlock/distlock/recipe"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

func main() {
	endpoints := flag.String("endpoints", os.Getenv("ETCD_ENDPOINTS"),
		"client URLs of your etcd cluster, comma-separated (default $ETCD_ENDPOINTS; if empty, an etcd member embedded in this process)")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, os.Stdout, strings.FieldsFunc(*endpoints, isSep)); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// worker is one process's view: its own client, session and lock handle.
type worker struct {
	name string
	cli  *clientv3.Client
	sess *etcdlock.Session
	lock *recipe.Mutex
}

func isSep(r rune) bool { return r == ',' || r == ' ' }

// etcdCluster returns the endpoints to use: the given ones, or, if none,
// those of an etcd member it starts in this process, which stop stops.
func etcdCluster(ctx context.Context, endpoints []string) (_ []string, stop func(), _ error) {
	if len(endpoints) > 0 {
		return endpoints, func() {}, nil
	}
	etcd, err := embedded.StartEtcd(ctx)
	if err != nil {
		return nil, nil, err
	}
	return etcd.Endpoints(), func() { etcd.Close() }, nil
}

func newWorker(ctx context.Context, endpoints []string, name string) (*worker, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(), // etcd's client logs its retries, e.g. of a closed session's lease revoke
	})
	if err != nil {
		return nil, err
	}
	// A cluster that is not there should be reported within seconds, not
	// waited for: NewSession says why (refused, unknown host, not etcd,
	// ...) as soon as it knows, and the timeout bounds the rest.
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	sess, err := etcdlock.NewSession(sctx, cli, etcdlock.WithTTL(5*time.Second), recipe.WithHolder(name))
	if err != nil {
		cli.Close()
		return nil, err
	}
	lock, err := recipe.NewMutex(sess, "reports/daily")
	if err != nil {
		return nil, err
	}
	return &worker{name: name, cli: cli, sess: sess, lock: lock}, nil
}

func (w *worker) close(ctx context.Context) {
	w.sess.Close(ctx)
	w.cli.Close()
}

// run runs the walk-through on the etcd cluster at endpoints, or on an
// embedded member if there are none.
func run(ctx context.Context, out io.Writer, endpoints []string) error {
	say := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }

	endpoints, stop, err := etcdCluster(ctx, endpoints)
	if err != nil {
		return err
	}
	defer stop()
	say("etcd at %s", strings.Join(endpoints, ","))

	a, err := newWorker(ctx, endpoints, "worker-a")
	if err != nil {
		return err
	}
	defer a.close(ctx)
	b, err := newWorker(ctx, endpoints, "worker-b")
	if err != nil {
		return err
	}
	defer b.close(ctx)

	la, err := a.lock.Lock(ctx)
	if err != nil {
		return err
	}
	say("worker-a holds %q with fencing token %s", la.Token().Name, la.Token())

	if _, err := b.lock.TryLock(ctx); errors.Is(err, distlock.ErrLocked) {
		say("worker-b TryLock: %v", err)
	} else if err != nil {
		return err
	}

	got := make(chan *distlock.Lease, 1)
	go func() {
		l, err := b.lock.Lock(ctx)
		if err != nil {
			say("worker-b Lock: %v", err)
		}
		got <- l
	}()
	say("worker-b queued behind worker-a; worker-a unlocks")
	if err := la.Unlock(ctx); err != nil {
		return err
	}
	lb := <-got
	if lb == nil {
		return errors.New("worker-b did not get the lock")
	}
	say("worker-b holds it with token %s (newer than %s: %v)", lb.Token(), la.Token(), lb.Token().Newer(la.Token()))

	// An operator revokes worker-b's lease, as if it had expired while the
	// process was stuck: the held lock reports the loss.
	if _, err := a.cli.Revoke(ctx, b.sess.ID()); err != nil {
		return err
	}
	select {
	case <-lb.Done():
		say("worker-b was told: %v", lb.Err())
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	lb.Unlock(ctx) // reports the loss again; nothing left to delete

	// distlock.Do: acquire, run, always release; the function's context is
	// cancelled if the lock is lost, and the token goes with every write.
	err = distlock.Do(ctx, a.lock, func(ctx context.Context, t distlock.Token) error {
		say("worker-a runs the daily report under token %s", t)
		return nil
	})
	if err != nil {
		return err
	}
	say("done: every acquisition got a larger token; fence your writes with it")
	return nil
}
