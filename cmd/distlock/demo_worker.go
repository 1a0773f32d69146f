//go:build unix

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/distlock/distlock/internal/holderproto"
)

// demoWorkerName is the hidden subcommand that runs worker A of `distlock
// demo` in a process of its own, so that the demo can freeze it for real
// with SIGSTOP.
const demoWorkerName = "demo-worker"

func init() {
	register(command{name: demoWorkerName, hidden: true, run: demoWorker})
}

// The worker talks to the demo in the line protocol of
// internal/holderproto (the integration harness's lock holder speaks it
// too); each event carries the time it was written, or for "lost" the
// time the worker was told:
//
//	acquired (token, pid)   it holds the lock
//	checked (held)          its last look at the lock before writing
//	write (token, text)     its write, for the demo's resource to apply
//	lost (at, error)        when it was told the lock is lost, and why
//	bye                     it has released everything and exits
//
// The demo answers "go" once it has resumed the worker from its pause (the
// line only places the pause between the check and the write; the SIGSTOP
// is what stops the worker's keepalives), and "ok" or "refused" to the
// write.

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
	in := holderproto.NewScanner(os.Stdin)
	out := holderproto.NewWriter(stdout)
	send := func(e holderproto.Event) { out.Emit(e) }
	recv := func() (string, error) {
		if !in.Scan() {
			if err := in.Err(); err != nil {
				return "", err
			}
			return "", errors.New("demo-worker: the demo went away")
		}
		c, err := holderproto.ParseCommand(in.Text())
		return c.Cmd, err
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
	send(holderproto.Event{Event: "acquired", Token: tok, PID: os.Getpid()})

	// The honest holder's check: is the lock still mine? It is.
	select {
	case <-lease.Done():
		send(holderproto.Event{Event: "checked", Held: holderproto.Bool(false), Error: oneLine(lease.Err().Error())})
		return lease.Err()
	default:
		send(holderproto.Event{Event: "checked", Held: holderproto.Bool(true)})
	}
	// ... and here the pause falls: between the check and the write.
	if line, err := recv(); err != nil {
		return err
	} else if line != "go" {
		return fmt.Errorf("demo-worker: want go, got %q", line)
	}
	send(holderproto.Event{Event: "write", Token: tok, Text: "report by A"})
	if _, err := recv(); err != nil {
		return err
	}

	// Wait for the lost-lock signal (it comes on its own: the lease ran out
	// during the pause).
	select {
	case at := <-lostAt:
		send(holderproto.Event{Event: "lost", At: at.UnixNano(), Error: oneLine(lease.Err().Error())})
	case <-time.After(30 * time.Second):
		return errors.New("demo-worker: not told the lock is lost within 30s of resuming")
	}
	lease.Unlock(ctx)
	sess.Close(ctx)
	send(holderproto.Event{Event: "bye"})
	return nil
}
