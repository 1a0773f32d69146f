//go:build unix && noembedetcd

package main

import (
	"context"
	"errors"
)

// startEmbeddedEtcd fails: this build left etcd's server out (see
// main.go), so the demo runs on ZooKeeper only.
func startEmbeddedEtcd(context.Context) (string, func(), error) {
	return "", nil, exit(exitUnreachable, errors.New("demo: this distlock was built with -tags noembedetcd, without the embedded etcd server; run the demo with `go run github.com/distlock/distlock/cmd/distlock@latest demo`, or on a ZooKeeper of yours with `distlock demo --backend zk --zk host:port`"))
}
