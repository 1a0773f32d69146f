package integration_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/distlock/distlock/integration"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	"github.com/testcontainers/testcontainers-go/wait"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// requireContainers fails the test when no Docker engine answers under CI,
// where the Containers provider must run, and skips it elsewhere.
func requireContainers(t *testing.T) {
	t.Helper()
	err := integration.CheckContainers(ctxFor(t, time.Minute))
	if err == nil {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("CI=%s and the Containers provider cannot run: %v", os.Getenv("CI"), err)
	}
	t.Skipf("the Containers provider needs a Docker engine (none answers here; under CI this fails): %v", err)
}

// dockerAPI is a Docker client for the tests' own checks.
func dockerAPI(t *testing.T) *client.Client {
	t.Helper()
	cli, err := testcontainers.NewDockerClientWithOpts(ctxFor(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	return cli.Client
}

// ourContainers lists the containers (running or not) that this test
// process's harness started.
func ourContainers(t *testing.T, cli *client.Client) []container.Summary {
	t.Helper()
	list, err := cli.ContainerList(ctxFor(t, time.Minute), client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", fmt.Sprintf("%s=%d", integration.ContainerLabel, os.Getpid())),
	})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// checkNoPull fails the test if the engine pulled an image since since:
// there is no registry to pull from, and the harness builds its images.
func checkNoPull(t *testing.T, cli *client.Client, since time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ev := cli.Events(ctx, client.EventsListOptions{
		Since:   strconv.FormatInt(since.Unix()-1, 10),
		Until:   strconv.FormatInt(time.Now().Unix()+1, 10),
		Filters: make(client.Filters).Add("type", "image").Add("event", "pull"),
	})
	for {
		select {
		case m := <-ev.Messages:
			t.Errorf("image pulled: %s %v", m.Actor.ID, m.Actor.Attributes)
		case err := <-ev.Err:
			if !errors.Is(err, io.EOF) {
				t.Errorf("docker events: %v", err)
			}
			return
		}
	}
}

func TestEtcdContainers(t *testing.T) {
	checkContainersAfter(t)
	testEtcdFaults(t, integration.Containers)
}

func TestZooKeeperContainers(t *testing.T) {
	checkContainersAfter(t)
	testZooKeeperFaults(t, integration.Containers)
}

// checkContainersAfter requires Docker and, when the test ends — after the
// cluster's Close, since it is registered first — checks that no container
// of the harness is left and that no image was pulled.
func checkContainersAfter(t *testing.T) {
	t.Helper()
	requireContainers(t)
	cli, since := dockerAPI(t), time.Now()
	t.Cleanup(func() {
		if left := ourContainers(t, cli); len(left) > 0 {
			t.Errorf("%d containers left after Close", len(left))
		}
		checkNoPull(t, cli, since)
	})
}

// TestEtcdContainersTeardown checks that the members run in containers,
// that Close leaves no container, process, directory or port, that no
// image was pulled, and that containers left by a dead harness process go.
func TestEtcdContainersTeardown(t *testing.T) {
	requireContainers(t)
	ctx := ctxFor(t, 3*time.Minute)
	cli, since := dockerAPI(t), time.Now()

	// A container that a harness process left when it died: its PID is
	// that of a process that has exited.
	start := time.Now()
	ref, err := integration.ContainerImage(ctx, "etcd")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("image %s ready in %v", ref, time.Since(start).Round(time.Millisecond))
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{
			Image:  ref,
			Cmd:    []string{"--version"},
			Labels: map[string]string{integration.ContainerLabel: strconv.Itoa(dead.Process.Pid)},
		},
		HostConfig: &container.HostConfig{NetworkMode: "host"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cli.ContainerRemove(context.Background(), stale.ID, client.ContainerRemoveOptions{Force: true})
	})

	c, err := integration.StartEtcd(ctx, integration.WithSize(1), integration.WithProvider(integration.Containers))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.ContainerInspect(ctx, stale.ID, client.ContainerInspectOptions{}); err == nil {
		t.Errorf("the container of a dead harness process is still there")
	}
	pid := c.Members[0].PID()
	url := c.Members[0].ClientURL()
	running := ourContainers(t, cli)
	if len(running) != 1 || running[0].State != container.StateRunning {
		t.Errorf("containers while the cluster runs: %+v", running)
	} else if running[0].Image != ref {
		t.Errorf("member runs image %s, want %s", running[0].Image, ref)
	}
	if pid == 0 {
		t.Error("member has no PID")
	} else if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err != nil || !strings.HasPrefix(string(b), "/usr/local/bin/etcd\x00") {
		t.Errorf("PID %d is not the container's etcd: %q %v", pid, b, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if pid != 0 && syscall.Kill(pid, 0) == nil {
		t.Errorf("member process %d still runs", pid)
	}
	if left := ourContainers(t, cli); len(left) > 0 {
		t.Errorf("containers left after Close: %+v", left)
	}
	if dirs := leftoverDirs(t); len(dirs) > 0 {
		t.Errorf("directories left: %v", dirs)
	}
	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err == nil {
		short, cancel := context.WithTimeout(ctx, time.Second)
		_, err = etcd.Get(short, "x")
		cancel()
		etcd.Close()
	}
	if err == nil {
		t.Errorf("something still answers at %s", url)
	}
	checkNoPull(t, cli, since)
}

// runImage runs cmd in image ref on the host's network, with binds, until
// ready (a testcontainers wait strategy: the container exits, a log line
// appears) says it is ready, and returns its output so far. The container
// is labelled as the harness's and removed at the end of the test.
func runImage(t *testing.T, ref string, cmd, binds []string, ready wait.Strategy) string {
	t.Helper()
	ctx := ctxFor(t, 2*time.Minute)
	ctr, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image:  ref,
			Cmd:    cmd,
			Labels: map[string]string{integration.ContainerLabel: strconv.Itoa(os.Getpid())},
			HostConfigModifier: func(hc *container.HostConfig) {
				hc.NetworkMode = "host"
				hc.Binds = binds
			},
			WaitingFor: ready,
		},
		Started: true,
		Logger:  tclog.TestLogger(t),
	})
	t.Cleanup(func() {
		if ctr != nil {
			if err := ctr.Terminate(context.Background()); err != nil {
				t.Error(err)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := ctr.Logs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	out, _ := io.ReadAll(rc) // testcontainers has taken the streams apart
	return string(out)
}

// TestZooKeeperImage builds the ZooKeeper image and runs it: java starts,
// and a standalone ZooKeeper server answers on loopback.
func TestZooKeeperImageContainers(t *testing.T) {
	requireContainers(t)
	cli, since := dockerAPI(t), time.Now()
	start := time.Now()
	ref, err := integration.ContainerImage(ctxFor(t, 10*time.Minute), "zookeeper")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("image %s ready in %v", ref, time.Since(start).Round(time.Millisecond))

	out := runImage(t, ref, []string{"-version"}, nil, wait.ForExit())
	if !strings.Contains(out, `version "17`) {
		t.Fatalf("java -version in the image: %s", out)
	}

	dir := t.TempDir()
	port := freePort(t)
	cfg := filepath.Join(dir, "zoo.cfg")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, "tickTime=200\ndataDir=%s/data\nclientPortAddress=127.0.0.1\nclientPort=%d\nadmin.enableServer=false\n4lw.commands.whitelist=ruok\n", dir, port), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	// The server logs "binding to port" once its client socket listens;
	// a connection made from then on is answered once it serves.
	out = runImage(t, ref, []string{
		"-cp", "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar",
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg,
	}, []string{dir + ":" + dir}, wait.ForLog("binding to port"))
	if got := fourLetter(addr, "ruok"); got != "imok" {
		t.Fatalf("ZooKeeper in a container answered ruok at %s with %q:\n%s", addr, got, out)
	}
	checkNoPull(t, cli, since)
}

// fourLetter sends a ZooKeeper four-letter command and returns the answer.
func fourLetter(addr, cmd string) string {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return ""
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte(cmd)); err != nil {
		return ""
	}
	b, _ := io.ReadAll(bufio.NewReader(c))
	return string(b)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
