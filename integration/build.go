package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/distlock/distlock/internal/toolcache"
)

// ModulePath is the repository's root module's import path; the harness
// builds its helper binaries from the packages below it, in whichever of
// the repository's modules holds each.
const ModulePath = "github.com/distlock/distlock"

var (
	buildMu    sync.Mutex
	buildCache = map[string]string{}
)

// buildBinary builds the main package pkg (a path below ModulePath) into
// the harness's cache directory and returns the binary's path. The go
// command's own cache makes a rebuild of an unchanged package a link step;
// within one process each package is built once. Static (CGO_ENABLED=0),
// so the same binary also runs in a FROM scratch container.
func buildBinary(ctx context.Context, pkg string) (string, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := buildCache[pkg]; ok {
		return p, nil
	}
	dir, err := cacheDir()
	if err != nil {
		return "", err
	}
	// One directory per source tree: two checkouts (or worktrees) built
	// side by side must not run each other's binaries.
	root := sha256.Sum256([]byte(moduleRoot()))
	dir = filepath.Join(dir, hex.EncodeToString(root[:6]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	out := filepath.Join(dir, filepath.Base(pkg))
	// Built under a name of its own and renamed into place: test binaries
	// of several packages build at once, and one may be running the
	// previous binary.
	tmp := fmt.Sprintf("%s.%d.tmp", out, os.Getpid())
	modDir, rel := moduleOf(pkg)
	cmd := exec.CommandContext(ctx, goTool(), "build", "-o", tmp, "./"+rel)
	// From the source tree of the package's own module (the root's, this
	// one's or the command's: the checkout holds them side by side), so the
	// build does not depend on the caller's working directory.
	cmd.Dir = modDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("integration: go build %s: %v\n%s", pkg, err, b)
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", err
	}
	buildCache[pkg] = out
	return out, nil
}

// moduleRoot is the directory of the repository's root module: build.go
// sits in integration/ right below it.
func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// moduleOf returns the directory of the module that holds pkg (a path
// below ModulePath: the nearest directory at or above it with a go.mod)
// and pkg's path relative to it.
func moduleOf(pkg string) (dir, rel string) {
	root := moduleRoot()
	for d := pkg; d != "." && d != "/"; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(root, d, "go.mod")); err == nil {
			r, _ := filepath.Rel(d, pkg)
			return filepath.Join(root, d), r
		}
	}
	return root, pkg
}

// cacheDir is where built binaries live (toolcache.Dir).
func cacheDir() (string, error) { return toolcache.Dir("") }

func goTool() string { return toolcache.GoTool() }

func fileExists(p string) bool { return toolcache.FileExists(p) }
