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
	"github.com/distlock/distlock/internal/qlock"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
)

// onlyEtcd and onlyZK are the intended differences, each with its reason.
var (
	onlyEtcd = map[string]string{
		"DefaultTTL":     "etcd grants the lease TTL the session asks for; ZooKeeper's session timeout is negotiated by the connection",
		"WithTTL":        "the lease TTL is the session's to ask; on ZooKeeper it is the connection's (WithSessionTimeout only tells it)",
		"Session.Client": "the store's client: *clientv3.Client",
		"MutexToken":     "the token of etcd's concurrency.Mutex, from the key it exports; go-zookeeper's zk.Lock exports no node (HolderToken)",
	}
	onlyZK = map[string]string{
		"WithSessionTimeout": "tells the session the timeout the connection negotiated, which go-zookeeper does not export",
		"WithTickTime":       "the client-side deadline depends on the servers' tickTime, which etcd has no counterpart of",
		"DefaultTickTime":    "see WithTickTime",
		"Session.TickTime":   "see WithTickTime",
		"WithACL":            "znodes have ACLs; etcd keys have none of their own",
		"Session.Conn":       "the store's client: *zk.Conn",
		"HolderToken":        "go-zookeeper's zk.Lock exports no node, so the session's entry is found in the directory; etcd's Mutex exports its key (MutexToken)",
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

// signatures maps each method of types, as "Type.Method", to its
// signature without the receiver.
func signatures(types map[string]reflect.Type) map[string]string {
	out := map[string]string{}
	for name, typ := range types {
		for i := range typ.NumMethod() {
			m := typ.Method(i)
			var in, res []string
			for j := 1; j < m.Type.NumIn(); j++ {
				in = append(in, m.Type.In(j).String())
			}
			for j := range m.Type.NumOut() {
				res = append(res, m.Type.Out(j).String())
			}
			out[name+"."+m.Name] = "func(" + strings.Join(in, ", ") + ") (" + strings.Join(res, ", ") + ")"
		}
	}
	return out
}

// The store sessions, compared with each other, and the public recipe
// types, compared with the engine's types they forward to.
var (
	etcdTypes = map[string]reflect.Type{"Session": reflect.TypeFor[*etcdlock.Session]()}
	zkTypes   = map[string]reflect.Type{"Session": reflect.TypeFor[*zklock.Session]()}
	// recipeTypes are package recipe's types; engineTypes the engine's
	// types they forward to.
	recipeTypes = map[string]reflect.Type{
		"Session":    reflect.TypeFor[*recipe.Session](),
		"Mutex":      reflect.TypeFor[*recipe.Mutex](),
		"RWMutex":    reflect.TypeFor[*recipe.RWMutex](),
		"MultiMutex": reflect.TypeFor[*recipe.MultiMutex](),
		"Election":   reflect.TypeFor[*recipe.Election](),
		"Semaphore":  reflect.TypeFor[*recipe.Semaphore](),
		"Admin":      reflect.TypeFor[*recipe.Admin](),
		"Marks":      reflect.TypeFor[*recipe.Marks](),
	}
	engineTypes = map[string]reflect.Type{
		"Session":    reflect.TypeFor[*qlock.Session](),
		"Mutex":      reflect.TypeFor[*qlock.Mutex](),
		"RWMutex":    reflect.TypeFor[*qlock.RWMutex](),
		"MultiMutex": reflect.TypeFor[*qlock.MultiMutex](),
		"Election":   reflect.TypeFor[*qlock.Election](),
		"Semaphore":  reflect.TypeFor[*qlock.Semaphore](),
		"Admin":      reflect.TypeFor[*qlock.Admin](),
		"Marks":      reflect.TypeFor[*qlock.Marks](),
	}
)

// sameSignatureExcept are the methods both backends have with intended
// different signatures.
var sameSignatureExcept = map[string]string{
	"Session.ID": "the store's own session ID: an etcd clientv3.LeaseID, a ZooKeeper int64",
}

func TestParity(t *testing.T) {
	etcd := append(exported(t, "../../etcdlock"), methods(etcdTypes)...)
	zk := append(exported(t, "../../zklock"), methods(zkTypes)...)
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

	// The two sessions have identical method sets but for the
	// allow-lists: the same names with the same signatures.
	esig, zsig := signatures(etcdTypes), signatures(zkTypes)
	for m, es := range esig {
		zs, ok := zsig[m]
		if _, allowed := sameSignatureExcept[m]; !ok || allowed {
			continue
		}
		if es != zs {
			t.Errorf("%s: etcdlock's is %s, zklock's %s", m, es, zs)
		}
	}
	for m := range sameSignatureExcept {
		if esig[m] == "" || zsig[m] == "" || esig[m] == zsig[m] {
			t.Errorf("sameSignatureExcept names %s, which is not on both backends with different signatures", m)
		}
	}
}

// TestEngineParity checks that package recipe's types have every method
// of the engine's type they forward to, with its signature, and nothing
// besides: a method added to the engine must be added to recipe.
func TestEngineParity(t *testing.T) {
	engine, have := signatures(engineTypes), signatures(recipeTypes)
	for m, sig := range engine {
		// A method that returns an engine type returns recipe's type of
		// that name (Admin.Marks).
		sig = strings.ReplaceAll(sig, "*qlock.", "*recipe.")
		switch {
		case have[m] == "":
			t.Errorf("recipe.%s is missing: the engine's type has it", m)
		case have[m] != sig:
			t.Errorf("recipe.%s is %s, the engine's %s", m, have[m], sig)
		}
	}
	for m := range have {
		if engine[m] == "" {
			t.Errorf("recipe.%s is not the engine's", m)
		}
	}
}
