// Command etcdserver is the real etcd server (go.etcd.io/etcd/server/v3's
// etcdmain, the code of the etcd binary), built from the Go module proxy at
// the version in go.mod so that the harness needs no download of a release.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
