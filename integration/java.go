package integration

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/distlock/distlock/internal/zkjava"
)

// Java for ZooKeeper: where java and the ZooKeeper jars are on this
// machine, and the classpaths that jar manifests and java's arguments name.

// javaBinary finds java (see zkjava.Java).
func javaBinary() (string, error) {
	p, err := zkjava.Java()
	if err != nil {
		return "", fmt.Errorf("integration: %w", err)
	}
	return p, nil
}

// zooKeeperClasspath returns the Java classpath that runs the ZooKeeper
// server (see zkjava.Classpath).
func zooKeeperClasspath() (string, error) {
	cp, err := zkjava.Classpath()
	if err != nil {
		return "", fmt.Errorf("integration: %w", err)
	}
	return cp, nil
}

// jarClosure returns the jars among roots that exist and, transitively,
// those that their manifests' Class-Path names.
func jarClosure(roots []string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	queue := append([]string(nil), roots...)
	for len(queue) > 0 {
		j := queue[0]
		queue = queue[1:]
		if seen[j] {
			continue
		}
		seen[j] = true
		if !fileExists(j) {
			continue // as the JVM, which skips a missing Class-Path entry
		}
		out = append(out, j)
		cp, err := zkjava.JarClassPath(j)
		if err != nil {
			return nil, fmt.Errorf("integration: %s: %w", j, err)
		}
		queue = append(queue, cp...)
	}
	sort.Strings(out)
	return out, nil
}

// javaClasspath returns the classpath entries of java's arguments (or of
// CLASSPATH in env when they name none).
func javaClasspath(args, env []string) []string {
	var cp []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case (a == "-cp" || a == "-classpath" || a == "--class-path") && i+1 < len(args):
			cp = append(cp, filepath.SplitList(args[i+1])...)
			i++
		case strings.HasPrefix(a, "--class-path="):
			cp = append(cp, filepath.SplitList(strings.TrimPrefix(a, "--class-path="))...)
		case !strings.HasPrefix(a, "-"):
			// The main class: what follows is the program's.
			if cp == nil {
				for _, kv := range env {
					if v, ok := strings.CutPrefix(kv, "CLASSPATH="); ok {
						cp = filepath.SplitList(v)
					}
				}
			}
			return cp
		}
	}
	return cp
}
