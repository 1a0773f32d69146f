package testserve

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/distlock/distlock/internal/toolcache"
)

// BinaryEnv names a prebuilt testservers binary; make test builds it once
// for every package instead of each test binary building it.
const BinaryEnv = "DISTLOCK_TESTSERVERS"

// cmdDir is the command's directory below the repository's root.
const cmdDir = "integration/cmd/testservers"

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// binary returns the testservers binary: $DISTLOCK_TESTSERVERS, or one
// built once per process from this checkout's integration module into
// the harness's cache directory (the go command's cache makes a rebuild
// of unchanged sources a link step).
func binary() (string, error) {
	if p := os.Getenv(BinaryEnv); p != "" {
		return p, nil
	}
	buildOnce.Do(func() { buildPath, buildErr = build() })
	return buildPath, buildErr
}

func build() (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	// One directory per checkout: two worktrees must not run each other's
	// binaries.
	sum := sha256.Sum256([]byte(root))
	dir, err := toolcache.Dir(hex.EncodeToString(sum[:6]))
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "testservers")
	// Built under a name of its own and renamed into place: test binaries
	// of several packages may build at once, or run the previous binary.
	tmp := fmt.Sprintf("%s.%d.tmp", out, os.Getpid())
	cmd := exec.Command(toolcache.GoTool(), "build", "-o", tmp, ".")
	cmd.Dir = filepath.Join(root, cmdDir)
	if b, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("go build %s: %v\n%s", cmdDir, err, b)
	}
	return out, os.Rename(tmp, out)
}

// repoRoot finds the checkout's root: above this source file, or else
// above the test's working directory (a package directory of the
// checkout), the first directory that holds the command.
func repoRoot() (string, error) {
	var starts []string
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	for _, d := range starts {
		for ; ; d = filepath.Dir(d) {
			if fi, err := os.Stat(filepath.Join(d, cmdDir)); err == nil && fi.IsDir() {
				return d, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return "", errors.New("no " + cmdDir + " above this package: run the tests from a checkout of distlock, or set " + BinaryEnv)
}
