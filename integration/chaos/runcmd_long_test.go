//go:build chaos

package chaos_test

import (
	"os"
	"testing"

	"github.com/distlock/distlock/integration/chaos"
)

// TestRunCommandKillLong is the long run of the distlock-run workload
// (chaos.RunCommandKill) behind "make chaos": CHAOS_DURATION of SIGKILLs
// on each store (CHAOS_STORES), with five distlocks alive at once;
// CHAOS_SEED replays the choice and timing of the kills, CHAOS_OUT keeps
// the COMMANDs' histories.
func TestRunCommandKillLong(t *testing.T) {
	dur, out, stores := longEnv(t)
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
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
