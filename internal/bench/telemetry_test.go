package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// telemetryCycles is how many uncontended Lock+Unlock cycles each variant
// is timed over, per store.
var telemetryCycles = pick(400, 100)

// BenchmarkTelemetryOverhead times uncontended Lock+Unlock cycles of our
// Mutex with OpenTelemetry's SDK installed (a meter provider whose reader
// aggregates every measurement, a tracer provider that samples every span
// and hands it to a no-op exporter through the batch processor) against
// the same Mutex without an SDK (the global providers, which drop
// everything), on the same cluster, through the same member, cycles
// interleaved. The cost of the instrumentation without an SDK, against no
// instrumentation at all, is BenchmarkTelemetry in internal/qlock (its
// CPU per Lock+Unlock): too small to see in a round trip.
func BenchmarkTelemetryOverhead(b *testing.B) {
	sdkOpts := func() (mp *sdkmetric.MeterProvider, tp *sdktrace.TracerProvider) {
		mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		b.Cleanup(func() { mp.Shutdown(context.Background()); tp.Shutdown(context.Background()) })
		return mp, tp
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var out strings.Builder
	for _, store := range []string{"etcd", "zookeeper"} {
		var lockers [2]distlock.Locker // ours: SDK; theirs: none
		switch store {
		case "etcd":
			e := newEnv(b)
			cli, err := e.client(e.leader+1, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { cli.Close() })
			mp, tp := sdkOpts()
			for i, opts := range [2][]recipe.Option{
				ours:   {recipe.WithMeterProvider(mp), recipe.WithTracerProvider(tp)},
				theirs: nil,
			} {
				s, err := etcdlock.NewSession(ctx, cli, opts...)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { s.Close(context.Background()) })
				if lockers[i], err = recipe.NewMutex(s, fmt.Sprintf("telemetry-%d", i)); err != nil {
					b.Fatal(err)
				}
			}
		case "zookeeper":
			ens := integration.NewZooKeeper(quietTB{b})
			conn, _, err := ens.Connect(ctx, 0)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(conn.Close)
			mp, tp := sdkOpts()
			for i, opts := range [2][]recipe.Option{
				ours:   {recipe.WithMeterProvider(mp), recipe.WithTracerProvider(tp)},
				theirs: nil,
			} {
				opts = append(opts, zklock.WithTickTime(integration.ZooKeeperTickTime))
				s, err := zklock.NewSession(ctx, conn, opts...)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { s.Close(context.Background()) })
				if lockers[i], err = recipe.NewMutex(s, fmt.Sprintf("telemetry-%d", i)); err != nil {
					b.Fatal(err)
				}
			}
		}
		var cycles [2][]time.Duration
		for round := range telemetryCycles {
			order := [2]int{ours, theirs}
			if round%2 == 1 {
				order = [2]int{theirs, ours}
			}
			for _, i := range order {
				start := time.Now()
				l, err := lockers[i].Lock(ctx)
				if err != nil {
					b.Fatalf("%s lock: %v", store, err)
				}
				if err := l.Unlock(ctx); err != nil {
					b.Fatalf("%s unlock: %v", store, err)
				}
				cycles[i] = append(cycles[i], time.Since(start))
			}
		}
		o := &recs{bench: "telemetry", store: store}
		for i, impl := range implNames {
			o.latencies(impl, "cycle", 0, cycles[i])
		}
		emit(b, o.out...)
		so, st := summarize(cycles[ours]), summarize(cycles[theirs])
		fmt.Fprintf(&out, "%s: Lock+Unlock p50 %s with the SDK, %s without (%.3f×); p99 %s and %s\n",
			store, ms(so.p50), ms(st.p50), float64(so.p50)/float64(st.p50), ms(so.p99), ms(st.p99))
	}
	b.Log("\n" + out.String())
}
