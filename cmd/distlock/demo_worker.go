//go:build unix

package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// demoWorkerName is the hidden subcommand that runs worker A of `distlock
// demo` in a process of its own, so that the demo can freeze it for real
// with SIGSTOP.
const demoWorkerName = "demo-worker"

func init() {
	register(command{name: demoWorkerName, hidden: true, run: demoWorker})
}

// The worker talks to the demo over its stdin and stdout, one line per
// message; each line it writes starts with the time it was written (Unix
// nanoseconds: parent and child share the machine's clock) and a verb:
//
//	acquired TOKEN         it holds the lock
//	checked held|lost      its last look at the lock before writing
//	write TOKEN TEXT       its write, for the demo's resource to apply
//	lost UNIXNANO REASON   when it was told the lock is lost, and why
//	bye                    it has released everything and exits
//
// The demo answers "go" once it has resumed the worker from its pause (the
// line only places the pause between the check and the write; the SIGSTOP
// is what stops the worker's keepalives), and "ok" or "refused REASON" to
// the write.

// demoWorker is worker A: take the lock, check it, (be paused), write.
func demoWorker(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(demoWorkerName, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf connFlags
	var lock string
	fs.StringVar(&cf.etcd, "etcd", "", "etcd endpoint")
	fs.StringVar(&cf.zk, "zk", "", "ZooKeeper servers")
	fs.StringVar(&cf.prefix, "prefix", "", "key prefix or znode path")
	fs.DurationVar(&cf.ttl, "ttl", 0, "lease TTL / session timeout")
	fs.StringVar(&lock, "lock", "", "lock name")
	if err := fs.Parse(args); err != nil {
		return usageErr("%v", err)
	}
	cf.timeout = 5 * time.Second

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	in := bufio.NewScanner(os.Stdin)
	var mu sync.Mutex
	send := func(verb string, args ...string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(stdout, strings.Join(append([]string{strconv.FormatInt(time.Now().UnixNano(), 10), verb}, args...), " "))
	}
	recv := func() (string, error) {
		if !in.Scan() {
			if err := in.Err(); err != nil {
				return "", err
			}
			return "", errors.New("demo-worker: the demo went away")
		}
		return in.Text(), nil
	}

	b, err := cf.open(ctx)
	if err != nil {
		return err
	}
	defer b.Close()
	sess, err := session(ctx, b, holderValue("demo worker A"))
	if err != nil {
		return err
	}
	defer sess.Close(context.Background())
	mtx, err := mutex(sess, lock)
	if err != nil {
		return err
	}
	lease, err := mtx.Lock(ctx)
	if err != nil {
		return fmt.Errorf("demo-worker: lock %s: %w", lock, err)
	}
	defer lease.Unlock(context.Background())
	// Note when the lock is reported lost, whatever A is doing then.
	lostAt := make(chan time.Time, 1)
	go func() {
		<-lease.Done()
		lostAt <- time.Now()
	}()
	tok := lease.Token().String()
	send("acquired", tok)

	// The honest holder's check: is the lock still mine? It is.
	select {
	case <-lease.Done():
		send("checked", "lost")
		return lease.Err()
	default:
		send("checked", "held")
	}
	// ... and here the pause falls: between the check and the write.
	if line, err := recv(); err != nil {
		return err
	} else if line != "go" {
		return fmt.Errorf("demo-worker: want go, got %q", line)
	}
	send("write", tok, "report by A")
	if _, err := recv(); err != nil {
		return err
	}

	// Wait for the lost-lock signal (it comes on its own: the lease ran out
	// during the pause).
	select {
	case at := <-lostAt:
		send("lost", strconv.FormatInt(at.UnixNano(), 10), oneLine(lease.Err().Error()))
	case <-time.After(30 * time.Second):
		return errors.New("demo-worker: not told the lock is lost within 30s of resuming")
	}
	lease.Unlock(ctx)
	sess.Close(ctx)
	send("bye")
	return nil
}
