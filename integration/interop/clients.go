package interop

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync"

	"github.com/distlock/distlock/internal/toolcache"
	"github.com/distlock/distlock/internal/zkjava"
)

//go:embed java/Holder.java python/holder.py
var sources embed.FS

// SystemPython is the Python that Debian's python3-kazoo installs kazoo
// for; a python3 earlier on PATH (a pyenv one, say) may lack it.
const SystemPython = "/usr/bin/python3"

// debianJavaDir is where Debian's libcurator-recipes-java puts its jars.
const debianJavaDir = "/usr/share/java"

// cacheDir is where the compiled Holder class and a built etcdctl live:
// the harness's cache's interop directory (toolcache.Dir).
func cacheDir() (string, error) { return toolcache.Dir("interop") }

// writeSource copies an embedded source into dir (a directory named by
// the source's hash, so that an edited source compiles afresh).
func writeSource(name string) (path string, err error) {
	b, err := sources.ReadFile(name)
	if err != nil {
		return "", err
	}
	base, err := cacheDir()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	dir := filepath.Join(base, hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path = filepath.Join(dir, filepath.Base(name))
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return "", err
	}
	return path, os.Rename(tmp, path)
}

// Curator is the compiled Curator holder: java, its classpath, and the
// directory of Holder.class.
type Curator struct {
	Java string // the java binary
	// Classpath holds Holder.class's directory and Curator's jars.
	Classpath string
}

var (
	curatorOnce sync.Once
	curator     *Curator
	curatorErr  error
)

// FindCurator finds java, javac and Debian's Curator jars, compiles
// Holder.java (once per source, cached) and returns how to run it. It
// fails with ErrMissing when any of them is not installed.
func FindCurator(ctx context.Context) (*Curator, error) {
	curatorOnce.Do(func() { curator, curatorErr = findCurator(ctx) })
	return curator, curatorErr
}

func findCurator(ctx context.Context) (*Curator, error) {
	java, err := zkjava.Java()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMissing, err)
	}
	javac := filepath.Join(filepath.Dir(java), "javac")
	if _, err := os.Stat(javac); err != nil {
		if javac, err = exec.LookPath("javac"); err != nil {
			return nil, fmt.Errorf("%w: no javac next to %s nor on PATH (apt-get install default-jdk-headless)", ErrMissing, java)
		}
	}
	roots := []string{filepath.Join(debianJavaDir, "curator-recipes.jar"), filepath.Join(debianJavaDir, "slf4j-nop.jar")}
	for _, r := range roots {
		if _, err := os.Stat(r); err != nil {
			return nil, fmt.Errorf("%w: %s missing (apt-get install libcurator-recipes-java libslf4j-java, or scripts/interop-deps.sh)", ErrMissing, r)
		}
	}
	jars, err := jarClosure(roots)
	if err != nil {
		return nil, err
	}
	cp := strings.Join(jars, string(os.PathListSeparator))
	src, err := writeSource("java/Holder.java")
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(src)
	if _, err := os.Stat(filepath.Join(dir, "Holder.class")); err != nil {
		// Compiled into a directory of its own and renamed into place:
		// two test processes may compile at once.
		tmp, err := os.MkdirTemp(dir, "classes")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		cmd := exec.CommandContext(ctx, javac, "-nowarn", "-cp", cp, "-d", tmp, src)
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("interop: javac Holder.java: %v\n%s", err, out)
		}
		entries, err := os.ReadDir(tmp)
		if err != nil {
			return nil, err
		}
		// Inner classes first, Holder.class last: its presence says
		// the compile is complete.
		sort.Slice(entries, func(i, j int) bool { return entries[j].Name() == "Holder.class" })
		for _, e := range entries {
			if err := os.Rename(filepath.Join(tmp, e.Name()), filepath.Join(dir, e.Name())); err != nil {
				return nil, err
			}
		}
	}
	return &Curator{Java: java, Classpath: dir + string(os.PathListSeparator) + cp}, nil
}

// jarClosure is zkjava.JarClosure.
func jarClosure(roots []string) ([]string, error) { return zkjava.JarClosure(roots) }

// Holder returns a Curator holder of recipe (mutex, write, read, latch,
// selector) on the znode path, connecting to connect.
func (c *Curator) Holder(connect, path, recipe string) Holder {
	return newProc("curator "+recipe, true, c.Java, "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", c.Classpath, "Holder", connect, path, recipe)
}

// Kazoo is the kazoo holder: the system Python and holder.py.
type Kazoo struct {
	Python string // SystemPython
	Script string // holder.py, written out of this package's sources
}

// FindKazoo checks that the system Python has kazoo and returns how to
// run the holder, or an error matching ErrMissing.
func FindKazoo(ctx context.Context) (*Kazoo, error) {
	if _, err := os.Stat(SystemPython); err != nil {
		return nil, fmt.Errorf("%w: no %s (apt-get install python3-kazoo)", ErrMissing, SystemPython)
	}
	if out, err := exec.CommandContext(ctx, SystemPython, "-c", "import kazoo").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%w: %s cannot import kazoo (apt-get install python3-kazoo): %s", ErrMissing, SystemPython, out)
	}
	script, err := writeSource("python/holder.py")
	if err != nil {
		return nil, err
	}
	return &Kazoo{Python: SystemPython, Script: script}, nil
}

// Holder returns a kazoo holder of recipe (lock, write, read, election)
// on the znode path.
func (k *Kazoo) Holder(hosts, path, recipe string) Holder {
	return newProc("kazoo "+recipe, true, k.Python, "-u", k.Script, hosts, path, recipe)
}

// Etcdctl is an etcdctl binary, at Path.
type Etcdctl struct{ Path string }

var (
	etcdctlOnce sync.Once
	etcdctl     *Etcdctl
	etcdctlErr  error
)

// FindEtcdctl returns etcdctl: $DISTLOCK_ETCDCTL, else bin/etcdctl of
// the checkout (where scripts/interop-deps.sh installs it), else one the
// harness's cache holds for the etcd version this module requires, which
// it builds from the Go module proxy (as the harness builds the etcd
// server) when missing.
func FindEtcdctl(ctx context.Context) (*Etcdctl, error) {
	etcdctlOnce.Do(func() { etcdctl, etcdctlErr = findEtcdctl(ctx) })
	return etcdctl, etcdctlErr
}

func findEtcdctl(ctx context.Context) (*Etcdctl, error) {
	if p := os.Getenv("DISTLOCK_ETCDCTL"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("%w: DISTLOCK_ETCDCTL=%s: %v", ErrMissing, p, err)
		}
		return &Etcdctl{Path: p}, nil
	}
	if p := filepath.Join(repoRoot(), "bin", "etcdctl"); fileExists(p) {
		return &Etcdctl{Path: p}, nil
	}
	v := EtcdVersion()
	if v == "" {
		return nil, fmt.Errorf("%w: no etcdctl, and no etcd version in this binary's build info to build one", ErrMissing)
	}
	dir, err := cacheDir()
	if err != nil {
		return nil, err
	}
	dir = filepath.Join(dir, "etcdctl-"+v)
	p := filepath.Join(dir, "etcdctl")
	if fileExists(p) {
		return &Etcdctl{Path: p}, nil
	}
	if err := buildEtcdctl(ctx, v, p); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMissing, err)
	}
	return &Etcdctl{Path: p}, nil
}

// buildEtcdctl builds etcdctl at version v into out. etcdctl's go.mod has
// replace directives, so `go install etcdctl@v` refuses it: it is built
// as a dependency instead, of the tests module when that requires v (no
// download), else of a scratch module that requires it.
func buildEtcdctl(ctx context.Context, v, out string) error {
	const pkg = "go.etcd.io/etcd/etcdctl/v3"
	run := func(dir string, args ...string) error {
		cmd := exec.CommandContext(ctx, goTool(), args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod", "GOWORK=off")
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, b)
		}
		return nil
	}
	tmp := fmt.Sprintf("%s.%d.tmp", out, os.Getpid())
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	tests := filepath.Join(repoRoot(), "tests")
	cmd := exec.CommandContext(ctx, goTool(), "list", "-m", "-f", "{{.Version}}", pkg)
	cmd.Dir = tests
	if b, err := cmd.Output(); err == nil && strings.TrimSpace(string(b)) == v {
		if err := run(tests, "build", "-mod=readonly", "-o", tmp, pkg); err == nil {
			return os.Rename(tmp, out)
		}
	}
	dir, err := os.MkdirTemp("", "etcdctl-build")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module etcdctlbuild\n"), 0o644); err != nil {
		return err
	}
	if err := run(dir, "get", pkg+"@"+v); err != nil {
		return err
	}
	if err := run(dir, "build", "-o", tmp, pkg); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

// EtcdVersion is the version of etcd's server module that the harness
// module requires: the version its etcd server is built at. It asks the
// go command in the harness module's directory, as the harness's build
// of the server does; a binary with no checkout behind it falls back to
// the etcd client linked into it.
func EtcdVersion() string {
	cmd := exec.Command(goTool(), "list", "-m", "-f", "{{.Version}}", "go.etcd.io/etcd/server/v3")
	cmd.Dir = filepath.Join(repoRoot(), "integration")
	if out, err := cmd.Output(); err == nil {
		if v := strings.TrimSpace(string(out)); v != "" {
			return v
		}
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == "go.etcd.io/etcd/client/v3" {
				return m.Version
			}
		}
	}
	return ""
}

// Lock returns an etcdctl lock holder of name (etcdctl lock).
func (e *Etcdctl) Lock(endpoints []string, name string) Holder {
	return newProc("etcdctl lock", false, e.Path, "--endpoints="+strings.Join(endpoints, ","), "lock", name)
}

// Elect returns an etcdctl election candidate of name (etcdctl elect).
func (e *Etcdctl) Elect(endpoints []string, name string) Holder {
	return newProc("etcdctl elect", false, e.Path, "--endpoints="+strings.Join(endpoints, ","), "elect", name, "etcdctl")
}

// repoRoot is the checkout's root: this file sits in integration/interop.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(filepath.Dir(file)))
}

func goTool() string { return toolcache.GoTool() }

func fileExists(p string) bool { return toolcache.FileExists(p) }
