//go:build unix && !noembedetcd

package main

import (
	"context"
	"fmt"

	"github.com/distlock/distlock/internal/embedetcd"
)

// startEmbeddedEtcd starts the demo's etcd member in this process, in a
// temporary directory that stop removes. See main.go for why this file,
// and with it etcd's server, is left out of builds with -tags noembedetcd.
func startEmbeddedEtcd(ctx context.Context) (endpoint string, stop func(), err error) {
	srv, err := embedetcd.Start(ctx)
	if err != nil {
		return "", nil, fmt.Errorf("demo: start embedded etcd: %w", err)
	}
	return srv.Endpoint, func() { srv.Close() }, nil
}
