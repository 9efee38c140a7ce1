package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// pluginPlatforms are the kubectl-nodeaddr archives a release carries, the platforms of the krew
// manifest (plugins/nodeaddr.yaml): `make build` cross-compiles the plugin for each.
var pluginPlatforms = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"}

// pluginArchive is the name of the krew archive of one platform ("linux/amd64").
func pluginArchive(version, platform string) string {
	return fmt.Sprintf("kubectl-nodeaddr_v%s_%s.tar.gz", version, strings.ReplaceAll(platform, "/", "_"))
}

// writePluginArchives writes one .tar.gz per platform into c.dist, each holding kubectl-nodeaddr
// and LICENSE (the manifest's files), with the commit's time (same commit, same bytes), and
// returns their names.
func writePluginArchives(c config) ([]string, error) {
	license, err := os.ReadFile(filepath.Join(c.repo, "LICENSE"))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, p := range pluginPlatforms {
		bin, err := os.ReadFile(filepath.Join(c.dist, "bin", "kubectl-nodeaddr-"+strings.ReplaceAll(p, "/", "-")))
		if err != nil {
			return nil, fmt.Errorf("the plugin for %s (make build PLUGIN_PLATFORMS): %w", p, err)
		}
		var buf bytes.Buffer
		gz := gzip.NewWriter(&buf)
		tw := tar.NewWriter(gz)
		for _, f := range []struct {
			name string
			mode int64
			data []byte
		}{{"kubectl-nodeaddr", 0o755, bin}, {"LICENSE", 0o644, license}} {
			hdr := &tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), Typeflag: tar.TypeReg,
				ModTime: c.created, Format: tar.FormatPAX}
			if err := tw.WriteHeader(hdr); err != nil {
				return nil, err
			}
			if _, err := tw.Write(f.data); err != nil {
				return nil, err
			}
		}
		if err := tw.Close(); err != nil {
			return nil, err
		}
		if err := gz.Close(); err != nil {
			return nil, err
		}
		name := pluginArchive(c.version, p)
		if err := os.WriteFile(filepath.Join(c.dist, name), buf.Bytes(), 0o644); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return names, nil
}

// krewURIRE finds a platform's uri and the sha256 line that follows it in plugins/nodeaddr.yaml.
var krewURIRE = regexp.MustCompile(`(?m)^(\s+uri: \S+/kubectl-nodeaddr_)v[^_]+_([a-z0-9]+_[a-z0-9]+)\.tar\.gz\n(\s+sha256: )"[0-9a-f]{64}"`)

// writeKrewManifest renders plugins/nodeaddr.yaml for the release into c.dist/nodeaddr.yaml (what a
// krew-index pull request submits): spec.version, the version in every uri and each archive's
// sha256. Every platform of the manifest must have its archive.
func writeKrewManifest(c config) error {
	src, err := os.ReadFile(filepath.Join(c.repo, "plugins", "nodeaddr.yaml"))
	if err != nil {
		return err
	}
	out := regexp.MustCompile(`(?m)^(  version: )v\S+$`).ReplaceAll(src, []byte("${1}v"+c.version))
	var missing []string
	out = krewURIRE.ReplaceAllFunc(out, func(m []byte) []byte {
		g := krewURIRE.FindSubmatch(m)
		platform := strings.Replace(string(g[2]), "_", "/", 1)
		data, err := os.ReadFile(filepath.Join(c.dist, pluginArchive(c.version, platform)))
		if err != nil {
			missing = append(missing, platform)
			return m
		}
		sum := sha256.Sum256(data)
		return fmt.Appendf(nil, "%sv%s_%s.tar.gz\n%s%q", g[1], c.version, g[2], g[3], hex.EncodeToString(sum[:]))
	})
	if len(missing) > 0 {
		return fmt.Errorf("plugins/nodeaddr.yaml names platforms without an archive: %v", missing)
	}
	if n := len(krewURIRE.FindAll(out, -1)); n != len(pluginPlatforms) {
		return fmt.Errorf("plugins/nodeaddr.yaml has %d platforms, the release builds %d", n, len(pluginPlatforms))
	}
	return os.WriteFile(filepath.Join(c.dist, "nodeaddr.yaml"), out, 0o644)
}
