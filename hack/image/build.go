package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The unprivileged user the image runs as (distroless' "nonroot"); the
// chart's securityContext uses the same IDs.
const (
	uid        = 65532
	gid        = 65532
	entrypoint = "/replicafed"
)

// Metadata describes the image for its labels and annotations.
type Metadata struct {
	Repository string
	Version    string
	Commit     string
	Source     string
	Created    time.Time
}

// Labels are the OCI annotation keys set as image labels (the Dockerfile
// sets the same).
func (m Metadata) Labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "replicafed",
		"org.opencontainers.image.description": "Multi-cluster federated replica controller",
		"org.opencontainers.image.version":     m.Version,
		"org.opencontainers.image.revision":    m.Commit,
		"org.opencontainers.image.source":      m.Source,
		"org.opencontainers.image.url":         m.Source,
		"org.opencontainers.image.created":     m.Created.UTC().Format(time.RFC3339),
	}
}

// Ref is the image reference the archive names, repository:version.
func (m Metadata) Ref() string { return m.Repository + ":" + m.Version }

// rootFS returns the single layer's tar: the binary and the few files a
// scratch image needs so the process has a user name, a writable /tmp and
// a data directory it owns. Every entry has the same timestamp, so equal
// inputs give equal digests.
func rootFS(binary []byte, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(name string, mode int64, owner int) *tar.Header {
		return &tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, Uid: owner, Gid: owner, ModTime: mtime, Format: tar.FormatPAX}
	}
	file := func(name string, mode int64, body []byte) (*tar.Header, []byte) {
		return &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(body)), ModTime: mtime, Format: tar.FormatPAX}, body
	}
	passwd := []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", uid, gid))
	group := []byte(fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", gid))
	type entry struct {
		h    *tar.Header
		body []byte
	}
	entries := []entry{
		{h: dir("etc/", 0o755, 0)},
		{h: dir("home/", 0o755, 0)},
		{h: dir("home/nonroot/", 0o700, uid)},
		{h: dir("tmp/", 0o1777, 0)},
		{h: dir("var/", 0o755, 0)},
		{h: dir("var/lib/", 0o755, 0)},
		{h: dir("var/lib/replicafed/", 0o700, uid)},
	}
	for _, f := range []struct {
		name string
		mode int64
		body []byte
	}{{"etc/group", 0o644, group}, {"etc/passwd", 0o644, passwd}, {entrypoint[1:], 0o555, binary}} {
		h, b := file(f.name, f.mode, f.body)
		entries = append(entries, entry{h, b})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].h.Name < entries[j].h.Name })
	for _, e := range entries {
		if err := tw.WriteHeader(e.h); err != nil {
			return nil, fmt.Errorf("writing %s to the layer: %w", e.h.Name, err)
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, fmt.Errorf("writing %s to the layer: %w", e.h.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("closing the layer: %w", err)
	}
	return buf.Bytes(), nil
}

// Image assembles one platform's image on an empty base.
func Image(p v1.Platform, binary []byte, m Metadata) (v1.Image, error) {
	tarBytes, err := rootFS(binary, m.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(tarBytes)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("creating the layer: %w", err)
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: m.Created}, CreatedBy: "hack/image: replicafed binary on an empty base", Comment: "replicafed " + m.Version},
	})
	if err != nil {
		return nil, fmt.Errorf("adding the layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading the config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	cf.Created = v1.Time{Time: m.Created}
	cf.Config = v1.Config{
		Entrypoint: []string{entrypoint},
		User:       fmt.Sprintf("%d:%d", uid, gid),
		WorkingDir: "/",
		Labels:     m.Labels(),
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("setting the config: %w", err)
	}
	return img, nil
}

// Index assembles the multi-platform index from one binary per platform.
func Index(binaries map[string]string, m Metadata) (v1.ImageIndex, error) {
	platforms := make([]string, 0, len(binaries))
	for p := range binaries {
		platforms = append(platforms, p)
	}
	sort.Strings(platforms)
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, ps := range platforms {
		p, err := v1.ParsePlatform(ps)
		if err != nil {
			return nil, fmt.Errorf("platform %q: %w", ps, err)
		}
		bin, err := os.ReadFile(binaries[ps])
		if err != nil {
			return nil, fmt.Errorf("reading the %s binary: %w", ps, err)
		}
		img, err := Image(*p, bin, m)
		if err != nil {
			return nil, fmt.Errorf("image for %s: %w", ps, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: p},
		})
	}
	return mutate.Annotations(idx, m.Labels()).(v1.ImageIndex), nil
}

// WriteLayout writes idx as an OCI image layout at dir, naming it the way
// `docker save` and containerd do, so `ctr images import` (and with it
// `kind load image-archive`) and `docker load` tag it as Ref.
func WriteLayout(dir string, idx v1.ImageIndex, m Metadata) error {
	// Replace an earlier layout, but never a directory that is not one.
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
			return fmt.Errorf("%s exists and is not an OCI layout; not overwriting it", dir)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("clearing %s: %w", dir, err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("creating the OCI layout: %w", err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": m.Version,
		"io.containerd.image.name":          m.Ref(),
	})); err != nil {
		return fmt.Errorf("writing the OCI layout: %w", err)
	}
	return nil
}

// WriteArchive tars the layout directory (an "OCI archive"), with fixed
// timestamps and owners so equal layouts give equal archives.
func WriteArchive(layoutDir, out string, mtime time.Time) (err error) {
	var names []string
	if err := filepath.WalkDir(layoutDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != layoutDir {
			names = append(names, path)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("listing the layout: %w", err)
	}
	sort.Strings(names)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(out), err)
	}
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("creating the archive: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("closing the archive: %w", cerr)
		}
	}()
	tw := tar.NewWriter(f)
	for _, path := range names {
		info, err := os.Lstat(path)
		if err != nil {
			return fmt.Errorf("reading %s: %w", path, err)
		}
		rel, err := filepath.Rel(layoutDir, path)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: mtime, Mode: 0o644, Format: tar.FormatPAX}
		if info.IsDir() {
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
		} else {
			h.Typeflag, h.Size = tar.TypeReg, info.Size()
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("archiving %s: %w", rel, err)
		}
		if info.IsDir() {
			continue
		}
		src, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("archiving %s: %w", rel, err)
		}
		_, err = io.Copy(tw, src)
		_ = src.Close()
		if err != nil {
			return fmt.Errorf("archiving %s: %w", rel, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("closing the archive: %w", err)
	}
	return nil
}
