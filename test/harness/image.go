package harness

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The nodeaddr image recipe: the Dockerfile's final stage (scratch, the static binary at
// ImageBinary, ImageUser, ImageEntrypoint) built by NodeaddrBuildEnv + NodeaddrBuildArgs, the
// Dockerfile's build command without its cross-compilation variables.
// TestImageRecipeMatchesDockerfile fails when the Dockerfile and this recipe disagree, so the image
// the real-node suite runs is the one users build.
var (
	ImageUser         = "65532:65532"
	ImageBinary       = "/nodeaddr"
	ImageEntrypoint   = []string{"/nodeaddr"}
	NodeaddrBuildEnv  = []string{"CGO_ENABLED=0"}
	NodeaddrBuildArgs = []string{"go", "build", "-trimpath", "-ldflags", "-s -w -X main.version=${VERSION} -X main.revision=${REVISION}", "-o", "${OUT}", "./cmd/nodeaddr"}
)

// PauseUser is the sandbox image's user (the upstream pause image runs as 65535 too).
const PauseUser = "65535:65535"

// BuildImageBinary builds the nodeaddr binary with the image recipe into out, as version (the
// revision is "test").
func BuildImageBinary(progress io.Writer, version, out string) error {
	var args []string
	for _, a := range NodeaddrBuildArgs[1:] {
		args = append(args, strings.NewReplacer("${VERSION}", version, "${REVISION}", "test", "${OUT}", out).Replace(a))
	}
	return runGo(progress, filepath.Dir(TestModuleDir()), "nodeaddr image binary", NodeaddrBuildEnv, args...)
}

// NormalizeImage returns the fully qualified name the CRI resolves an image reference to
// ("nodeaddr:v1" is "docker.io/library/nodeaddr:v1"): images must be imported under that name.
func NormalizeImage(ref string) string {
	first, _, qualified := strings.Cut(ref, "/")
	switch {
	case !qualified:
		ref = "docker.io/library/" + ref
	case !strings.ContainsAny(first, ".:") && first != "localhost":
		ref = "docker.io/" + ref
	}
	last := ref[strings.LastIndex(ref, "/")+1:]
	if !strings.ContainsAny(last, ":@") {
		ref += ":latest"
	}
	return ref
}

// WriteImage writes a single-layer image holding binary at path (mode 0755) as a docker-archive
// tarball tagged ref, with user and entrypoint in its config and this machine's os/arch (the CRI
// matches the platform). No daemon is needed.
func WriteImage(tarPath, ref, binary, path, user string, entrypoint []string) error {
	data, err := os.ReadFile(binary)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{Name: strings.TrimPrefix(path, "/"), Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if _, err := tw.Write(data); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	})
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
	cfg.Config = v1.Config{User: user, Entrypoint: entrypoint}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return err
	}
	tag, err := name.NewTag(NormalizeImage(ref))
	if err != nil {
		return fmt.Errorf("image name %q: %w", ref, err)
	}
	return tarball.WriteToFile(tarPath, tag, img)
}
