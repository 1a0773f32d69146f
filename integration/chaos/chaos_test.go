package chaos_test

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/integration/chaos"
)

// seed returns CHAOS_SEED if set (to replay a run), else a fresh one.
func seed(t testing.TB) uint64 {
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q: %v", s, err)
		}
		return n
	}
	return chaos.NewSeed()
}

func logger(t testing.TB) *slog.Logger {
	if testing.Verbose() && os.Getenv("CHAOS_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.DiscardHandler)
}

// startStore starts a cluster for the test; under CI a cluster that cannot
// start fails the test (it never skips).
func startStore(t *testing.T, name string, opts ...integration.Option) chaos.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := chaos.StartStore(ctx, name, logger(t), opts...)
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func outDir(t *testing.T) string {
	if d := os.Getenv("CHAOS_OUT"); d != "" {
		return d
	}
	return t.TempDir()
}

func run(t *testing.T, cfg chaos.Config) *chaos.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration+5*time.Minute)
	defer cancel()
	res, err := chaos.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("seed %d: %v", cfg.Seed, err)
	}
	t.Logf("%s seed %d: %d ops (%d ok, %d info), faults %v, history %s", res.Name, res.Seed, res.Ops, res.OKs, res.Infs, res.Faults, res.History)
	for _, c := range res.Checks {
		t.Logf("  %s", c)
	}
	return res
}

func byName(res *chaos.Result, name, subject string) (chaos.Check, bool) {
	for _, c := range res.Checks {
		if c.Name == name && c.Subject == subject {
			return c, true
		}
	}
	return chaos.Check{}, false
}

// TestShort is the short suite that runs in "go test": on each store, a
// fault-free run of every workload (FIFO, every checker green), a run of
// holder pauses under the register and the multi-lock workloads (the
// unfenced controls must be flagged, the fenced registers must not be)
// and a run of random combined faults under each workload. Assertions are on counts and history checks; the liveness
// bound, a timing, is only logged.
func TestShort(t *testing.T) {
	for _, store := range []string{chaos.Etcd, chaos.ZooKeeper} {
		t.Run(store, func(t *testing.T) {
			s := startStore(t, store)
			out := outDir(t)
			short := func(cfg chaos.Config) chaos.Config {
				cfg.Store, cfg.Cluster, cfg.Out, cfg.Seed = store, s, out, seed(t)
				cfg.FaultMin, cfg.FaultMax = 500*time.Millisecond, 2*time.Second
				if cfg.Duration == 0 {
					cfg.Duration = 3 * time.Second
				}
				return cfg
			}

			for _, w := range chaos.Workloads() {
				t.Run(w.Name()+"/fault-free", func(t *testing.T) {
					res := run(t, short(chaos.Config{Workload: w}))
					if !res.OK(true) {
						t.Errorf("seed %d: checks failed: %v", res.Seed, res.Failed())
					}
					if c, _ := byName(res, "fifo", "lock"); c.Checked < 5 {
						t.Errorf("only %d acquisitions in a fault-free run", c.Checked)
					}
					if w.Name() == "election" {
						// The handoff checker must have had handoffs to check.
						if c, _ := byName(res, "handoff-token", "election"); c.Checked == 0 {
							t.Errorf("seed %d: no handoff in a fault-free election run: %s", res.Seed, c)
						}
					}
				})
			}

			t.Run("register/holder-pause", func(t *testing.T) {
				nem, err := chaos.Nemeses(chaos.NemHolderPause)
				if err != nil {
					t.Fatal(err)
				}
				res := run(t, short(chaos.Config{Nemeses: nem, Duration: time.Second}))
				if !res.OK(true) {
					t.Errorf("seed %d: fenced checks failed: %v", res.Seed, res.Failed())
				}
				if res.Faults[chaos.NemHolderPause] == 0 {
					t.Fatalf("seed %d: no holder pause injected", res.Seed)
				}
				c, _ := byName(res, "linearizable", "unfenced")
				if c.OK {
					t.Errorf("seed %d: the unfenced control passed under %d holder pauses: the checker proves nothing (%s)", res.Seed, res.Faults[chaos.NemHolderPause], c)
				}
				for _, reg := range []string{"memory", "store"} {
					c, _ := byName(res, "linearizable", reg)
					if !c.OK || c.Skipped {
						t.Errorf("seed %d: fenced register %s: %s", res.Seed, reg, c)
					}
				}
			})

			// The multi-lock workload under holder pauses: the paused
			// child holds one name's Mutex, the workers' multi-locks of
			// that name take over; that name's control must be flagged,
			// every fenced register must not be.
			t.Run("multilock/holder-pause", func(t *testing.T) {
				nem, err := chaos.Nemeses(chaos.NemHolderPause)
				if err != nil {
					t.Fatal(err)
				}
				res := run(t, short(chaos.Config{Workload: &chaos.MultiWorkload{}, Nemeses: nem, Duration: time.Second}))
				if !res.OK(true) {
					t.Errorf("seed %d: fenced checks failed: %v", res.Seed, res.Failed())
				}
				if res.Faults[chaos.NemHolderPause] == 0 {
					t.Fatalf("seed %d: no holder pause injected", res.Seed)
				}
				flagged := 0
				for _, c := range res.Checks {
					if c.Name != "linearizable" {
						continue
					}
					switch {
					case c.Control && !c.OK:
						flagged++
					case !c.Control && (!c.OK || c.Skipped):
						t.Errorf("seed %d: fenced register %s: %s", res.Seed, c.Subject, c)
					}
				}
				if flagged == 0 {
					t.Errorf("seed %d: no unfenced control flagged under %d holder pauses: the checker proves nothing", res.Seed, res.Faults[chaos.NemHolderPause])
				}
			})

			// Forced revocations of a stalled holder: its entry deleted
			// from outside while it still works; its late writes must be
			// refused.
			t.Run("register/revoke", func(t *testing.T) {
				nem, err := chaos.Nemeses(chaos.NemRevoke)
				if err != nil {
					t.Fatal(err)
				}
				res := run(t, short(chaos.Config{Nemeses: nem, Duration: 2 * time.Second}))
				if !res.OK(true) {
					t.Errorf("seed %d: checks failed: %v", res.Seed, res.Failed())
				}
				if res.Faults[chaos.NemRevoke] == 0 {
					t.Fatalf("seed %d: no revocation injected", res.Seed)
				}
				if c, _ := byName(res, "forced-expiry-fenced", "lock"); c.Skipped {
					t.Errorf("seed %d: no holder was forced out: %s", res.Seed, c)
				}
				if c, _ := byName(res, "linearizable", "unfenced"); c.OK {
					t.Errorf("seed %d: the unfenced control passed although a revoked holder wrote after its successor: %s", res.Seed, c)
				}
			})

			// The etcd twin of zk-expire-session: leases of waiters and
			// holders revoked from outside, at random, just before a
			// release, or while a holder is stalled. Its faults need no
			// heal, so they are held briefly, for a few of them.
			if store == chaos.Etcd {
				t.Run("register/etcd-revoke-lease", func(t *testing.T) {
					nem, err := chaos.Nemeses(chaos.NemRevokeLease)
					if err != nil {
						t.Fatal(err)
					}
					cfg := short(chaos.Config{Nemeses: nem, Duration: 3 * time.Second})
					cfg.FaultMax = time.Second
					res := run(t, cfg)
					if !res.OK(true) {
						t.Errorf("seed %d: checks failed: %v", res.Seed, res.Failed())
					}
					if res.Faults[chaos.NemRevokeLease] == 0 {
						t.Fatalf("seed %d: no lease revoked", res.Seed)
					}
				})
			}

			for _, w := range chaos.Workloads() {
				t.Run(w.Name()+"/mixed", func(t *testing.T) {
					res := run(t, short(chaos.Config{Workload: w, Nemeses: shortNemeses(), Combine: true, Duration: 4 * time.Second}))
					if !res.OK(true) {
						t.Errorf("seed %d: checks failed: %v", res.Seed, res.Failed())
					}
				})
			}
		})
	}
	// One workload over TLS: an etcd cluster that speaks TLS only, with
	// client-certificate auth, for workers, the holder child process and
	// the checkers alike, under holder pauses and member faults.
	t.Run("etcd-tls/register/mixed", func(t *testing.T) {
		s := startStore(t, chaos.Etcd, integration.WithTLS())
		nem, err := chaos.Nemeses(chaos.NemHolderPause, chaos.NemPauseServer, chaos.NemKill)
		if err != nil {
			t.Fatal(err)
		}
		res := run(t, chaos.Config{Store: chaos.Etcd, Cluster: s, Out: outDir(t), Seed: seed(t), Nemeses: nem, Combine: true,
			Duration: 4 * time.Second, FaultMin: 500 * time.Millisecond, FaultMax: 2 * time.Second})
		if !res.OK(true) {
			t.Errorf("seed %d: checks failed: %v", res.Seed, res.Failed())
		}
		if res.Ops == 0 {
			t.Errorf("seed %d: no operations over TLS", res.Seed)
		}
	})
}

// shortNemeses are the nemeses of the short suite's mixed runs: all of
// them (zk-hold-replies once left an orphan entry behind, when a Lock's
// cleanup ended with its Session; the cleanup now outlives it).
func shortNemeses() []chaos.Nemesis { return chaos.AllNemeses() }
