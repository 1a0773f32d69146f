package parity

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/doc"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/distlock/distlock"

// publicPackages are the packages whose API users read with go doc.
var publicPackages = []string{
	module,
	module + "/recipe",
	module + "/etcdlock",
	module + "/zklock",
	module + "/gocronlock",
	module + "/schedule",
	module + "/diagnose",
	module + "/integration/embedded",
	module + "/fencing",
	module + "/fencing/etcdfence",
	module + "/fencing/zkfence",
	module + "/fencing/sqlfence",
	module + "/fencing/fencetest",
	module + "/integration/locktest",
}

// listed is a package as go list -export -json describes it.
type listed struct {
	ImportPath string
	Dir        string
	Export     string
	GoFiles    []string
}

// docPackage is a package's documentation as go doc reads it (go/doc on
// its non-test files), by type: the type's doc, its methods' docs, and for
// an interface its declaration.
type docPackage struct {
	pkg   *doc.Package
	types map[string]*doc.Type
}

func (d *docPackage) methodDoc(typ, method string) (string, bool) {
	t := d.types[typ]
	if t == nil {
		return "", false
	}
	for _, m := range t.Methods {
		if m.Name == method {
			return m.Doc, true
		}
	}
	return "", false
}

// interfaceMethodDoc returns the doc (or line comment) of method in the
// declaration of interface typ.
func (d *docPackage) interfaceMethodDoc(typ, method string) (string, bool) {
	t := d.types[typ]
	if t == nil {
		return "", false
	}
	for _, spec := range t.Decl.Specs {
		ts, ok := spec.(*ast.TypeSpec)
		if !ok || ts.Name.Name != typ {
			continue
		}
		it, ok := ts.Type.(*ast.InterfaceType)
		if !ok {
			return "", false
		}
		for _, f := range it.Methods.List {
			for _, n := range f.Names {
				if n.Name == method {
					return f.Doc.Text() + f.Comment.Text(), true
				}
			}
		}
	}
	return "", false
}

// godocWorld is the public packages' types (from export data, as the
// compiler sees them) and their documentation (as go doc sees it).
type godocWorld struct {
	fset   *token.FileSet
	list   map[string]listed
	imp    types.Importer
	docs   map[string]*docPackage
	errors []string
}

func loadWorld(t *testing.T) *godocWorld {
	t.Helper()
	args := append([]string{"list", "-export", "-deps", "-json=ImportPath,Dir,Export,GoFiles"}, publicPackages...)
	// From the tests' module, which requires the root and the harness
	// (replaced by this checkout) and imports every public package: one go
	// list sees them all, integration/embedded and locktest included.
	cmd := exec.Command("go", args...)
	cmd.Dir = filepath.Join("..", "..", "tests")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	w := &godocWorld{fset: token.NewFileSet(), list: map[string]listed{}, docs: map[string]*docPackage{}}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		w.list[p.ImportPath] = p
	}
	w.imp = importer.ForCompiler(w.fset, "gc", func(path string) (io.ReadCloser, error) {
		p, ok := w.list[path]
		if !ok || p.Export == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(p.Export)
	})
	return w
}

// doc returns the documentation of package path, parsed once.
func (w *godocWorld) doc(t *testing.T, path string) *docPackage {
	t.Helper()
	if d, ok := w.docs[path]; ok {
		return d
	}
	p, ok := w.list[path]
	if !ok {
		t.Fatalf("package %s is not among the public packages' dependencies", path)
	}
	var files []*ast.File
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(w.fset, filepath.Join(p.Dir, name), nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	dp, err := doc.NewFromFiles(w.fset, files, path)
	if err != nil {
		t.Fatal(err)
	}
	d := &docPackage{pkg: dp, types: map[string]*doc.Type{}}
	for _, typ := range dp.Types {
		d.types[typ.Name] = typ
	}
	w.docs[path] = d
	return d
}

func (w *godocWorld) errorf(format string, args ...any) {
	w.errors = append(w.errors, fmt.Sprintf(format, args...))
}

// short names pkg/path.Name as the last element of the path and Name.
func short(obj types.Object) string {
	if obj.Pkg() == nil {
		return obj.Name()
	}
	return obj.Pkg().Name() + "." + obj.Name()
}

func inModule(p *types.Package) bool {
	return p != nil && (p.Path() == module || strings.HasPrefix(p.Path(), module+"/"))
}

func isInternal(path string) bool {
	return strings.Contains(path+"/", "/internal/")
}

// TestGodoc checks that go doc shows, with a doc comment, every exported
// method a user of the public packages can call, and that every exported
// declaration of those packages has a doc comment.
//
// It walks every exported type of the public packages and every type
// reachable from them (through aliases, the results of exported functions
// and methods, exported struct fields and embedded fields). A method of a
// type must be listed by go/doc under that type in its own (public)
// package, or be promoted from an embedded field whose type is itself an
// exported type of a public package (go doc shows that field, and the
// method under that type). So an alias of an internal type, or a field of
// an internal type embedded for its methods, fails: go doc and pkg.go.dev
// show no methods through them.
func TestGodoc(t *testing.T) {
	w := loadWorld(t)

	// Every exported declaration has a doc comment.
	for _, path := range publicPackages {
		d := w.doc(t, path)
		name := d.pkg.Name
		if strings.TrimSpace(d.pkg.Doc) == "" {
			w.errorf("package %s has no package documentation", path)
		}
		values := func(vs []*doc.Value) {
			for _, v := range vs {
				if v.Doc != "" {
					continue
				}
				for _, spec := range v.Decl.Specs {
					vs := spec.(*ast.ValueSpec)
					for _, n := range vs.Names {
						if n.IsExported() && vs.Doc.Text()+vs.Comment.Text() == "" {
							w.errorf("%s.%s has no doc comment", name, n.Name)
						}
					}
				}
			}
		}
		funcs := func(prefix string, fs []*doc.Func) {
			for _, f := range fs {
				if strings.TrimSpace(f.Doc) == "" {
					w.errorf("%s%s has no doc comment", prefix, f.Name)
				}
			}
		}
		values(d.pkg.Consts)
		values(d.pkg.Vars)
		funcs(name+".", d.pkg.Funcs)
		for _, typ := range d.pkg.Types {
			if strings.TrimSpace(typ.Doc) == "" {
				w.errorf("%s.%s has no doc comment", name, typ.Name)
			}
			values(typ.Consts)
			values(typ.Vars)
			funcs(name+".", typ.Funcs)
			funcs(name+"."+typ.Name+".", typ.Methods)
		}
	}

	// Every method of every reachable type is shown by go doc.
	var queue []*types.TypeName
	seen := map[*types.TypeName]bool{}
	checked := map[string]bool{}
	var reach func(typ types.Type, from string)
	reach = func(typ types.Type, from string) {
		switch typ := typ.(type) {
		case *types.Alias:
			reach(types.Unalias(typ), from)
		case *types.Pointer:
			reach(typ.Elem(), from)
		case *types.Slice:
			reach(typ.Elem(), from)
		case *types.Array:
			reach(typ.Elem(), from)
		case *types.Chan:
			reach(typ.Elem(), from)
		case *types.Map:
			reach(typ.Key(), from)
			reach(typ.Elem(), from)
		case *types.Signature:
			for v := range typ.Results().Variables() {
				reach(v.Type(), from)
			}
		case *types.Struct:
			for f := range typ.Fields() {
				if f.Exported() {
					reach(f.Type(), from)
				}
			}
		case *types.Interface:
			for m := range typ.Methods() {
				if m.Exported() {
					reach(m.Type(), from)
				}
			}
		case *types.Named:
			obj := typ.Origin().Obj()
			if seen[obj] || !inModule(obj.Pkg()) {
				return
			}
			seen[obj] = true
			switch {
			case isInternal(obj.Pkg().Path()):
				w.errorf("%s reaches %s (package %s): an internal type, whose methods go doc cannot show in a public package", from, short(obj), obj.Pkg().Path())
			case !obj.Exported():
				if _, iface := typ.Underlying().(*types.Interface); !iface {
					ms := types.NewMethodSet(types.NewPointer(typ))
					for sel := range ms.Methods() {
						if sel.Obj().Exported() {
							w.errorf("%s reaches %s, an unexported type whose method %s go doc does not show", from, short(obj), sel.Obj().Name())
						}
					}
				}
			default:
				queue = append(queue, obj)
			}
		}
	}
	for _, path := range publicPackages {
		pkg, err := w.imp.Import(path)
		if err != nil {
			t.Fatal(err)
		}
		scope := pkg.Scope()
		for _, name := range scope.Names() {
			obj := scope.Lookup(name)
			if !obj.Exported() {
				continue
			}
			switch obj := obj.(type) {
			case *types.TypeName:
				if obj.IsAlias() {
					// Named here, not only by the first path that reaches
					// the target: each alias of an internal type is a
					// type whose methods go doc does not show.
					if n, ok := types.Unalias(obj.Type()).(*types.Named); ok && inModule(n.Obj().Pkg()) && isInternal(n.Obj().Pkg().Path()) {
						w.errorf("%s is an alias of %s (package %s): go doc shows no methods through an alias; declare a type", short(obj), short(n.Obj()), n.Obj().Pkg().Path())
					}
					reach(obj.Type(), short(obj)+" (an alias)")
				} else {
					reach(obj.Type(), short(obj))
				}
			case *types.Func, *types.Var:
				reach(obj.Type(), short(obj))
			}
		}
	}
	for len(queue) > 0 {
		obj := queue[0]
		queue = queue[1:]
		named := obj.Type().(*types.Named)
		d := w.doc(t, obj.Pkg().Path())
		name := short(obj)
		if d.types[obj.Name()] == nil {
			w.errorf("%s: go doc does not list the type", name)
			continue
		}
		if it, ok := named.Underlying().(*types.Interface); ok {
			for m := range it.ExplicitMethods() {
				if !m.Exported() {
					continue
				}
				checked[name+"."+m.Name()] = true
				if text, ok := d.interfaceMethodDoc(obj.Name(), m.Name()); !ok {
					w.errorf("%s.%s: go doc does not show it", name, m.Name())
				} else if strings.TrimSpace(text) == "" {
					w.errorf("%s.%s has no doc comment", name, m.Name())
				}
				reach(m.Type(), name+"."+m.Name())
			}
			for e := range it.EmbeddedTypes() {
				if n, ok := types.Unalias(e).(*types.Named); !ok || !n.Obj().Exported() {
					w.errorf("%s embeds %v, whose methods go doc does not show", name, e)
				}
				reach(e, name+" (embedded)")
			}
			continue
		}
		reach(named.Underlying(), name)
		st, _ := named.Underlying().(*types.Struct)
		for sel := range types.NewMethodSet(types.NewPointer(named)).Methods() {
			m := sel.Obj()
			if !m.Exported() {
				continue
			}
			full := name + "." + m.Name()
			reach(m.Type(), full)
			if len(sel.Index()) > 1 && st != nil {
				// Promoted from an embedded field: shown under the field's
				// type if that is an exported type of a public package
				// (reach queues it) or outside this module.
				ft := st.Field(sel.Index()[0]).Type()
				if p, ok := types.Unalias(ft).(*types.Pointer); ok {
					ft = p.Elem()
				}
				if n, ok := types.Unalias(ft).(*types.Named); ok && n.Obj().Exported() &&
					(!inModule(n.Obj().Pkg()) || !isInternal(n.Obj().Pkg().Path())) {
					continue
				}
			}
			checked[full] = true
			if text, ok := d.methodDoc(obj.Name(), m.Name()); !ok {
				w.errorf("%s: go doc does not show it (an alias, or a method promoted from an internal type?)", full)
			} else if strings.TrimSpace(text) == "" {
				w.errorf("%s has no doc comment", full)
			}
		}
	}

	slices.Sort(w.errors)
	for _, e := range slices.Compact(w.errors) {
		t.Error(e)
	}
	// The walk must have reached what users call most (or it proves
	// nothing).
	for _, m := range []string{
		"recipe.Mutex.Lock", "recipe.Mutex.TryLock", "recipe.RWMutex.RLocker",
		"recipe.Semaphore.TryAcquire", "recipe.Election.Observe", "recipe.Election.Campaign",
		"recipe.Session.Close", "etcdlock.Session.ID", "zklock.Session.TickTime", "distlock.Lease.Unlock", "distlock.Leadership.Resign",
	} {
		if !checked[m] {
			t.Errorf("the walk did not check %s", m)
		}
	}
	t.Logf("checked %d methods", len(checked))
}
