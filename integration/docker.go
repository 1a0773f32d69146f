package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// The Docker engine as the Containers provider uses it: one client per
// process, the labels that mark the harness's containers, the removal of
// containers (the harness's own, and those of harness processes that
// died), and following a container's output until its process exits.

// ContainerLabel labels every container the harness starts; its value is
// the PID of the harness process that started it.
const ContainerLabel = "distlock.integration"

const (
	// labelStart is the harness process's start time (field 22 of
	// /proc/PID/stat), so that a reused PID does not pass for it.
	labelStart = "distlock.integration.start"
	// labelNode is the server's name in its cluster.
	labelNode = "distlock.integration.node"
	// labelHost is the harness's host name: a harness leaves alone the
	// containers of harnesses elsewhere (in another container, say) that
	// share its engine, whose PIDs it cannot see.
	labelHost = "distlock.integration.host"
)

// testcontainers-go starts its reaper, Ryuk, before a process's first
// container: a container that removes the process's containers once the
// process is gone, from the image testcontainers/ryuk, which it pulls from
// Docker Hub. The harness's engine may reach no registry (which is why the
// harness builds its own images, images.go), and then that pull would fail
// every container start. So the harness turns Ryuk off, unless the user
// configured it, and does its work itself: every container it starts is
// labelled with the harness process's PID (ContainerLabel) and removed when
// its server is killed or its cluster closed; containers whose harness
// process died without that (an interrupted test) are removed by the next
// harness process that starts a container (removeLeftovers).
//
// testcontainers-go has no API to turn Ryuk off: it reads its
// configuration once per process, from ~/.testcontainers.properties and
// the environment, into an internal package. So the harness sets
// TESTCONTAINERS_RYUK_DISABLED, but only when it first needs the engine
// (dockerClient), never at import: a program that imports the harness and
// runs no container keeps its environment as it was. (A program that used
// testcontainers-go itself before has its configuration read, and keeps
// it.)
var reaperOnce sync.Once

// disableReaper sets TESTCONTAINERS_RYUK_DISABLED=true unless the user set
// it, or ryuk.disabled in ~/.testcontainers.properties. It must run before
// testcontainers-go reads its configuration.
func disableReaper() {
	if _, ok := os.LookupEnv("TESTCONTAINERS_RYUK_DISABLED"); ok {
		return
	}
	if home, err := os.UserHomeDir(); err == nil {
		if b, err := os.ReadFile(filepath.Join(home, ".testcontainers.properties")); err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				if k, _, ok := strings.Cut(l, "="); ok && strings.TrimSpace(k) == "ryuk.disabled" {
					return
				}
			}
		}
	}
	os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
}

var docker struct {
	mu  sync.Mutex
	cli *testcontainers.DockerClient
}

// dockerClient connects to the Docker engine that testcontainers finds
// (DOCKER_HOST, its properties, the default socket), once per process.
// Every use of testcontainers-go in the harness comes after a call to it.
func dockerClient(ctx context.Context) (*client.Client, error) {
	reaperOnce.Do(disableReaper)
	docker.mu.Lock()
	defer docker.mu.Unlock()
	if docker.cli != nil {
		return docker.cli.Client, nil
	}
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err == nil {
		_, err = cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
	}
	if err != nil {
		return nil, fmt.Errorf("integration: the Containers provider needs a Docker engine, and none answers: %w", err)
	}
	docker.cli = cli
	return cli.Client, nil
}

// CheckContainers reports whether the Containers provider can run here,
// that is whether a Docker engine answers.
func CheckContainers(ctx context.Context) error {
	_, err := dockerClient(ctx)
	return err
}

// removeLeftovers removes the harness's containers whose harness process
// is gone (as makeTempDir does their directories): each new server does.
func removeLeftovers(ctx context.Context, cli *client.Client) {
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", ContainerLabel),
	})
	if err != nil {
		return
	}
	for _, c := range list.Items {
		pid, err := strconv.Atoi(c.Labels[ContainerLabel])
		if err != nil || ownerAlive(pid, c.Labels[labelStart]) {
			continue
		}
		if h, ok := c.Labels[labelHost]; ok && h != hostname() {
			continue
		}
		cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	}
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

func ownerAlive(pid int, start string) bool {
	if !alive(pid) {
		return false
	}
	return start == "" || procStart(pid) == start
}

// procStart returns a process's start time in clock ticks since boot
// (field 22 of /proc/PID/stat), or "".
func procStart(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19] // fields counted from 3 (state) after the command
}

// removeContainer removes a container by name or ID, whatever its state.
func removeContainer(cli *client.Client, id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	return err
}

// watchContainer copies the container's output into f until the
// container's process exits, then closes f and done.
func watchContainer(ctx context.Context, cli *client.Client, id string, f *os.File, done chan struct{}) {
	defer close(done)
	lctx, stopLogs := context.WithCancel(ctx)
	defer stopLogs()
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		rc, err := cli.ContainerLogs(lctx, id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Follow: true})
		if err != nil {
			fmt.Fprintf(f, "integration: cannot follow the container's output: %v\n", err)
			return
		}
		defer rc.Close()
		stdcopy.StdCopy(f, f, rc)
	}()
	waitExit(ctx, cli, id)
	// The output stream ends with the process; give it a moment to drain.
	select {
	case <-logged:
	case <-time.After(5 * time.Second):
		stopLogs()
		<-logged
	}
	f.Close()
}

// waitExit returns when the container's process is no longer running
// (or the container is gone, or ctx ends).
func waitExit(ctx context.Context, cli *client.Client, id string) {
	for ctx.Err() == nil {
		wr := cli.ContainerWait(ctx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
		select {
		case <-wr.Result:
			return
		case err := <-wr.Error:
			if ctx.Err() != nil || cerrdefs.IsNotFound(err) {
				return
			}
		}
		// The wait broke off: look, then wait again.
		ins, err := cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		if cerrdefs.IsNotFound(err) || err == nil && ins.Container.State != nil && !ins.Container.State.Running {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}
