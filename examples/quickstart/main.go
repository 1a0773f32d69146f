// Command quickstart shows distlock's etcd Mutex on an etcd member embedded
// in this process: fencing tokens, FIFO handoff, TryLock, the lost-lock
// signal and distlock.Do. Run it with
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/internal/embedetcd"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// worker is one process's view: its own client, session and lock handle.
type worker struct {
	name string
	cli  *clientv3.Client
	sess *etcdlock.Session
	lock *etcdlock.Mutex
}

func newWorker(ctx context.Context, srv *embedetcd.Server, name string) (*worker, error) {
	cli, err := srv.Client()
	if err != nil {
		return nil, err
	}
	sess, err := etcdlock.NewSession(ctx, cli, etcdlock.WithTTL(5*time.Second), etcdlock.WithHolder(name))
	if err != nil {
		cli.Close()
		return nil, err
	}
	lock, err := etcdlock.NewMutex(sess, "reports/daily")
	if err != nil {
		return nil, err
	}
	return &worker{name: name, cli: cli, sess: sess, lock: lock}, nil
}

func (w *worker) close(ctx context.Context) {
	w.sess.Close(ctx)
	w.cli.Close()
}

func run(ctx context.Context, out io.Writer) error {
	say := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }

	srv, err := embedetcd.Start(ctx)
	if err != nil {
		return err
	}
	defer srv.Close()
	say("embedded etcd at %s", srv.Endpoint)

	a, err := newWorker(ctx, srv, "worker-a")
	if err != nil {
		return err
	}
	defer a.close(ctx)
	b, err := newWorker(ctx, srv, "worker-b")
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
