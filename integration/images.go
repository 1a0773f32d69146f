package integration

import (
	"context"
	"debug/elf"
	_ "embed"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
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

	// etcdEntrypoint is the etcd server's path in the etcd image.
	etcdEntrypoint = "/usr/local/bin/etcd"
)

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
