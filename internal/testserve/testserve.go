// Package testserve runs the test harness's servers (module
// github.com/distlock/distlock/integration) for the root module's tests
// without importing the harness: its dependencies (etcd's server,
// testcontainers, pgx, ...) would otherwise be in the root's go.mod, and
// with it in the go.sum of every program that uses distlock. The servers
// run in a child process, the harness's command integration/cmd/testservers,
// which this package builds from the checkout (or takes from
// $DISTLOCK_TESTSERVERS, which make test sets to a binary it builds once).
//
// Example functions name fixed addresses (localhost:2379, :2181, :5432);
// a package's example_server_test.go serves them with
//
//	func TestMain(m *testing.M) { os.Exit(testserve.Main(m, testserve.Etcd)) }
//
// White-box tests of the drivers get a cluster of their own, on free
// ports, with EtcdCluster and NewZooKeeper.
package testserve

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A Server names a fixed address of the examples, as the harness's
// examplesrv names it.
type Server string

// The examples' servers.
const (
	// Etcd is one etcd member on localhost:2379.
	Etcd Server = "etcd"
	// ZooKeeper is one ZooKeeper server on localhost:2181.
	ZooKeeper Server = "ZooKeeper"
	// Postgres is one PostgreSQL server on localhost:5432.
	Postgres Server = "PostgreSQL"
)

// ZooKeeperTickTime is the tick time of the harness's ZooKeeper servers
// (integration.ZooKeeperTickTime; the command refuses to run if they
// differ).
const ZooKeeperTickTime = 200 * time.Millisecond

// Main serves the examples' fixed addresses from a child process, runs
// the tests and examples, then stops the child and every server it
// started; it returns the exit code for os.Exit. Each server starts when
// a first client connects to its address, so a run that selects no
// example starts none. A fixed port that another process holds fails the
// test binary under CI (CI set in the environment); elsewhere the
// examples are skipped with a message, and the tests run.
func Main(m *testing.M, servers ...Server) int {
	flag.Parse()
	args := []string{"examples"}
	for _, s := range servers {
		args = append(args, string(s))
	}
	c, err := start(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testserve: the examples' servers: %v\n", err)
		return 1
	}
	var busy []string
	for range servers {
		line, err := c.out.ReadString('\n')
		if err != nil {
			c.stop()
			fmt.Fprintf(os.Stderr, "testserve: the examples' servers did not report: %v\n", err)
			return 1
		}
		if line = strings.TrimSpace(line); line != "ok" {
			busy = append(busy, line)
		}
	}
	defer c.stop()
	if len(busy) > 0 {
		for _, b := range busy {
			fmt.Fprintf(os.Stderr, "testserve: %s\n", b)
		}
		if ci := os.Getenv("CI"); ci != "" {
			fmt.Fprintf(os.Stderr, "testserve: CI=%s, so the package fails: stop what listens there to run the examples\n", ci)
			return 1
		}
		skip := "^Example"
		if s := flag.Lookup("test.skip"); s != nil && s.Value.String() != "" {
			skip = s.Value.String() + "|" + skip
		}
		flag.Set("test.skip", skip)
		fmt.Fprintln(os.Stderr, "testserve: the examples are skipped (under CI=true the package fails)")
	}
	return m.Run()
}

// EtcdCluster starts an etcd cluster of size members on free ports and
// returns their client URLs; the cluster stops when t's test ends.
func EtcdCluster(t testing.TB, size int) []string { return cluster(t, "etcd", size) }

func cluster(t testing.TB, store string, size int) []string {
	t.Helper()
	c, err := start([]string{store, fmt.Sprint(size)})
	if err != nil {
		t.Fatalf("testserve: %s cluster: %v", store, err)
	}
	t.Cleanup(c.stop)
	line, err := c.out.ReadString('\n')
	if err != nil {
		t.Fatalf("testserve: the %s cluster did not start (%v); its log is above", store, err)
	}
	addrs, ok := strings.CutPrefix(strings.TrimSpace(line), "ready ")
	if !ok {
		t.Fatalf("testserve: the %s cluster reported %q", store, line)
	}
	return strings.Fields(addrs)
}

// child is a running testservers process.
type child struct {
	cmd *exec.Cmd
	in  io.Closer
	out *bufio.Reader
}

// start runs testservers with args.
func start(args []string) (*child, error) {
	bin, err := binary()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	// The child stops its servers when its stdin closes, which happens
	// when this process exits, however it exits; Pdeathsig covers a child
	// blocked elsewhere.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &child{cmd: cmd, in: in, out: bufio.NewReader(out)}, nil
}

// stop closes the child's stdin, which makes it stop its servers and
// exit, and waits for it.
func (c *child) stop() {
	c.in.Close()
	c.cmd.Wait()
}
