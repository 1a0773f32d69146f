package integration_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/distlock/distlock/integration"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// putGet writes a key through cli and reads it back.
func putGet(ctx context.Context, cli *clientv3.Client, key string) error {
	if _, err := cli.Put(ctx, key, "v"); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	resp, err := cli.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("get %s: %w", key, err)
	}
	if len(resp.Kvs) != 1 {
		return fmt.Errorf("get %s: %d keys", key, len(resp.Kvs))
	}
	return nil
}

func testEtcdFaults(t *testing.T, provider integration.Provider) {
	c := integration.NewEtcd(t, integration.WithProvider(provider))
	ctx := ctxFor(t, 3*time.Minute)
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	if err := putGet(ctx, cli, "start"); err != nil {
		t.Fatal(err)
	}

	t.Run("kill and restart", func(t *testing.T) {
		pid := c.Members[1].PID()
		if err := c.Kill(1); err != nil {
			t.Fatal(err)
		}
		// Kill returns once the process is gone.
		if st := pidState(pid); st != 0 {
			t.Fatalf("killed member's process %d is in state %c", pid, st)
		}
		// Retried: the first write may wait on a proposal the dead member
		// never got.
		if err := poll(ctx, func() error { return putGet(ctx, cli, "killed") }); err != nil {
			t.Fatal(err)
		}
		if err := c.Restart(ctx, 1); err != nil {
			t.Fatal(err)
		}
		m1, _ := c.Client(1)
		// The restarted member has its data: it serves what was written
		// before it died and while it was down.
		if err := putGet(ctx, m1, "restarted"); err != nil {
			t.Fatal(err)
		}
		if resp, err := m1.Get(ctx, "killed"); err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("restarted member lacks a key: %v %v", resp, err)
		}
	})

	t.Run("stop leader", func(t *testing.T) {
		old, err := c.StopLeader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		lead, err := c.Leader(ctx)
		if err != nil || lead == old {
			t.Fatalf("leader after stopping %d: %d, %v", old, lead, err)
		}
		// Retried: the first write may wait on a proposal the dead member
		// never got.
		if err := poll(ctx, func() error { return putGet(ctx, cli, "new-leader") }); err != nil {
			t.Fatal(err)
		}
		if err := c.Restart(ctx, old); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("pause", func(t *testing.T) {
		if err := c.Pause(2); err != nil {
			t.Fatal(err)
		}
		// Pause returns once the kernel reports the process stopped.
		if st := pidState(c.Members[2].PID()); st != 'T' {
			t.Fatalf("paused member in state %c, want T", st)
		}
		m2, _ := c.Client(2)
		short, cancel := context.WithTimeout(ctx, time.Second)
		_, err := m2.Put(short, "paused", "v")
		cancel()
		if err == nil {
			t.Fatal("a paused member took a write")
		}
		if err := c.Resume(2); err != nil {
			t.Fatal(err)
		}
		if err := putGet(ctx, m2, "resumed"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("cut and heal", func(t *testing.T) {
		if err := c.WaitHealthy(ctx); err != nil {
			t.Fatal(err)
		}
		lead, err := c.Leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		f := (lead + 1) % 3
		mf, _ := c.Client(f)
		if err := putGet(ctx, mf, "before-cut"); err != nil {
			t.Fatal(err)
		}
		if err := c.Cut(f); err != nil {
			t.Fatal(err)
		}
		// A write through the cut-off member reaches nothing.
		short, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = mf.Put(short, "through-cut", "v")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("write through a cut-off member: %v, want a timeout", err)
		}
		// The rest of the cluster writes on, and the cut-off member does
		// not see it: asked directly, it has applied none of it.
		before, err := c.Status(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		rest, _ := c.Client(lead)
		for i := range 5 {
			if err := putGet(ctx, rest, fmt.Sprintf("during-cut-%d", i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := putGet(ctx, rest, "during-cut"); err != nil {
			t.Fatal(err)
		}
		after, err := c.Status(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if after.RaftAppliedIndex != before.RaftAppliedIndex {
			t.Fatalf("cut-off member applied entries %d..%d", before.RaftAppliedIndex, after.RaftAppliedIndex)
		}
		c.Heal(f)
		if err := poll(ctx, func() error {
			resp, err := mf.Get(ctx, "during-cut")
			if err == nil && len(resp.Kvs) != 1 {
				err = errors.New("not replicated yet")
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
	})
}

// poll retries f until it succeeds: for state the test cannot be told
// about (a member catching up).
func poll(ctx context.Context, f func() error) error {
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %v", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// pidState returns process pid's state letter from /proc/PID/stat, or 0
// when there is no such process.
func pidState(pid int) byte {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}

func TestEtcdProcesses(t *testing.T) { testEtcdFaults(t, integration.Processes) }

// TestEtcdTeardown checks that Close leaves no process, directory or port.
func TestEtcdTeardown(t *testing.T) {
	ctx := ctxFor(t, 2*time.Minute)
	c, err := integration.StartEtcd(ctx, integration.WithSize(1))
	if err != nil {
		t.Fatal(err)
	}
	pid := c.Members[0].PID()
	url := c.Members[0].ClientURL()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if syscall.Kill(pid, 0) == nil {
		t.Errorf("member process %d still runs", pid)
	}
	if dirs := leftoverDirs(t); len(dirs) > 0 {
		t.Errorf("directories left: %v", dirs)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: time.Second})
	if err == nil {
		short, cancel := context.WithTimeout(ctx, time.Second)
		_, err = cli.Get(short, "x")
		cancel()
		cli.Close()
	}
	if err == nil {
		t.Errorf("something still answers at %s", url)
	}
}

func leftoverDirs(t *testing.T) []string {
	entries, err := os.ReadDir(os.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	prefix := fmt.Sprintf("distlock-it-%d-", os.Getpid())
	for _, e := range entries {
		if len(e.Name()) > len(prefix) && e.Name()[:len(prefix)] == prefix {
			out = append(out, e.Name())
		}
	}
	return out
}
