package embedded

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/distlock/distlock/diagnose"
	"github.com/distlock/distlock/internal/zkjava"
)

// ZooKeeper is a running single ZooKeeper server: a Java process of its
// own (ZooKeeper has no Go server), standalone, with its data in a
// temporary directory.
type ZooKeeper struct {
	cmd       *exec.Cmd
	exited    chan struct{} // closed when the process has ended
	dir       string
	addr      string
	closeOnce sync.Once
	closeErr  error
}

// zkTickTime is the server's tickTime: ZooKeeper's default, which
// zklock.DefaultTickTime assumes too. Session timeouts run from 2 to 20
// ticks (4s to 40s).
const zkTickTime = 2 * time.Second

// StartZooKeeper starts a standalone ZooKeeper server on a free loopback
// port (see WithAddr), with its data in a new temporary directory, and
// returns once it answers clients. It needs java (on PATH, or in
// $JAVA_HOME) and ZooKeeper's jars (Debian's zookeeper package, or
// $ZOOKEEPER_HOME, or $ZOOKEEPER_CLASSPATH), and takes a few seconds: a
// JVM's start. Close stops the process and removes the directory; a
// program that does not call it leaves the server running.
func StartZooKeeper(ctx context.Context, opts ...Option) (*ZooKeeper, error) {
	o := newOptions(opts)
	java, err := zkjava.Java()
	if err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	cp, err := zkjava.Classpath()
	if err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	dir, err := os.MkdirTemp("", "distlock-zookeeper-*")
	if err != nil {
		return nil, err
	}
	// A free port can be taken by another process before the server binds
	// it: then try another, a few times (not for a port given).
	for attempt := 0; ; attempt++ {
		addr := o.addr
		if addr == "" {
			if addr, err = freeAddr(); err != nil {
				os.RemoveAll(dir)
				return nil, err
			}
		}
		z, err := startZooKeeper(ctx, java, cp, filepath.Join(dir, fmt.Sprint(attempt)), addr)
		if err == nil {
			z.dir = dir
			return z, nil
		}
		if !(errors.Is(err, errExited) || errors.Is(err, syscall.EADDRINUSE)) || o.addr != "" || attempt == 2 || ctx.Err() != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
}

// errExited: the server's process ended before it answered.
var errExited = errors.New("the ZooKeeper server exited")

func startZooKeeper(ctx context.Context, java, cp, dir, addr string) (*ZooKeeper, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("embedded: ZooKeeper address %q: want host:port: %w", addr, err)
	}
	// Another server on addr would answer the readiness probe below.
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("embedded: ZooKeeper address %s: %w", addr, err)
	}
	l.Close()
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	cfg := strings.Join([]string{
		fmt.Sprintf("tickTime=%d", zkTickTime.Milliseconds()),
		"dataDir=" + data,
		"clientPortAddress=" + host,
		"clientPort=" + port,
		"maxClientCnxns=0",
		"admin.enableServer=false",
		// conf tells zklock the tickTime; srvr is how diagnose, and
		// this function, see a server that serves.
		"4lw.commands.whitelist=srvr,conf,ruok,stat,mntr",
		"forceSync=no", // the data is thrown away with the directory
	}, "\n") + "\n"
	zooCfg := filepath.Join(dir, "zoo.cfg")
	if err := os.WriteFile(zooCfg, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "zookeeper.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the process has its own descriptor
	cmd := exec.Command(java,
		"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
		"-Djava.net.preferIPv4Stack=true",
		"-Djava.io.tmpdir="+dir,
		"-Dzookeeper.log.dir="+dir,
		"-Dzookeeper.jmx.log4j.disable=true",
		"-Dzookeeper.admin.enableServer=false",
		"-cp", cp, "org.apache.zookeeper.server.ZooKeeperServerMain", zooCfg)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("embedded: start ZooKeeper: %w", err)
	}
	z := &ZooKeeper{cmd: cmd, exited: make(chan struct{}), addr: addr}
	go func() {
		cmd.Wait()
		close(z.exited)
	}()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := diagnose.ZooKeeper(pctx, []string{addr})
		cancel()
		if err == nil {
			return z, nil
		}
		var why error
		select {
		case <-z.exited:
			b, _ := os.ReadFile(logPath)
			why = fmt.Errorf("embedded: %w on %s: %s", errExited, addr, lastLines(string(b), 5))
		case <-ctx.Done():
			why = context.Cause(ctx)
		case <-time.After(100 * time.Millisecond):
			if time.Now().After(deadline) {
				why = fmt.Errorf("embedded: ZooKeeper on %s does not answer after two minutes (%v); its log: %s", addr, err, logPath)
			}
		}
		if why != nil {
			z.stop()
			return nil, why
		}
	}
}

// freeAddr asks the kernel for a loopback port that is free now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// lastLines returns the last n lines of s, on one line.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// NewZooKeeper starts a ZooKeeper server for a test (as StartZooKeeper
// does) and stops it when the test ends. It fails the test if the server
// cannot start.
func NewZooKeeper(t testing.TB, opts ...Option) *ZooKeeper {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	z, err := StartZooKeeper(ctx, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := z.Close(); err != nil {
			t.Error(err)
		}
	})
	return z
}

// Servers returns the server's address ("127.0.0.1:PORT"), as zk.Connect
// wants it.
func (z *ZooKeeper) Servers() []string { return []string{z.addr} }

// stop kills the process and waits for it.
func (z *ZooKeeper) stop() {
	z.cmd.Process.Kill()
	<-z.exited
}

// Close stops the server and removes its data directory. It is safe to
// call more than once; clients of the server see it gone.
func (z *ZooKeeper) Close() error {
	z.closeOnce.Do(func() {
		z.stop()
		z.closeErr = os.RemoveAll(z.dir)
	})
	return z.closeErr
}
