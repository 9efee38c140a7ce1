package harness

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// E2ERegistry is where the e2e suite finds its images here: KUBE_TEST_REPO_LIST (E2ERepoList)
// moves the suite's promoter registry to this name, and the images are imported into each node's
// containerd under it with the suite's own names and tags (test/utils/image/manifest.go), so
// nothing is pulled.
const E2ERegistry = "nodeaddr.test/e2e-test-images"

// The suite's images the focus list runs (E2EFocus), by name:tag as v1.37.2's manifest names them.
const (
	AgnhostImage = E2ERegistry + "/agnhost:2.66.1"
	BusyboxImage = E2ERegistry + "/busybox:1.37.0-2"
)

// E2ERepoList is the KUBE_TEST_REPO_LIST file's content: only the promoter registry moves.
const E2ERepoList = "promoterE2eRegistry: " + E2ERegistry + "\n"

// ImageFile is one entry of an image layer: a regular file copied from Source, a symbolic link
// to Link, or (both empty) a directory.
type ImageFile struct {
	Path, Source, Link string
	Mode               int64
}

// ImageConfig is the part of an image's config the suite's pods depend on.
type ImageConfig struct {
	User       string
	Entrypoint []string
	Cmd        []string
	Env        []string
}

// WriteImageFiles is WriteImage for an image of several files (one layer): a docker-archive
// tarball tagged ref (normalized as the CRI resolves it), with this machine's os/arch.
func WriteImageFiles(tarPath, ref string, files []ImageFile, c ImageConfig) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		hdr := &tar.Header{Name: strings.TrimPrefix(f.Path, "/"), Mode: f.Mode, Typeflag: tar.TypeDir}
		var data []byte
		switch {
		case f.Link != "":
			hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeSymlink, f.Link, 0o777
		case f.Source != "":
			var err error
			if data, err = os.ReadFile(f.Source); err != nil {
				return err
			}
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerBytes)), nil })
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = runtime.GOOS, runtime.GOARCH
	cfg.Config = v1.Config{User: c.User, Entrypoint: c.Entrypoint, Cmd: c.Cmd, Env: c.Env}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return err
	}
	tag, err := name.NewTag(NormalizeImage(ref))
	if err != nil {
		return fmt.Errorf("image name %q: %w", ref, err)
	}
	return tarball.WriteToFile(tarPath, tag, img)
}

// imagePath is the PATH of the suite's images: the tools in /usr/bin come before busybox's /bin.
const imagePath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// WriteE2EImages writes the agnhost and busybox images the focus list runs into dir and returns
// the tarballs (for NodeOptions.Images). Both hold Debian's static busybox with its applets linked
// under /bin (env, wget, ...), e2etools as /usr/bin/curl and /usr/bin/nc (busybox has no curl, and
// its nc lacks -u and -v), and Debian's static bash as /bin/sh: Debian builds busybox's sh to run
// its own applets before searching PATH (FEATURE_SH_STANDALONE), so under it `nc` would always be
// busybox's. agnhost's image also holds /agnhost as its entrypoint with "pause" as its command, as
// upstream's does.
func WriteE2EImages(dir string, b E2EBinaries) ([]string, error) {
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		return nil, fmt.Errorf("busybox (Debian's busybox-static, .ci/install-packages): %w", err)
	}
	bash, err := exec.LookPath("bash-static")
	if err != nil {
		return nil, fmt.Errorf("bash-static (Debian's bash-static, .ci/install-packages): %w", err)
	}
	applets, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("busybox --list: %w", err)
	}
	base := []ImageFile{{Path: "bin", Mode: 0o755}, {Path: "usr", Mode: 0o755}, {Path: "usr/bin", Mode: 0o755},
		{Path: "tmp", Mode: 0o1777}, {Path: "etc", Mode: 0o755},
		{Path: "bin/busybox", Source: busybox, Mode: 0o755},
		{Path: "bin/bash", Source: bash, Mode: 0o755}, {Path: "bin/sh", Link: "bash"},
		{Path: "usr/bin/curl", Source: b.Tools, Mode: 0o755}, {Path: "usr/bin/nc", Link: "curl"}}
	for _, a := range strings.Fields(string(applets)) {
		if a != "busybox" && a != "nc" && a != "sh" && a != "bash" {
			base = append(base, ImageFile{Path: "bin/" + a, Link: "busybox"})
		}
	}
	agnhost := append(append([]ImageFile(nil), base...), ImageFile{Path: "agnhost", Source: b.Agnhost, Mode: 0o755})
	var tars []string
	for _, img := range []struct {
		file, ref string
		files     []ImageFile
		config    ImageConfig
	}{
		{"agnhost.tar", AgnhostImage, agnhost, ImageConfig{Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"}, Env: []string{imagePath}}},
		{"busybox.tar", BusyboxImage, base, ImageConfig{Cmd: []string{"sh"}, Env: []string{imagePath}}},
	} {
		p := filepath.Join(dir, img.file)
		if err := WriteImageFiles(p, img.ref, img.files, img.config); err != nil {
			return nil, fmt.Errorf("image %s: %w", img.ref, err)
		}
		tars = append(tars, p)
	}
	return tars, nil
}
