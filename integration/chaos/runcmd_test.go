package chaos_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/integration/chaos"
)

// distlockBuild builds the distlock command into dir, once however many
// tests call the function it returns.
func distlockBuild(dir string) func() (string, error) {
	return sync.OnceValues(func() (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		return chaos.BuildDistlock(ctx, dir)
	})
}

// runCommandKill runs the distlock-run workload and logs what it saw.
func runCommandKill(t *testing.T, cfg chaos.RunCmdConfig) *chaos.RunCmdResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration+5*time.Minute)
	defer cancel()
	res, err := chaos.RunCommandKill(ctx, cfg)
	if err != nil {
		t.Fatalf("seed %d: %v", cfg.Seed, err)
	}
	t.Logf("%s runcmd seed %d: %d distlock runs, %d SIGKILLed holding, %d SIGKILLed waiting, %d completed; %d COMMANDs; history %s",
		res.Store, res.Seed, res.Started, res.KilledHolding, res.KilledWaiting, res.Completed, res.Commands, res.History)
	for _, c := range res.Checks {
		t.Logf("  %s", c)
	}
	if !res.OK() {
		t.Errorf("seed %d: checks failed (rerun: CHAOS_SEED=%d): %v", res.Seed, res.Seed, res.Checks)
	}
	return res
}

// TestRunCommandKill is the short run of the distlock-run workload
// (chaos.RunCommandKill), on each store at once: `distlock run` itself,
// built here, holds and waits, and is SIGKILLed at random, holding or
// waiting; no two COMMANDs may overlap, read from the COMMANDs' own
// output, and no COMMAND's process group may outlive its distlock.
func TestRunCommandKill(t *testing.T) {
	build := distlockBuild(t.TempDir())
	go build() // while the clusters start
	for _, store := range []string{chaos.Etcd, chaos.ZooKeeper} {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			s := startStore(t, store)
			bin, err := build()
			if err != nil {
				t.Fatal(err)
			}
			// At least 3 holders killed (the check says so), however long
			// that takes beyond the 10 s.
			runCommandKill(t, chaos.RunCmdConfig{Store: s, Binary: bin, Dir: outDir(t), Seed: seed(t), Duration: 10 * time.Second, MinKilledHolding: 3})
		})
	}
}
