// Package toolcache is where the test harnesses keep what they build or
// compile (servers, the interop suite's foreign clients), and the go
// command they build with.
package toolcache

import (
	"os"
	"path/filepath"
	"runtime"
)

// Dir returns the directory sub of the cache, made if missing:
// $DISTLOCK_CACHE/sub, or distlock/sub in the user's cache directory.
// An empty sub is the cache itself.
func Dir(sub string) (string, error) {
	dir := os.Getenv("DISTLOCK_CACHE")
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(base, "distlock")
	}
	dir = filepath.Join(dir, sub)
	return dir, os.MkdirAll(dir, 0o755)
}

// GoTool returns the go command of the running toolchain ($GOROOT/bin/go,
// from the environment or the toolchain's own) when it exists, else "go"
// on PATH.
func GoTool() string {
	for _, root := range []string{os.Getenv("GOROOT"), runtime.GOROOT()} {
		if root == "" {
			continue
		}
		if p := filepath.Join(root, "bin", "go"); FileExists(p) {
			return p
		}
	}
	return "go"
}

// FileExists reports whether p names an existing file.
func FileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
