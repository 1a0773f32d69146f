package parity

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/zklock"
)

// onlyEtcd and onlyZK are the intended differences, each with its reason.
var (
	onlyEtcd = map[string]string{
		"DefaultTTL":     "etcd grants the lease TTL the session asks for; ZooKeeper's session timeout is negotiated by the connection",
		"WithTTL":        "the lease TTL is the session's to ask; on ZooKeeper it is the connection's (WithSessionTimeout only tells it)",
		"Session.Client": "the store's client: *clientv3.Client",
	}
	onlyZK = map[string]string{
		"WithSessionTimeout": "tells the session the timeout the connection negotiated, which go-zookeeper does not export",
		"WithTickTime":       "the client-side deadline depends on the servers' tickTime, which etcd has no counterpart of",
		"DefaultTickTime":    "see WithTickTime",
		"Session.TickTime":   "see WithTickTime",
		"WithACL":            "znodes have ACLs; etcd keys have none of their own",
		"Session.Conn":       "the store's client: *zk.Conn",
	}
)

// exported lists a package's exported top-level names, from its non-test
// source.
func exported(t *testing.T, dir string) []string {
	t.Helper()
	fset := token.NewFileSet()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	var names []string
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					names = append(names, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							names = append(names, s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								names = append(names, n.Name)
							}
						}
					}
				}
			}
		}
	}
	return names
}

// methods lists the method sets of a package's types, as "Type.Method",
// promoted methods included.
func methods(types map[string]reflect.Type) []string {
	var out []string
	for name, typ := range types {
		for i := range typ.NumMethod() {
			out = append(out, name+"."+typ.Method(i).Name)
		}
	}
	return out
}

func TestParity(t *testing.T) {
	etcd := append(exported(t, "../../etcdlock"), methods(map[string]reflect.Type{
		"Session":  reflect.TypeFor[*etcdlock.Session](),
		"Mutex":    reflect.TypeFor[*etcdlock.Mutex](),
		"RWMutex":  reflect.TypeFor[*etcdlock.RWMutex](),
		"Election": reflect.TypeFor[*etcdlock.Election](),
	})...)
	zk := append(exported(t, "../../zklock"), methods(map[string]reflect.Type{
		"Session":  reflect.TypeFor[*zklock.Session](),
		"Mutex":    reflect.TypeFor[*zklock.Mutex](),
		"RWMutex":  reflect.TypeFor[*zklock.RWMutex](),
		"Election": reflect.TypeFor[*zklock.Election](),
	})...)
	check := func(have, other []string, allowed map[string]string, pkg, otherPkg string) {
		for _, n := range have {
			if _, ok := allowed[n]; !ok && !slices.Contains(other, n) {
				t.Errorf("%s has %s, %s does not (add it there, or to the allow-list with a reason)", pkg, n, otherPkg)
			}
		}
		for n := range allowed {
			if !slices.Contains(have, n) {
				t.Errorf("the allow-list names %s.%s, which does not exist", pkg, n)
			}
		}
	}
	check(etcd, zk, onlyEtcd, "etcdlock", "zklock")
	check(zk, etcd, onlyZK, "zklock", "etcdlock")

	// The same types are the same type: one engine serves both stores.
	if reflect.TypeFor[etcdlock.Mutex]() != reflect.TypeFor[zklock.Mutex]() ||
		reflect.TypeFor[etcdlock.RWMutex]() != reflect.TypeFor[zklock.RWMutex]() ||
		reflect.TypeFor[etcdlock.Election]() != reflect.TypeFor[zklock.Election]() {
		t.Error("the backends' recipe types differ")
	}
}
