// Command observability serves distlock's metrics in Prometheus's format
// while four workers contend for one lock on an etcd member embedded in
// this process: the OpenTelemetry SDK's meter provider, read by the
// OpenTelemetry Prometheus exporter, is handed to every session with
// etcdlock.WithMeterProvider. Half-way through, one holder's lease is
// revoked from outside, so distlock_lock_lost_total has something to
// show. Run it and scrape http://127.0.0.1:9464/metrics:
//
//	go run ./examples/observability
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
	"sync"
	"time"

	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/internal/embedetcd"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9464", "where to serve /metrics")
	serve := flag.Duration("serve", time.Minute, "how long to keep serving after the workers are done")
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
	if err := run(ctx, ln, os.Stdout, done); err != nil && !errors.Is(err, context.Canceled) {
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

// run serves /metrics on ln until ctx ends, and runs the workers; done is
// closed once they have finished (and the lost lock was reported).
func run(ctx context.Context, ln net.Listener, out io.Writer, done chan<- struct{}) error {
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

	etcd, err := embedetcd.Start(ctx)
	if err != nil {
		return err
	}
	defer etcd.Close()
	cli, err := etcd.Client()
	if err != nil {
		return err
	}
	defer cli.Close()

	var wg sync.WaitGroup
	errs := make(chan error, workers+1)
	for w := range workers {
		sess, err := etcdlock.NewSession(ctx, cli, etcdlock.WithMeterProvider(mp), etcdlock.WithHolder(fmt.Sprintf("worker-%d", w)))
		if err != nil {
			return err
		}
		defer sess.Close(context.Background())
		mu, err := etcdlock.NewMutex(sess, "reports/daily")
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
