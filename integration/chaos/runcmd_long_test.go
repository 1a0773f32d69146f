//go:build chaos

package chaos_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/integration/chaos"
)

// TestRunCommandKillLong is the long run of the distlock-run workload
// (chaos.RunCommandKill) behind "make chaos": CHAOS_DURATION of SIGKILLs
// on each store (CHAOS_STORES), with five distlocks alive at once;
// CHAOS_SEED replays the choice and timing of the kills, CHAOS_OUT keeps
// the COMMANDs' histories.
func TestRunCommandKillLong(t *testing.T) {
	d := os.Getenv("CHAOS_DURATION")
	if d == "" {
		t.Fatal("set CHAOS_DURATION (e.g. 1m) to run the long distlock-run workload; see make chaos")
	}
	dur, err := time.ParseDuration(d)
	if err != nil {
		t.Fatalf("CHAOS_DURATION=%q: %v", d, err)
	}
	out := os.Getenv("CHAOS_OUT")
	if out == "" {
		out = "chaos-out"
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	stores := []string{chaos.Etcd, chaos.ZooKeeper}
	if s := os.Getenv("CHAOS_STORES"); s != "" {
		stores = strings.Split(s, ",")
	}
	build := distlockBuild(t.TempDir())
	base := seed(t)
	for i, store := range stores {
		t.Run(store, func(t *testing.T) {
			s := startStore(t, store)
			bin, err := build()
			if err != nil {
				t.Fatal(err)
			}
			cfg := chaos.RunCmdConfig{Store: s, Binary: bin, Dir: out, Seed: base + uint64(i), Duration: dur, Workers: 5, MinKilledHolding: 3}
			if len(stores) == 1 {
				cfg.Seed = base // CHAOS_SEED reruns this store's run
			}
			runCommandKill(t, cfg)
		})
	}
}
