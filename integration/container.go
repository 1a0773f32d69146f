package integration

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// The Containers provider runs each server in a Docker container, through
// testcontainers-go, from an image that the harness builds on this machine
// (images.go). Containers use the host's network: a server listens on this
// machine's loopback exactly as a process does, the proxies stand between
// the servers as before, and the container's process, which the host sees
// with a host PID, owns its sockets in /proc as a process does, so the
// proxies tell servers apart (procnet.go) unchanged. Traffic stays on
// loopback; no container network is made.
//
// Each start is a new container with the same bind mounts (the server's
// directories, at the same paths), so a restarted server has its data.
// Pausing signals the container's process (SIGSTOP, SIGCONT); killing it
// is SIGKILL, then the container is removed.
//
// testcontainers' reaper, Ryuk, is off; the harness removes its containers
// itself (docker.go).
//
// Which image runs a server follows from serverSpec.argv[0], a path on
// this machine, whose arguments (argv[1:]) the container's entrypoint gets:
// the etcd server binary the harness builds (etcdserver-*) runs in the
// etcd image, which carries that very binary; java runs in the ZooKeeper
// image, whose Java and jars sit at the paths they have here, so the
// arguments (classpath included) mean the same inside. Classpath entries
// the image lacks are mounted read-only from this machine. The container
// gets serverSpec.env and nothing of the harness's environment.
//
// The images are built here, never pulled (images.go). On a machine whose
// engine reaches a registry, gcr.io/etcd-development/etcd (entrypoint
// /usr/local/bin/etcd) and Docker Hub's zookeeper (java with the
// /apache-zookeeper-*/lib/* classpath, or zkServer.sh start-foreground)
// run the same servers; the harness does not use them, so that its tests
// run the same everywhere.

// containerServer is one server of a cluster run in containers, one
// container per start.
type containerServer struct {
	name  string
	log   *slog.Logger
	img   *builtImage
	args  []string // the server's arguments (argv[1:])
	env   map[string]string
	out   string   // log file path
	binds []string // host-path:container-path[:ro]

	mu        sync.Mutex
	ctr       testcontainers.Container
	id        string
	hostPID   int
	done      chan struct{} // closed when the current container's process exits
	stopWatch context.CancelFunc
}

// imageFor chooses the image that runs argv[0] (a path on this machine):
// the etcd server binary the harness builds, or java for ZooKeeper.
func imageFor(argv0 string) (imageKind, error) {
	switch base := filepath.Base(argv0); {
	case base == "java":
		return zooKeeperImage, nil
	case base == "etcd" || strings.HasPrefix(base, "etcdserver"):
		return etcdImage, nil
	default:
		return "", fmt.Errorf("integration: no container image runs %s", argv0)
	}
}

func newContainer(c config, s serverSpec) (server, error) {
	if len(s.argv) == 0 {
		return nil, fmt.Errorf("integration: %s: no command", s.name)
	}
	kind, err := imageFor(s.argv[0])
	if err != nil {
		return nil, err
	}
	bin := ""
	if kind == etcdImage {
		bin = s.argv[0]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cli, err := dockerClient(ctx)
	if err != nil {
		return nil, err
	}
	removeLeftovers(ctx, cli)
	img, err := ensureImage(ctx, kind, bin, c.logger.Info)
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	for _, kv := range s.env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return &containerServer{
		name:  s.name,
		log:   c.logger,
		img:   img,
		args:  s.argv[1:],
		env:   env,
		out:   s.log,
		binds: containerBinds(s, img),
	}, nil
}

// containerBinds mounts the server's directories and its log's directory
// read-write at the same paths; and, for java, the classpath entries that
// the image lacks, read-only from this machine.
func containerBinds(s serverSpec, img *builtImage) []string {
	var dirs []string
	for _, d := range s.dirs {
		dirs = append(dirs, filepath.Clean(d))
	}
	if s.log != "" {
		dirs = append(dirs, filepath.Dir(s.log))
	}
	sort.Strings(dirs) // a directory before those below it
	var rw []string
	under := func(p string) bool {
		for _, d := range rw {
			if p == d || strings.HasPrefix(p, d+"/") {
				return true
			}
		}
		return false
	}
	for _, d := range dirs {
		if !under(d) {
			rw = append(rw, d)
		}
	}
	var binds []string
	for _, d := range rw {
		binds = append(binds, d+":"+d)
	}
	if img.kind == zooKeeperImage {
		seen := map[string]bool{}
		for _, p := range javaClasspath(s.argv[1:], s.env) {
			p = strings.TrimSuffix(p, "/*")
			if p == "" || !filepath.IsAbs(p) || img.has[p] || seen[p] || under(p) || !fileExists(p) {
				continue
			}
			seen[p] = true
			binds = append(binds, p+":"+p+":ro")
		}
	}
	return binds
}

// tcLogger hands testcontainers' messages to the harness's logger.
type tcLogger struct{ l *slog.Logger }

func (t tcLogger) Printf(format string, v ...any) {
	t.l.Debug("testcontainers: " + strings.TrimSpace(fmt.Sprintf(format, v...)))
}

func (ct *containerServer) start() error {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.ctr != nil {
		return fmt.Errorf("integration: %s is already running", ct.name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli, err := dockerClient(ctx)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(ct.out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	name := fmt.Sprintf("distlock-it-%d-%s-%d", os.Getpid(), containerName(ct.name), containerSeq.Add(1))
	binds := ct.binds
	req := testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image: ct.img.ref,
			Cmd:   ct.args,
			Env:   ct.env,
			Name:  name,
			Labels: map[string]string{
				ContainerLabel: strconv.Itoa(os.Getpid()),
				labelStart:     procStart(os.Getpid()),
				labelNode:      ct.name,
				labelHost:      hostname(),
			},
			ConfigModifier: func(cfg *container.Config) {
				// The files it writes in the mounted directories are the
				// harness's, which removes them.
				cfg.User = fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid())
			},
			HostConfigModifier: func(hc *container.HostConfig) {
				hc.NetworkMode = "host"
				hc.Binds = binds
				// The server is the container's process: no init
				// process between the harness's signals and it.
				noInit := false
				hc.Init = &noInit
				hc.LogConfig = container.LogConfig{Type: "json-file"}
			},
		},
		Started: true,
		Logger:  tcLogger{ct.log},
	}
	ctr, err := testcontainers.GenericContainer(ctx, req)
	if err == nil && ctr == nil {
		err = errors.New("no container")
	}
	var pid int
	if err == nil {
		var ins *container.InspectResponse
		if ins, err = ctr.Inspect(ctx); err == nil && ins.State != nil {
			pid = ins.State.Pid
		}
	}
	if err != nil {
		f.Close()
		removeContainer(cli, name)
		return fmt.Errorf("integration: start %s in a container: %w", ct.name, err)
	}
	wctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go watchContainer(wctx, cli, ctr.GetContainerID(), f, done)
	ct.ctr, ct.id, ct.hostPID, ct.done, ct.stopWatch = ctr, ctr.GetContainerID(), pid, done, stop
	ct.log.Info("integration: started", "node", ct.name, "pid", pid, "container", name)
	return nil
}

// containerSeq numbers the process's containers, whose names must differ.
var containerSeq atomic.Int64

// containerName makes s fit in a container name.
func containerName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-' {
			return r
		}
		return '-'
	}, s)
}

// running reports whether the current container's process runs; ct.mu
// is held.
func (ct *containerServer) running() bool {
	if ct.done == nil {
		return false
	}
	select {
	case <-ct.done:
		return false
	default:
		return true
	}
}

// pid returns the host PID of the container's process, or 0 when it is
// not running.
func (ct *containerServer) pid() int {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if !ct.running() {
		return 0
	}
	return ct.hostPID
}

// exited returns a channel closed when the current container's process
// exits (nil if none was started).
func (ct *containerServer) exited() <-chan struct{} {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	return ct.done
}

// signal sends sig to the container's process, as the host sees it.
func (ct *containerServer) signal(sig syscall.Signal) error {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if !ct.running() || ct.hostPID == 0 {
		return fmt.Errorf("integration: %s is not running", ct.name)
	}
	ct.log.Info("integration: signal", "node", ct.name, "signal", sig.String())
	return syscall.Kill(ct.hostPID, sig)
}

// kill sends SIGKILL (and SIGCONT, so a paused server dies too) to the
// container's process, waits until it has exited, and removes the
// container. The server's directories stay for the next start.
func (ct *containerServer) kill() error {
	ct.mu.Lock()
	ctr, id, pid, done, stop := ct.ctr, ct.id, ct.hostPID, ct.done, ct.stopWatch
	running := ct.running()
	ct.ctr, ct.id, ct.hostPID = nil, "", 0
	ct.mu.Unlock()
	if ctr == nil {
		return nil
	}
	var errs []error
	if running && pid > 0 {
		syscall.Kill(pid, syscall.SIGKILL)
		syscall.Kill(pid, syscall.SIGCONT)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		errs = append(errs, fmt.Errorf("integration: %s (pid %d) did not exit after SIGKILL", ct.name, pid))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := ctr.Terminate(ctx, testcontainers.StopTimeout(0)); err != nil && !cerrdefs.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("integration: remove %s's container: %w", ct.name, err))
	}
	stop()
	<-done
	// Gone, not just going.
	if cli, err := dockerClient(ctx); err == nil {
		if _, err := cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{}); !cerrdefs.IsNotFound(err) {
			if err := removeContainer(cli, id); err != nil {
				errs = append(errs, fmt.Errorf("integration: %s's container is still there: %w", ct.name, err))
			}
		}
	}
	ct.log.Info("integration: killed", "node", ct.name, "pid", pid)
	return errors.Join(errs...)
}

// tail returns the end of the server's output, for error messages.
func (ct *containerServer) tail() string {
	b, err := os.ReadFile(ct.out)
	if err != nil {
		return ""
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}
