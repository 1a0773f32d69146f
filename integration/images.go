package integration

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/client"
)

// The Containers provider runs servers in images that the harness builds
// here, on this machine, from the project's Dockerfiles (images/*/
// Dockerfile) and a build context that it assembles from files of this
// machine: the engine has no registry to pull from, so no Dockerfile names
// a registry image (both are FROM scratch). An image is tagged with a hash
// of everything that goes into it, so it is built once, reused by every
// later run while its inputs stay the same, and rebuilt when they change.

//go:embed images/etcd/Dockerfile
var etcdDockerfile []byte

//go:embed images/zookeeper/Dockerfile
var zooKeeperDockerfile []byte

type imageKind string

const (
	etcdImage      imageKind = "etcd"
	zooKeeperImage imageKind = "zookeeper"

	// imageRepo prefixes the harness's image names:
	// distlock-integration/etcd:<hash>.
	imageRepo = "distlock-integration/"
	// labelImage marks the harness's images with their kind.
	labelImage = "distlock.integration.image"

	// javaHome is the Java runtime that the ZooKeeper image carries, at
	// the same path as on this machine (Debian's openjdk-17-jre-headless).
	javaHome = "/usr/lib/jvm/java-17-openjdk-amd64"
	// zooKeeperJar is Debian's ZooKeeper jar (libzookeeper-java); its
	// manifest's Class-Path names its dependencies.
	zooKeeperJar = "/usr/share/java/zookeeper.jar"
	// etcdEntrypoint is the etcd server's path in the etcd image.
	etcdEntrypoint = "/usr/local/bin/etcd"
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

// builtImage is an image that exists in the engine.
type builtImage struct {
	kind imageKind
	ref  string          // repository:tag
	size int64           // bytes, as the engine reports it
	has  map[string]bool // the image's file paths (absolute), for classpath checks
}

// ContainerImage makes sure the image that the Containers provider runs
// for kind ("etcd" or "zookeeper") exists in the Docker engine, building
// it first when needed, and returns its reference. Tests call it to
// measure or warm the build; clusters build their images themselves.
func ContainerImage(ctx context.Context, kind string) (string, error) {
	var img *builtImage
	var err error
	switch imageKind(kind) {
	case etcdImage:
		var bin string
		if bin, err = buildBinary(ctx, "integration/internal/etcdserver"); err != nil {
			return "", err
		}
		img, err = ensureImage(ctx, etcdImage, bin, nil)
	case zooKeeperImage:
		img, err = ensureImage(ctx, zooKeeperImage, "", nil)
	default:
		return "", fmt.Errorf("integration: no container image for %q (etcd, zookeeper)", kind)
	}
	if err != nil {
		return "", err
	}
	return img.ref, nil
}

var images struct {
	mu    sync.Mutex
	built map[string]*builtImage // by kind and input
}

// ensureImage returns the image of kind, building it if the engine lacks
// it. For etcd, bin is the server binary the image carries. logf, when not
// nil, hears what happens.
func ensureImage(ctx context.Context, kind imageKind, bin string, logf func(msg string, args ...any)) (*builtImage, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	images.mu.Lock()
	defer images.mu.Unlock()
	key := string(kind) + "\x00" + bin
	if img, ok := images.built[key]; ok {
		return img, nil
	}
	cli, err := dockerClient(ctx)
	if err != nil {
		return nil, err
	}
	var bc *buildContext
	switch kind {
	case etcdImage:
		bc, err = etcdContext(bin)
	case zooKeeperImage:
		bc, err = zooKeeperContext()
	default:
		err = fmt.Errorf("integration: unknown image kind %q", kind)
	}
	if err != nil {
		return nil, err
	}
	sum, err := bc.hash()
	if err != nil {
		return nil, err
	}
	ref := imageRepo + string(kind) + ":" + sum[:20]
	img := &builtImage{kind: kind, ref: ref, has: bc.imagePaths()}
	inspect, err := cli.ImageInspect(ctx, ref)
	if err != nil && !cerrdefs.IsNotFound(err) {
		return nil, fmt.Errorf("integration: inspect image %s: %w", ref, err)
	}
	if err != nil {
		start := time.Now()
		logf("integration: building image", "image", ref, "files", len(bc.entries))
		if err := bc.build(ctx, cli, ref, kind); err != nil {
			return nil, err
		}
		if inspect, err = cli.ImageInspect(ctx, ref); err != nil {
			return nil, fmt.Errorf("integration: image %s not there after its build: %w", ref, err)
		}
		logf("integration: built image", "image", ref, "size", inspect.Size, "took", time.Since(start).Round(time.Millisecond))
		pruneImages(ctx, cli, kind, ref, logf)
	}
	img.size = inspect.Size
	if images.built == nil {
		images.built = map[string]*builtImage{}
	}
	images.built[key] = img
	return img, nil
}

// pruneImages removes the harness's other images of kind, built from
// inputs that have since changed. An image that a container still uses
// stays (the removal is not forced).
func pruneImages(ctx context.Context, cli *client.Client, kind imageKind, keep string, logf func(string, ...any)) {
	list, err := cli.ImageList(ctx, client.ImageListOptions{
		Filters: make(client.Filters).Add("label", labelImage+"="+string(kind)),
	})
	if err != nil {
		return
	}
	for _, im := range list.Items {
		if containsString(im.RepoTags, keep) {
			continue
		}
		if _, err := cli.ImageRemove(ctx, im.ID, client.ImageRemoveOptions{PruneChildren: true}); err == nil {
			logf("integration: removed outdated image", "image", strings.Join(im.RepoTags, ","))
		}
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// A buildContext is the files that docker build gets: the Dockerfile and
// rootfs/, the tree the image's COPY takes whole.
type buildContext struct {
	entries map[string]*ctxEntry // by name
}

// ctxEntry is one file, directory or symlink of a build context.
type ctxEntry struct {
	name string      // slash-separated path in the context
	mode fs.FileMode // permissions, with fs.ModeDir or fs.ModeSymlink
	src  string      // for files: the host file with the content
	data []byte      // for files: the content, when src is ""
	link string      // for symlinks: the target
}

func newBuildContext(dockerfile []byte) *buildContext {
	b := &buildContext{entries: map[string]*ctxEntry{}}
	b.add(&ctxEntry{name: "Dockerfile", mode: 0o644, data: dockerfile})
	return b
}

// add puts e in the context, with any parent directories it lacks.
func (b *buildContext) add(e *ctxEntry) {
	for dir := path.Dir(e.name); dir != "." && dir != "/"; dir = path.Dir(dir) {
		if _, ok := b.entries[dir]; ok {
			break
		}
		b.entries[dir] = &ctxEntry{name: dir, mode: fs.ModeDir | 0o755}
	}
	b.entries[e.name] = e
}

// addFile puts the host file src at the image path dst (absolute), with
// the content and permissions of the file src resolves to: symlinks on the
// host become plain files in the image.
func (b *buildContext) addFile(dst, src string) error {
	real, err := filepath.EvalSymlinks(src)
	if err != nil {
		return err
	}
	fi, err := os.Stat(real)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("integration: %s is not a regular file", src)
	}
	b.add(&ctxEntry{name: "rootfs" + dst, mode: fi.Mode().Perm(), src: real})
	return nil
}

// addData puts data at the image path dst.
func (b *buildContext) addData(dst string, perm fs.FileMode, data string) {
	b.add(&ctxEntry{name: "rootfs" + dst, mode: perm, data: []byte(data)})
}

// addDir puts an empty directory at the image path dst.
func (b *buildContext) addDir(dst string, mode fs.FileMode) {
	b.add(&ctxEntry{name: "rootfs" + dst, mode: fs.ModeDir | mode})
}

// addLink puts a symlink at the image path dst.
func (b *buildContext) addLink(dst, target string) {
	b.add(&ctxEntry{name: "rootfs" + dst, mode: fs.ModeSymlink | 0o777, link: target})
}

// addTree puts the host directory src at the image path dst, following
// symlinks (a symlink to a directory becomes a directory); skip, given
// a host path below src and whether it is a directory, leaves it out.
// Dangling symlinks are left out.
func (b *buildContext) addTree(dst, src string, skip func(src string, dir bool) bool) error {
	var walk func(dst, src string, depth int) error
	walk = func(dst, src string, depth int) error {
		if depth > 32 {
			return fmt.Errorf("integration: %s: too many levels of directories or symlinks", src)
		}
		fi, err := os.Stat(src) // follows symlinks
		if errors.Is(err, fs.ErrNotExist) {
			return nil // dangling
		}
		if err != nil {
			return err
		}
		if depth > 0 && skip != nil && skip(src, fi.IsDir()) {
			return nil
		}
		if !fi.IsDir() {
			return b.addFile(dst, src)
		}
		b.addDir(dst, fi.Mode().Perm())
		ents, err := os.ReadDir(src)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if err := walk(path.Join(dst, e.Name()), filepath.Join(src, e.Name()), depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(dst, src, 0)
}

func (b *buildContext) sorted() []*ctxEntry {
	out := make([]*ctxEntry, 0, len(b.entries))
	for _, e := range b.entries {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// imagePaths lists the paths that the image will have.
func (b *buildContext) imagePaths() map[string]bool {
	out := map[string]bool{}
	for name := range b.entries {
		if p, ok := strings.CutPrefix(name, "rootfs/"); ok {
			out["/"+p] = true
		}
	}
	return out
}

// hash is a hash of the whole context: names, modes, link targets and
// contents.
func (b *buildContext) hash() (string, error) {
	h := sha256.New()
	for _, e := range b.sorted() {
		sum := ""
		switch {
		case e.mode.IsRegular() && e.src != "":
			var err error
			if sum, err = fileHash(e.src); err != nil {
				return "", err
			}
		case e.mode.IsRegular():
			s := sha256.Sum256(e.data)
			sum = hex.EncodeToString(s[:])
		}
		fmt.Fprintf(h, "%q %o %q %s\n", e.name, uint32(e.mode), e.link, sum)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

var fileHashes = struct {
	sync.Mutex
	m map[string]string
}{m: map[string]string{}}

// fileHash returns the SHA-256 of a file's content, remembered for the
// process while the file's identity, size and mtime stay the same.
func fileHash(p string) (string, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return "", err
	}
	key := fmt.Sprintf("%s\x00%d\x00%d", p, fi.Size(), fi.ModTime().UnixNano())
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		key += fmt.Sprintf("\x00%d:%d", st.Dev, st.Ino)
	}
	fileHashes.Lock()
	sum, ok := fileHashes.m[key]
	fileHashes.Unlock()
	if ok {
		return sum, nil
	}
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	sum = hex.EncodeToString(h.Sum(nil))
	fileHashes.Lock()
	fileHashes.m[key] = sum
	fileHashes.Unlock()
	return sum, nil
}

// writeTar writes the context as the tar stream that docker build reads.
func (b *buildContext) writeTar(w io.Writer) error {
	tw := tar.NewWriter(w)
	for _, e := range b.sorted() {
		hdr := &tar.Header{
			Name:    e.name,
			Mode:    int64(e.mode.Perm()),
			ModTime: time.Unix(0, 0),
			Format:  tar.FormatPAX,
		}
		if e.mode&fs.ModeSticky != 0 {
			hdr.Mode |= 0o1000
		}
		switch {
		case e.mode.IsDir():
			hdr.Typeflag = tar.TypeDir
			hdr.Name += "/"
		case e.mode&fs.ModeSymlink != 0:
			hdr.Typeflag = tar.TypeSymlink
			hdr.Linkname = e.link
		default:
			hdr.Typeflag = tar.TypeReg
		}
		var f *os.File
		if hdr.Typeflag == tar.TypeReg {
			hdr.Size = int64(len(e.data))
			if e.src != "" {
				var err error
				if f, err = os.Open(e.src); err != nil {
					return err
				}
				fi, err := f.Stat()
				if err != nil {
					f.Close()
					return err
				}
				hdr.Size = fi.Size()
			}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			if f != nil {
				f.Close()
			}
			return err
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		if f == nil {
			if _, err := tw.Write(e.data); err != nil {
				return err
			}
			continue
		}
		_, err := io.CopyN(tw, f, hdr.Size)
		f.Close()
		if err != nil {
			return fmt.Errorf("integration: %s changed while building an image: %w", e.src, err)
		}
	}
	return tw.Close()
}

// build sends the context to the engine's builder and tags the result.
// The classic builder takes a tar context over the API with nothing else
// (BuildKit needs a session), and FROM scratch makes it pull nothing.
func (b *buildContext) build(ctx context.Context, cli *client.Client, ref string, kind imageKind) error {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(b.writeTar(pw)) }()
	defer pr.Close()
	res, err := cli.ImageBuild(ctx, pr, client.ImageBuildOptions{
		Tags:        []string{ref},
		Remove:      true,
		ForceRemove: true,
		Version:     build.BuilderV1,
		Labels:      map[string]string{labelImage: string(kind)},
	})
	if err != nil {
		return fmt.Errorf("integration: build image %s: %w", ref, err)
	}
	defer res.Body.Close()
	var out strings.Builder
	dec := json.NewDecoder(res.Body)
	for {
		var m struct {
			Stream      string `json:"stream"`
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&m); err == io.EOF {
			break
		} else if err != nil {
			return fmt.Errorf("integration: build image %s: reading the builder's output: %w\n%s", ref, err, out.String())
		}
		out.WriteString(m.Stream)
		if m.Error != "" || m.ErrorDetail.Message != "" {
			return fmt.Errorf("integration: build image %s: %s %s\n%s", ref, m.Error, m.ErrorDetail.Message, out.String())
		}
	}
	return nil
}

// etcdContext is the etcd image's context: the static server binary.
func etcdContext(bin string) (*buildContext, error) {
	if err := checkStatic(bin); err != nil {
		return nil, err
	}
	b := newBuildContext(etcdDockerfile)
	if err := b.addFile(etcdEntrypoint, bin); err != nil {
		return nil, err
	}
	b.addDir("/tmp", fs.ModeSticky|0o777)
	return b, nil
}

// checkStatic makes sure bin needs no dynamic loader: the etcd image has
// nothing but the binary.
func checkStatic(bin string) error {
	f, err := elf.Open(bin)
	if err != nil {
		return fmt.Errorf("integration: %s: %w", bin, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("integration: %s is dynamically linked; a FROM scratch image needs a static binary (CGO_ENABLED=0)", bin)
		}
	}
	return nil
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
		cp, err := manifestClassPath(j)
		if err != nil {
			return nil, err
		}
		queue = append(queue, cp...)
	}
	sort.Strings(out)
	return out, nil
}

// manifestClassPath reads the Class-Path of a jar's manifest: paths
// relative to the jar's directory, or absolute.
func manifestClassPath(jar string) ([]string, error) {
	zr, err := zip.OpenReader(jar)
	if err != nil {
		return nil, fmt.Errorf("integration: %s: %w", jar, err)
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
	// Unfold continuation lines (a line that starts with one space goes on
	// the one before).
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
			if !strings.HasPrefix(e, "/") {
				e = filepath.Join(filepath.Dir(jar), e)
			}
			out = append(out, filepath.Clean(e))
		}
	}
	return out, nil
}
