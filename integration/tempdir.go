package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

const tempPrefix = "distlock-it-"

// makeTempDir creates a cluster's directory, named after this process, and
// first removes the directories of harness processes that are gone: an
// interrupted run cannot clean up after itself (its servers die with it
// through Pdeathsig), so the next one does.
func makeTempDir(kind string) (string, error) {
	old, _ := filepath.Glob(filepath.Join(os.TempDir(), tempPrefix+"*"))
	for _, d := range old {
		rest := strings.TrimPrefix(filepath.Base(d), tempPrefix)
		pid, err := strconv.Atoi(strings.SplitN(rest, "-", 2)[0])
		if err == nil && pid != os.Getpid() && !alive(pid) {
			os.RemoveAll(d)
		}
	}
	return os.MkdirTemp("", fmt.Sprintf("%s%d-%s-", tempPrefix, os.Getpid(), kind))
}

func alive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}
