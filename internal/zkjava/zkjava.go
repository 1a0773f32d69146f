// Package zkjava finds Java and the ZooKeeper server's jars on this
// machine, for package integration's ensembles and package embedded's
// single server.
package zkjava

import (
	"archive/zip"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// Java finds java: $JAVA_HOME/bin/java, else java on PATH.
func Java() (string, error) {
	if home := os.Getenv("JAVA_HOME"); home != "" {
		if p := filepath.Join(home, "bin", "java"); fileExists(p) {
			return p, nil
		}
	}
	p, err := exec.LookPath("java")
	if err != nil {
		return "", errors.New("ZooKeeper needs Java: no java on PATH (nor in $JAVA_HOME/bin); " +
			"install it with `apt-get install zookeeper` (which brings a JRE) or `apt-get install default-jre-headless`")
	}
	return p, nil
}

// Debian's ZooKeeper package (zookeeper, libzookeeper-java) puts the jars
// here; zookeeper.jar's manifest names the jars it needs.
const debianJavaDir = "/usr/share/java"

// Classpath returns the Java classpath that runs the ZooKeeper
// server:
//
//   - $ZOOKEEPER_CLASSPATH, as given;
//   - else every jar in $ZOOKEEPER_HOME/lib, or in $ZOOKEEPER_HOME itself
//     (an Apache release's lib/ directory);
//   - else Debian's zookeeper package: /usr/share/java/zookeeper.jar, whose
//     manifest lists its dependencies, and the slf4j-log4j12 binding and
//     log4j 1.2 that the package logs with.
//
// It fails, saying what is missing, when the jars are not there.
func Classpath() (string, error) {
	const install = "install ZooKeeper with `apt-get install zookeeper`, or set ZOOKEEPER_HOME to a directory " +
		"with the ZooKeeper jars (an Apache release's lib/), or ZOOKEEPER_CLASSPATH to a Java classpath that has them"
	if cp := os.Getenv("ZOOKEEPER_CLASSPATH"); cp != "" {
		var missing []string
		for _, p := range filepath.SplitList(cp) {
			if p != "" && !strings.HasSuffix(p, "*") && !fileExists(p) {
				missing = append(missing, p)
			}
		}
		if len(missing) > 0 {
			return "", fmt.Errorf("ZOOKEEPER_CLASSPATH names files that do not exist: %s", strings.Join(missing, ", "))
		}
		return cp, nil
	}
	if home := os.Getenv("ZOOKEEPER_HOME"); home != "" {
		for _, dir := range []string{filepath.Join(home, "lib"), home} {
			jars, _ := filepath.Glob(filepath.Join(dir, "*.jar"))
			if hasJar(jars, "zookeeper") && hasJar(jars, "zookeeper-jute") {
				sort.Strings(jars)
				return strings.Join(jars, string(filepath.ListSeparator)), nil
			}
		}
		return "", fmt.Errorf("ZOOKEEPER_HOME=%s: neither it nor its lib/ holds zookeeper-*.jar and zookeeper-jute-*.jar; %s", home, install)
	}
	main := filepath.Join(debianJavaDir, "zookeeper.jar")
	if !fileExists(main) {
		return "", fmt.Errorf("ZooKeeper not found: %s is missing; %s", main, install)
	}
	deps, err := JarClassPath(main)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", main, err)
	}
	// The JVM skips a Class-Path entry that is missing, and a server
	// needs only some of them (jline is for the CLI, Jetty and Jackson for
	// the admin server): require those it cannot start without.
	var missing []string
	for _, d := range append(deps, filepath.Join(debianJavaDir, "zookeeper-jute.jar")) {
		b := filepath.Base(d)
		needed := b == "zookeeper-jute.jar" || b == "slf4j-api.jar" || strings.HasPrefix(b, "netty-")
		if needed && !fileExists(d) {
			missing = append(missing, d)
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("ZooKeeper's jars are incomplete, missing: %s; %s", strings.Join(missing, ", "), install)
	}
	cp := []string{main}
	// The server logs through slf4j; without a binding it runs silently.
	for _, j := range []string{"slf4j-log4j12.jar", "log4j-1.2.jar"} {
		if p := filepath.Join(debianJavaDir, j); fileExists(p) {
			cp = append(cp, p)
		}
	}
	return strings.Join(cp, string(filepath.ListSeparator)), nil
}

// hasJar reports whether jars holds name.jar or name-<version>.jar.
func hasJar(jars []string, name string) bool {
	for _, j := range jars {
		b := strings.TrimSuffix(filepath.Base(j), ".jar")
		if b == name {
			return true
		}
		if v, ok := strings.CutPrefix(b, name+"-"); ok && v != "" && v[0] >= '0' && v[0] <= '9' {
			return true
		}
	}
	return false
}

// JarClassPath returns the Class-Path of a jar's manifest (none when the
// jar has no manifest), each entry as an absolute path: entries are URLs,
// relative to the jar's directory unless absolute.
func JarClassPath(jar string) ([]string, error) {
	zr, err := zip.OpenReader(jar)
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	var mf []byte
	for _, f := range zr.File {
		if strings.EqualFold(f.Name, "META-INF/MANIFEST.MF") {
			rc, err := f.Open()
			if err != nil {
				return nil, err
			}
			mf, err = io.ReadAll(rc)
			rc.Close()
			if err != nil {
				return nil, err
			}
			break
		}
	}
	// Manifest lines are wrapped at 72 bytes: a line that starts with one
	// space goes on the one before.
	var lines []string
	for _, l := range strings.Split(strings.ReplaceAll(string(mf), "\r\n", "\n"), "\n") {
		if strings.HasPrefix(l, " ") && len(lines) > 0 {
			lines[len(lines)-1] += l[1:]
			continue
		}
		lines = append(lines, l)
	}
	var out []string
	for _, l := range lines {
		v, ok := strings.CutPrefix(l, "Class-Path:")
		if !ok {
			continue
		}
		for _, e := range strings.Fields(v) {
			e = strings.TrimPrefix(e, "file:")
			if !filepath.IsAbs(e) {
				e = filepath.Join(filepath.Dir(jar), e)
			}
			out = append(out, filepath.Clean(e))
		}
	}
	return out, nil
}

// JarClosure returns, sorted, the jars among roots that exist and,
// transitively, those their manifests' Class-Path names (Debian's jars
// name their dependencies so).
func JarClosure(roots []string) ([]string, error) {
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
		cp, err := JarClassPath(j)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", j, err)
		}
		queue = append(queue, cp...)
	}
	sort.Strings(out)
	return out, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
