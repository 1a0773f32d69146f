package integration

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/client"
)

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
