package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image is the Dockerfile's final stage, assembled without a container engine or a base
// image: scratch, the static binary at imageBinary (root-owned, mode 0755, as COPY leaves it),
// imageUser, imageEntrypoint and imageLabels. test/release's rehearsal parses the Dockerfile and
// compares it with the pushed image's config, so the two cannot drift apart.
const (
	imageBinary = "/nodeaddr"
	imageUser   = "65532:65532"
)

var imageEntrypoint = []string{"/nodeaddr"}

// imageLabels are the Dockerfile's LABEL instruction with REVISION filled in.
func imageLabels(revision string) map[string]string {
	return map[string]string{
		"org.opencontainers.image.source":   "https://github.com/nodeaddr/nodeaddr",
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.revision": revision,
	}
}

// platformImage is the image of one platform (linux/arch) holding binary. created (the commit's
// time) stamps the config and the file, so the same commit gives the same digest.
func platformImage(binary, arch, revision string, created time.Time) (v1.Image, error) {
	data, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	layerTar, err := singleFileTar(strings.TrimPrefix(imageBinary, "/"), data, created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: created},
			CreatedBy: "COPY /out/nodeaddr " + imageBinary + " # make release",
			Comment:   "make release",
		},
	})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", arch
	cfg.Created = v1.Time{Time: created}
	cfg.Config = v1.Config{User: imageUser, Entrypoint: imageEntrypoint, Labels: imageLabels(revision)}
	return mutate.ConfigFile(img, cfg)
}

// singleFileTar is a layer with one root-owned executable file.
func singleFileTar(path string, data []byte, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{
		Name: path, Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg,
		ModTime: mtime, Format: tar.FormatPAX,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// imageIndex is the OCI image index of one image per architecture, from binaries named
// binDir/nodeaddr-linux-ARCH (what `make build` writes).
func imageIndex(binDir string, arches []string, revision string, created time.Time) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range arches {
		img, err := platformImage(fmt.Sprintf("%s/nodeaddr-linux-%s", binDir, arch), arch, revision, created)
		if err != nil {
			return nil, fmt.Errorf("linux/%s image: %w", arch, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}},
		})
	}
	return idx, nil
}
