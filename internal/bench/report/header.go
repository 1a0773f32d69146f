package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"
)

// provenance is what the header says about where and from what the
// numbers came.
type provenance struct {
	Date              string
	CPU               string
	Cores             int
	Kernel            string
	Commit            string
	Dirty             bool
	Go, Etcd, ZK      string
	Runs              int
	Quick             bool
	GeneratedCommands string
}

// machine reads the CPU model and the number of logical cores from
// /proc/cpuinfo, and the kernel release, best effort.
func machine() (cpu string, cores int, kernel string) {
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if !ok {
				continue
			}
			switch strings.TrimSpace(k) {
			case "processor":
				cores++
			case "model name":
				if cpu == "" {
					cpu = strings.Join(strings.Fields(v), " ")
				}
			}
		}
	}
	if cores == 0 {
		cores = runtime.NumCPU()
	}
	if out, err := exec.Command("uname", "-r").Output(); err == nil {
		kernel = strings.TrimSpace(string(out))
	}
	return cpu, cores, kernel
}

// gitState returns the short commit and whether the work tree differs
// from it, the report's own outputs (excluded) aside: they change with
// every run.
func gitState(exclude ...string) (commit string, dirty bool) {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "", false
	}
	commit = strings.TrimSpace(string(out))
	args := []string{"status", "--porcelain", "--untracked-files=no", "--", "."}
	for _, e := range exclude {
		// Paths outside the work tree are not its business (and git
		// refuses them in a pathspec).
		if rel, err := filepath.Rel(".", e); e != "" && err == nil && !strings.HasPrefix(rel, "..") {
			args = append(args, ":(exclude)"+rel)
		}
	}
	st, err := exec.Command("git", args...).Output()
	return commit, err == nil && len(bytes.TrimSpace(st)) > 0
}

var requireRE = regexp.MustCompile(`(?m)^\s*go\.etcd\.io/etcd/server/v3\s+(v\S+)`)

// etcdVersion is the etcd server version gomod (the harness module's,
// integration/go.mod) requires: the harness builds the member processes
// from it.
func etcdVersion(gomod string) string {
	b, err := os.ReadFile(gomod)
	if err != nil {
		return ""
	}
	if m := requireRE.FindSubmatch(b); m != nil {
		return string(m[1])
	}
	return ""
}

// zkVersion is the installed Debian zookeeper package's version, which
// the harness runs unless ZOOKEEPER_HOME points elsewhere.
func zkVersion() string {
	if os.Getenv("ZOOKEEPER_HOME") != "" {
		return ""
	}
	out, err := exec.Command("dpkg-query", "-W", "-f=${Version}", "zookeeper").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// header renders the provenance as a short markdown paragraph.
func (p provenance) header() string {
	var b strings.Builder
	commit := p.Commit
	if commit == "" {
		commit = "unknown"
	}
	fmt.Fprintf(&b, "Generated %s from commit `%s`", p.Date, commit)
	if p.Dirty {
		b.WriteString(" with uncommitted changes")
	}
	switch {
	case p.Runs == 1:
		b.WriteString("; each benchmark ran once")
	case p.Runs > 1:
		fmt.Fprintf(&b, "; each benchmark ran %d times, and each cell is the median over runs with [min–max]", p.Runs)
	}
	b.WriteString(".")
	if p.Quick {
		b.WriteString(" **Quick run (BENCH_QUICK)**: fewer iterations, no deepest queues or 32 contenders; not the numbers to quote.")
	}
	b.WriteString("\n\n")
	var m []string
	if p.CPU != "" {
		m = append(m, p.CPU)
	}
	if p.Cores > 0 {
		m = append(m, fmt.Sprintf("%d cores", p.Cores))
	}
	if p.Kernel != "" {
		m = append(m, "Linux "+p.Kernel)
	}
	var v []string
	for _, s := range [][2]string{{"Go", p.Go}, {"etcd", p.Etcd}, {"ZooKeeper", p.ZK}} {
		if s[1] != "" {
			v = append(v, s[0]+" "+s[1])
		}
	}
	fmt.Fprintf(&b, "Machine: %s. Versions: %s.\n", strings.Join(m, ", "), strings.Join(v, ", "))
	return b.String()
}

func today() string { return time.Now().UTC().Format("2006-01-02") }
