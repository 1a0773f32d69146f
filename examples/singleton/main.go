// Command singleton runs one compactor across a fleet of three workers with
// distlock.RunAsLeader: exactly one worker compacts at a time, and when the
// leader dies another takes over within the session TTL. Every write
// carries the leader's fencing token through a fence, so a deposed leader
// that keeps going is refused. Run it with
//
//	go run ./singleton    (in the examples module: cd examples)
//
// and it starts an etcd member in this process (package
// github.com/distlock/distlock/integration/embedded), or point it at your
// own cluster with the -endpoints flag or the ETCD_ENDPOINTS environment
// variable (client URLs, comma-separated):
//
//	go run ./singleton -endpoints http://10.0.0.1:2379,http://10.0.0.2:2379
//	ETCD_ENDPOINTS=http://127.0.0.1:2379 go run ./singleton
//
// It campaigns in the election "compactor". Copied into a module of yours,
// it builds as it is.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/fencing"
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
		fmt.Fprintln(os.Stderr, "singleton:", err)
		os.Exit(1)
	}
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

// run starts three workers on the etcd cluster at endpoints (an embedded
// member if there are none), lets two leaders die in turn, and returns
// once the third has compacted.
func run(ctx context.Context, out io.Writer, endpoints []string) error {
	endpoints, stop, err := etcdCluster(ctx, endpoints)
	if err != nil {
		return err
	}
	defer stop()

	start := time.Now()
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, "%6.2fs  %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	// The resource the compactor writes: fenced with the election's tokens.
	fence, err := fencing.NewMemory("compactor")
	if err != nil {
		return err
	}

	type worker struct {
		name string
		sess *etcdlock.Session
	}
	terms := make(chan *worker, 3) // a worker that started a term
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for _, name := range []string{"worker-a", "worker-b", "worker-c"} {
		cli, err := clientv3.New(clientv3.Config{
			Endpoints:   endpoints,
			DialTimeout: 5 * time.Second,
			Logger:      zap.NewNop(), // etcd's client logs its retries, e.g. of a closed session's lease revoke
		})
		if err != nil {
			return err
		}
		defer cli.Close()
		sess, err := etcdlock.NewSession(ctx, cli, etcdlock.WithTTL(etcdlock.MinTTL))
		if err != nil {
			return err
		}
		defer sess.Close(context.Background())
		el, err := recipe.NewElection(sess, "compactor")
		if err != nil {
			return err
		}
		w := &worker{name: name, sess: sess}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The singleton worker: runs only while it leads, its ctx
			// cancelled the moment leadership is lost.
			distlock.RunAsLeader(ctx, el, name, func(ctx context.Context, t distlock.Token) error {
				say("%s leads with token %v and compacts", name, t)
				terms <- w
				for {
					err := fence.Do(ctx, t, func(context.Context) error { return nil }) // one compaction step
					if errors.Is(err, fencing.ErrStale) {
						say("%s: its write was refused as stale", name)
						return err
					}
					select {
					case <-ctx.Done():
						say("%s is no longer leader: %v", name, context.Cause(ctx))
						return nil
					case <-time.After(100 * time.Millisecond):
					}
				}
			})
		}()
	}

	// Kill two leaders in turn (their sessions end, as when a process
	// dies); the third leader finishes the demonstration.
	var leaders []string
	for len(leaders) < 3 {
		var w *worker
		select {
		case w = <-terms:
		case <-ctx.Done():
			return fmt.Errorf("only %d leaders: %w", len(leaders), ctx.Err())
		}
		leaders = append(leaders, w.name)
		if len(leaders) < 3 {
			say("%s dies (its session ends)", w.name)
			w.sess.Close(context.Background())
		}
	}
	say("the compactor ran under %d leaders in turn, one at a time; newest token admitted: %v", len(leaders), fence.Newest())
	cancel()
	wg.Wait()
	return nil
}
