package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/integration"
)

// Tests drive the real binary, built once per run, against real clusters
// from the integration harness, started once per run on first use.

var (
	binDir  string
	binPath string

	etcdOnce sync.Once
	etcd     *integration.EtcdCluster
	etcdErr  error
	zkOnce   sync.Once
	ens      *integration.ZooKeeperEnsemble
	zkErr    error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "distlock-cli-")
	if err != nil {
		panic(err)
	}
	binDir = dir
	code := m.Run()
	if etcd != nil {
		etcd.Close()
	}
	if ens != nil {
		ens.Close()
	}
	if tlsEtcd != nil {
		tlsEtcd.Close()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

var buildOnce sync.Once
var buildErr error

// binary returns the path of the distlock binary, built from this package
// (with the race detector when the tests run with it).
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binPath = filepath.Join(binDir, "distlock")
		args := []string{"build", "-o", binPath}
		if raceEnabled {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, ".")...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = &buildError{err: err, out: string(out)}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return "go build: " + e.err.Error() + "\n" + e.out }

// etcdCluster returns the run's 3-member etcd cluster.
func etcdCluster(t *testing.T) *integration.EtcdCluster {
	t.Helper()
	etcdOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		etcd, etcdErr = integration.StartEtcd(ctx)
	})
	if etcdErr != nil {
		t.Fatal(etcdErr)
	}
	return etcd
}

// zkEnsemble returns the run's 3-server ZooKeeper ensemble.
func zkEnsemble(t *testing.T) *integration.ZooKeeperEnsemble {
	t.Helper()
	zkOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		ens, zkErr = integration.StartZooKeeper(ctx)
	})
	if zkErr != nil {
		t.Fatal(zkErr)
	}
	return ens
}

// etcdFlag is the --etcd value for the run's cluster.
func etcdFlag(t *testing.T) string { return "--etcd=" + strings.Join(etcdCluster(t).Endpoints(), ",") }

// zkFlag is the --zk value for the run's ensemble.
func zkFlag(t *testing.T) string { return "--zk=" + strings.Join(zkEnsemble(t).Addrs(), ",") }

// result is what one run of the binary did.
type result struct {
	code           int
	stdout, stderr string
}

// cli runs the binary with args (and extra environment entries) until it
// exits or ctx ends, and returns its exit code and output.
func cli(ctx context.Context, t *testing.T, env []string, args ...string) result {
	t.Helper()
	cmd := exec.CommandContext(ctx, binary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run distlock %v: %v", args, err)
	}
	return r
}

// testCtx bounds a test.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestHelpAndVersion(t *testing.T) {
	ctx := testCtx(t)
	r := cli(ctx, t, nil, "--help")
	if r.code != 0 || !strings.Contains(r.stdout, "Exit codes:") {
		t.Fatalf("--help: code %d, stdout %q", r.code, r.stdout)
	}
	r = cli(ctx, t, nil, "--version")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "distlock ") {
		t.Fatalf("--version: code %d, stdout %q", r.code, r.stdout)
	}
	r = cli(ctx, t, nil, "frobnicate")
	if r.code != exitUsage || !strings.Contains(r.stderr, "unknown command") {
		t.Fatalf("unknown command: code %d, stderr %q", r.code, r.stderr)
	}
}

// TestNoEmbedEtcd checks that -tags noembedetcd leaves etcd's server out
// of the binary (see main.go), and that the default build has it, for the
// demo.
func TestNoEmbedEtcd(t *testing.T) {
	for _, c := range []struct {
		tags string
		want bool
	}{{"", true}, {"noembedetcd", false}} {
		out, err := exec.Command("go", "list", "-deps", "-tags", c.tags, ".").CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps -tags %q: %v\n%s", c.tags, err, out)
		}
		if got := strings.Contains(string(out), "go.etcd.io/etcd/server/"); got != c.want {
			t.Errorf("-tags %q: etcd's server linked: %v, want %v", c.tags, got, c.want)
		}
	}
}
