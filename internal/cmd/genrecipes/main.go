// Command genrecipes writes the recipes_gen.go of etcdlock or zklock: the
// methods of their Session, Mutex, RWMutex, Election and Semaphore, each
// a one-line forwarder to the one engine (internal/qlock) under a doc
// comment in the store's own words, from the one template in
// internal/recipegen.
//
// Why declared types with forwarders and not aliases of the engine's
// types (or a Session embedding the engine's): go doc and pkg.go.dev
// cannot show methods through an alias, nor the promoted methods of an
// embedded field, so users saw no methods at all.
//
// Usage, from the package's directory (go generate does it, see doc.go):
//
//	go run ../internal/cmd/genrecipes -store etcd -o recipes_gen.go
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/distlock/distlock/internal/recipegen"
)

func main() {
	store := flag.String("store", "", "the backend: etcd or zk")
	out := flag.String("o", "recipes_gen.go", "the file to write")
	flag.Parse()
	st, ok := recipegen.Stores[*store]
	if !ok || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: genrecipes -store etcd|zk [-o recipes_gen.go]")
		os.Exit(2)
	}
	src, err := recipegen.Source(st)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, src, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
