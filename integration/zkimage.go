package integration

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// The ZooKeeper image (images/zookeeper/Dockerfile) is FROM scratch: the
// harness puts in this machine's Java and Debian's ZooKeeper jars, at the
// paths they have here, so that java's arguments, classpath included, mean
// the same inside a container as outside (container.go).

const (
	// javaHome is the Java runtime that the ZooKeeper image carries, at
	// the same path as on this machine (Debian's openjdk-17-jre-headless).
	javaHome = "/usr/lib/jvm/java-17-openjdk-amd64"
	// zooKeeperJar is Debian's ZooKeeper jar (libzookeeper-java); its
	// manifest's Class-Path names its dependencies.
	zooKeeperJar = "/usr/share/java/zookeeper.jar"
)

// zooKeeperExtraJars go into the ZooKeeper image beside zookeeper.jar's
// own dependencies: slf4j bindings and log4j 1.2, so that a server's
// classpath can choose where ZooKeeper logs (Debian's classpath has only
// slf4j-api, which logs nothing). Those missing here are left out.
var zooKeeperExtraJars = []string{
	"/usr/share/java/slf4j-simple.jar",
	"/usr/share/java/slf4j-nop.jar",
	"/usr/share/java/slf4j-jdk14.jar",
	"/usr/share/java/slf4j-log4j12.jar",
	"/usr/share/java/log4j-1.2.jar",
}

// zooKeeperContext is the ZooKeeper image's context: this machine's Java
// 17, the shared libraries it links, and Debian's ZooKeeper jars.
func zooKeeperContext() (*buildContext, error) {
	if _, err := os.Stat(filepath.Join(javaHome, "bin", "java")); err != nil {
		return nil, fmt.Errorf("integration: the ZooKeeper image needs Java 17 at %s (Debian's openjdk-17-jre-headless): %w", javaHome, err)
	}
	if _, err := os.Stat(zooKeeperJar); err != nil {
		return nil, fmt.Errorf("integration: the ZooKeeper image needs Debian's ZooKeeper (package zookeeper): %w", err)
	}
	b := newBuildContext(zooKeeperDockerfile)
	jdk, err := filepath.EvalSymlinks(javaHome)
	if err != nil {
		return nil, err
	}
	inJDK := func(p string) bool {
		r, err := filepath.EvalSymlinks(p)
		return err == nil && (r == jdk || strings.HasPrefix(r, jdk+"/"))
	}
	// The libraries java and the JVM link: a JDK library goes into the
	// image only if it needs nothing beyond them, which leaves out the
	// desktop ones (X11, fonts, sound, smart cards) a server never loads.
	core := map[string]bool{}
	for _, p := range []string{filepath.Join(jdk, "bin", "java"), filepath.Join(jdk, "lib", "server", "libjvm.so")} {
		deps, err := ldd(p)
		if err != nil {
			return nil, err
		}
		for _, d := range deps {
			if !inJDK(d) {
				core[d] = true
			}
		}
	}
	var elves []string // ELF files in the image, whose libraries it needs
	skip := func(p string, dir bool) bool {
		switch rel, _ := filepath.Rel(jdk, p); rel {
		case "lib/src.zip", "lib/ct.sym": // sources, javac's symbols
			return true
		}
		if dir || !strings.HasSuffix(p, ".so") {
			return false
		}
		deps, err := ldd(p)
		if err != nil {
			return true
		}
		for _, d := range deps {
			if !inJDK(d) && !core[d] {
				return true
			}
		}
		elves = append(elves, p)
		return false
	}
	if err := b.addFile(javaHome+"/bin/java", filepath.Join(jdk, "bin", "java")); err != nil {
		return nil, err
	}
	elves = append(elves, filepath.Join(jdk, "bin", "java"))
	for _, d := range []string{"conf", "lib"} {
		if err := b.addTree(javaHome+"/"+d, filepath.Join(jdk, d), skip); err != nil {
			return nil, err
		}
	}
	if err := b.addFile(javaHome+"/release", filepath.Join(jdk, "release")); err != nil {
		return nil, err
	}
	b.addLink("/usr/bin/java", javaHome+"/bin/java")
	libs := map[string]bool{}
	for _, p := range elves {
		deps, err := ldd(p)
		if err != nil {
			return nil, err
		}
		for _, d := range deps {
			if !inJDK(d) {
				libs[d] = true
			}
		}
	}
	for l := range libs {
		// At the path ldd gives, which is where the loader looks.
		if err := b.addFile(l, l); err != nil {
			return nil, err
		}
	}
	// The jars: zookeeper.jar, what its manifest names, loggers.
	jars, err := jarClosure(append([]string{zooKeeperJar}, zooKeeperExtraJars...))
	if err != nil {
		return nil, err
	}
	for _, j := range jars {
		if err := b.addFile(j, j); err != nil {
			return nil, err
		}
	}
	if fileExists("/etc/zookeeper/conf") {
		if err := b.addTree("/etc/zookeeper/conf", "/etc/zookeeper/conf", nil); err != nil {
			return nil, err
		}
	}
	b.addData("/etc/passwd", 0o644, "root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
	b.addData("/etc/group", 0o644, "root:x:0:\nnogroup:x:65534:\n")
	// Names resolve from /etc/hosts first (the engine gives a host-network
	// container the host's), as on the host.
	b.addData("/etc/nsswitch.conf", 0o644, "passwd: files\ngroup: files\nhosts: files dns\n")
	b.addDir("/tmp", fs.ModeSticky|0o777)
	b.addDir("/root", 0o700)
	return b, nil
}

var lddCache sync.Map // path -> []string

// ldd returns the shared libraries (and the dynamic loader) that the ELF
// file p loads, transitively, as ldd resolves them on this machine.
// Libraries ldd cannot find are left out: the JDK's libraries name
// libjvm.so, which the JVM has loaded before them.
func ldd(p string) ([]string, error) {
	if v, ok := lddCache.Load(p); ok {
		return v.([]string), nil
	}
	out, err := exec.Command("ldd", p).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && bytes.Contains(append(out, ee.Stderr...), []byte("not a dynamic executable")) {
			lddCache.Store(p, []string(nil))
			return nil, nil // static
		}
		return nil, fmt.Errorf("integration: ldd %s: %w\n%s", p, err, out)
	}
	var deps []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if _, after, ok := strings.Cut(line, "=> "); ok {
			line = after
		}
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], "/") {
			continue // linux-vdso.so.1, or "not found"
		}
		deps = append(deps, f[0])
	}
	lddCache.Store(p, deps)
	return deps, nil
}
