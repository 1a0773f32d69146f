// Command testservers runs the harness's servers for test binaries of the
// root module, which must not import the harness (its dependencies would
// land in every user's go.sum). The root's internal/testserve builds and
// runs it; it talks on stdout and ends when its stdin closes:
//
//	testservers examples etcd ZooKeeper PostgreSQL
//
// serves the fixed addresses of the Example functions (package
// examplesrv): one line per server, "ok" or why its port is taken, then
// relays until stdin closes.
//
//	testservers etcd N
//	testservers zookeeper N
//
// starts a cluster of N members (integration.StartEtcd, StartZooKeeper) and
// prints "ready" and its client addresses, space-separated, on one line.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/integration/examplesrv"
	"github.com/distlock/distlock/internal/testserve"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: testservers examples NAME... | etcd N | zookeeper N")
		os.Exit(2)
	}
	if os.Args[1] == "examples" {
		os.Exit(examplesrv.Serve(os.Args[2:]))
	}
	if err := cluster(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "testservers: %v\n", err)
		os.Exit(1)
	}
}

// cluster starts the cluster args name, reports it and holds it until
// stdin closes.
func cluster(args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("want a store and a size, got %q", args)
	}
	size, err := strconv.Atoi(args[1])
	if err != nil || size < 1 {
		return fmt.Errorf("size %q is not a positive number", args[1])
	}
	// The launcher hands this tick time to the sessions it makes; a
	// harness that ran ZooKeeper on another would break their timing.
	if testserve.ZooKeeperTickTime != integration.ZooKeeperTickTime {
		return fmt.Errorf("testserve.ZooKeeperTickTime %v is not the harness's %v", testserve.ZooKeeperTickTime, integration.ZooKeeperTickTime)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var addrs []string
	var stop func() error
	switch args[0] {
	case "etcd":
		c, err := integration.StartEtcd(ctx, integration.WithSize(size))
		if err != nil {
			return err
		}
		addrs, stop = c.Endpoints(), c.Close
	case "zookeeper":
		e, err := integration.StartZooKeeper(ctx, integration.WithSize(size))
		if err != nil {
			return err
		}
		addrs, stop = e.Addrs(), e.Close
	default:
		return fmt.Errorf("unknown store %q (etcd or zookeeper)", args[0])
	}
	fmt.Println("ready " + strings.Join(addrs, " "))
	io.Copy(io.Discard, os.Stdin) // until the test binary closes it, or exits
	return stop()
}
