// Command observability serves distlock's metrics in Prometheus's format
// while four workers contend for one lock: the OpenTelemetry SDK's meter
// provider, read by the OpenTelemetry Prometheus exporter, is handed to
// every session with etcdlock.WithMeterProvider. Half-way through, one
// holder's lease is revoked from outside, so distlock_lock_lost_total has
// something to show. Run it and scrape http://127.0.0.1:9464/metrics:
//
//	go run ./observability    (in the examples module: cd examples)
//
// It starts an etcd member in this process (package
// github.com/distlock/distlock/integration/embedded), unless you point it
// at your own cluster with the -endpoints flag or the ETCD_ENDPOINTS
// environment variable (client URLs, comma-separated):
//
//	go run ./observability -endpoints http://10.0.0.1:2379,http://10.0.0.2:2379
//	ETCD_ENDPOINTS=http://127.0.0.1:2379 go run ./observability
//
// It uses the lock "reports/daily" and revokes one of its own sessions'
// leases. Copied into a module of yours, it builds as it is.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/integration/embedded"
	"github.com/distlock/distlock/recipe"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	clientv3 "go.etcd.io/etcd/client/v3"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.uber.org/zap"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9464", "where to serve /metrics")
	serve := flag.Duration("serve", time.Minute, "how long to keep serving after the workers are done")
	endpoints := flag.String("endpoints", os.Getenv("ETCD_ENDPOINTS"),
		"client URLs of your etcd cluster, comma-separated (default $ETCD_ENDPOINTS; if empty, an etcd member embedded in this process)")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "observability:", err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *serve+time.Minute)
	defer cancel()
	done := make(chan struct{})
	go func() {
		<-done
		fmt.Printf("workers done; serving http://%s/metrics for %v more\n", ln.Addr(), *serve)
		time.Sleep(*serve)
		cancel()
	}()
	if err := run(ctx, ln, os.Stdout, done, strings.FieldsFunc(*endpoints, isSep)); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "observability:", err)
		os.Exit(1)
	}
}

// Workers and rounds: each worker locks, holds for hold, and unlocks,
// rounds times.
const (
	workers = 4
	rounds  = 5
	hold    = 20 * time.Millisecond
)

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

// run serves /metrics on ln until ctx ends, and runs the workers on the
// etcd cluster at endpoints (an embedded member if there are none); done
// is closed once they have finished (and the lost lock was reported).
func run(ctx context.Context, ln net.Listener, out io.Writer, done chan<- struct{}, endpoints []string) error {
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer mp.Shutdown(context.Background())

	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	fmt.Fprintf(out, "metrics at http://%s/metrics\n", ln.Addr())

	endpoints, stop, err := etcdCluster(ctx, endpoints)
	if err != nil {
		return err
	}
	defer stop()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(), // etcd's client logs its retries, e.g. of a closed session's lease revoke
	})
	if err != nil {
		return err
	}
	defer cli.Close()

	var wg sync.WaitGroup
	errs := make(chan error, workers+1)
	for w := range workers {
		sess, err := etcdlock.NewSession(ctx, cli, recipe.WithMeterProvider(mp), recipe.WithHolder(fmt.Sprintf("worker-%d", w)))
		if err != nil {
			return err
		}
		defer sess.Close(context.Background())
		mu, err := recipe.NewMutex(sess, "reports/daily")
		if err != nil {
			return err
		}
		wg.Go(func() {
			for r := range rounds {
				lease, err := mu.Lock(ctx)
				if err != nil {
					errs <- fmt.Errorf("worker %d: %w", w, err)
					return
				}
				if w == 0 && r == rounds/2 {
					// Revoke this holder's lease from outside, as an
					// operator or an expiry would: the lock is lost.
					if _, err := cli.Revoke(ctx, sess.ID()); err != nil {
						errs <- err
						return
					}
					<-lease.Done()
					fmt.Fprintf(out, "worker %d lost the lock: %v\n", w, lease.Err())
					return
				}
				select {
				case <-time.After(hold):
				case <-ctx.Done():
				}
				if err := lease.Unlock(ctx); err != nil {
					errs <- fmt.Errorf("worker %d: %w", w, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return err
	}
	fmt.Fprintf(out, "%d workers done\n", workers)
	close(done)
	<-ctx.Done()
	return ctx.Err()
}
