package integration

import (
	"fmt"
	"path/filepath"
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

// jarClosure is zkjava.JarClosure, its errors named after this package.
func jarClosure(roots []string) ([]string, error) {
	jars, err := zkjava.JarClosure(roots)
	if err != nil {
		return nil, fmt.Errorf("integration: %w", err)
	}
	return jars, nil
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
