//go:build chaos

package chaos_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/integration/chaos"
)

// TestChaos is the long suite behind "make chaos": every workload ×
// nemesis × store for CHAOS_DURATION each, then a summary table. It is
// built only with the "chaos" build tag (make chaos sets it), so that the
// test suite neither runs it nor skips it. Scenario i of a store runs with seed
// CHAOS_SEED + i (+100 on ZooKeeper); narrowed to one store and one
// scenario (CHAOS_STORES, CHAOS_SCENARIOS), it runs with CHAOS_SEED
// itself, so that the seed a summary row shows reruns that row.
func TestChaos(t *testing.T) {
	dur, out, stores := longEnv(t)
	base := seed(t)
	var results []*chaos.Result
	for _, store := range stores {
		si := 0
		if store == chaos.ZooKeeper {
			si = 1
		}
		t.Run(store, func(t *testing.T) {
			s := startStore(t, store)
			scen := chaos.Scenarios(store)
			only := map[string]bool{}
			if s := os.Getenv("CHAOS_SCENARIOS"); s != "" {
				for _, n := range strings.Split(s, ",") {
					only[n] = true
				}
			}
			for i, sc := range scen {
				if len(only) > 0 && !only[sc.Name] {
					continue
				}
				t.Run(sc.Name, func(t *testing.T) {
					cfg := sc.Config
					cfg.Store, cfg.Cluster, cfg.Duration, cfg.Out = store, s, dur, out
					cfg.Seed = base + uint64(si*100+i)
					if len(only) == 1 && len(stores) == 1 {
						// Rerunning one scenario: CHAOS_SEED is its own
						// seed, the one its summary row shows.
						cfg.Seed = base
					}
					res := run(t, cfg)
					results = append(results, res)
					if !res.OK(true) {
						t.Errorf("%s seed %d: checks failed (rerun: CHAOS_SEED=%d CHAOS_STORES=%s CHAOS_SCENARIOS=%s make chaos): %v", res.Name, res.Seed, res.Seed, store, sc.Name, res.Failed())
					}
				})
			}
		})
	}
	table := chaos.Summary(results)
	if err := os.WriteFile(out+"/summary.md", []byte(table), 0o644); err != nil {
		t.Error(err)
	}
	t.Logf("seed %d\n%s", base, table)
}

// longEnv reads what the long runs share from the environment (see make
// chaos): CHAOS_DURATION (required), CHAOS_OUT (default chaos-out) and
// CHAOS_STORES (default both stores).
func longEnv(t *testing.T) (dur time.Duration, out string, stores []string) {
	t.Helper()
	d := os.Getenv("CHAOS_DURATION")
	if d == "" {
		t.Fatal("set CHAOS_DURATION (e.g. 30s) to run the long fault suite; see make chaos")
	}
	dur, err := time.ParseDuration(d)
	if err != nil {
		t.Fatalf("CHAOS_DURATION=%q: %v", d, err)
	}
	out = os.Getenv("CHAOS_OUT")
	if out == "" {
		out = "chaos-out"
	}
	stores = []string{chaos.Etcd, chaos.ZooKeeper}
	if s := os.Getenv("CHAOS_STORES"); s != "" {
		stores = strings.Split(s, ",")
	}
	return dur, out, stores
}
