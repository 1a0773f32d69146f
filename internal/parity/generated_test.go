package parity

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/distlock/distlock/internal/recipegen"
)

// TestGenerated checks that etcdlock's and zklock's recipes_gen.go are
// what internal/recipegen writes now: edit the template, then run
// go generate ./etcdlock ./zklock.
func TestGenerated(t *testing.T) {
	for _, store := range []string{"etcd", "zk"} {
		st := recipegen.Stores[store]
		want, err := recipegen.Source(st)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("..", "..", st.Pkg, "recipes_gen.go")
		have, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(have, want) {
			t.Errorf("%s differs from what internal/recipegen writes: run go generate ./%s", path, st.Pkg)
		}
	}
}
