package main

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// File is one file an image adds on top of its base.
type File struct {
	Dest string // absolute path in the image
	Src  string // path on this machine
}

// Spec describes one image.
type Spec struct {
	Ref        string
	OnBase     bool
	Files      []File
	Entrypoint []string
	User       string
}

// epoch is every layer entry's and config's timestamp, so equal inputs give
// equal digests and rebuilding changes nothing the node has cached.
var epoch = time.Unix(0, 0).UTC()

// defaultPath is what the images' processes find commands on: kubeadm's
// static pods name bare commands (kube-apiserver, etcd).
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Write assembles every spec and writes them all to one archive at out.
func Write(out, baseLayer string, specs []*Spec) error {
	var base v1.Layer
	refs := make(map[name.Reference]v1.Image, len(specs))
	for _, s := range specs {
		ref, err := name.ParseReference(s.Ref, name.WeakValidation)
		if err != nil {
			return fmt.Errorf("image reference %q: %w", s.Ref, err)
		}
		if _, ok := ref.(name.Tag); !ok {
			// ctr names imported images after the archive's tags; a
			// digest reference would leave the image unnamed.
			return fmt.Errorf("image reference %q: want a tag", s.Ref)
		}
		if s.OnBase && base == nil {
			if baseLayer == "" {
				return fmt.Errorf("image %s is --on base but no --base-layer was given", s.Ref)
			}
			if base, err = tarball.LayerFromFile(baseLayer); err != nil {
				return fmt.Errorf("reading the base layer %s: %w", baseLayer, err)
			}
		}
		img, err := Image(s, base)
		if err != nil {
			return fmt.Errorf("assembling %s: %w", s.Ref, err)
		}
		refs[ref] = img
	}
	tmp := out + ".tmp"
	if err := tarball.MultiRefWriteToFile(tmp, refs); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", out, err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	return nil
}

// Image assembles one image: the base layer when s.OnBase, then one layer
// holding s.Files.
func Image(s *Spec, base v1.Layer) (v1.Image, error) {
	img := empty.Image
	if s.OnBase {
		var err error
		if img, err = mutate.Append(img, mutate.Addendum{Layer: base, History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "hack/kind/base.sh: Debian rootfs"}}); err != nil {
			return nil, fmt.Errorf("adding the base layer: %w", err)
		}
	}
	files := append([]File(nil), s.Files...)
	for _, f := range files {
		if _, err := os.Stat(f.Src); err != nil {
			return nil, fmt.Errorf("file for %s: %w", f.Dest, err)
		}
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return filesTar(files), nil },
		tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		return nil, fmt.Errorf("creating the files layer: %w", err)
	}
	if img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "hack/kind/images: binaries built here"}}); err != nil {
		return nil, fmt.Errorf("adding the files layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading the config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Created = v1.Time{Time: epoch}
	cf.Config = v1.Config{Env: []string{defaultPath}, Entrypoint: s.Entrypoint, User: s.User, WorkingDir: "/"}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, fmt.Errorf("setting the config: %w", err)
	}
	return img, nil
}

// filesTar streams a tar of files (and their parent directories), each
// executable, owned by root, at epoch.
func filesTar(files []File) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeFiles(pw, files)) }()
	return pr
}

func writeFiles(w io.Writer, files []File) error {
	sort.Slice(files, func(i, j int) bool { return files[i].Dest < files[j].Dest })
	tw := tar.NewWriter(w)
	dirs := map[string]bool{}
	for _, f := range files {
		rel := strings.TrimPrefix(path.Clean(f.Dest), "/")
		// Parent directories first, once each, so the layer unpacks on
		// an empty base.
		var parents []string
		for d := path.Dir(rel); d != "." && !dirs[d]; d = path.Dir(d) {
			parents = append([]string{d}, parents...)
		}
		for _, d := range parents {
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
				return fmt.Errorf("writing %s: %w", d, err)
			}
		}
		if err := copyFile(tw, rel, f.Src); err != nil {
			return err
		}
	}
	return tw.Close()
}

func copyFile(tw *tar.Writer, rel, src string) error {
	fh, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("opening %s: %w", src, err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return fmt.Errorf("reading %s: %w", src, err)
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: 0o755, Size: st.Size(), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
		return fmt.Errorf("writing %s: %w", rel, err)
	}
	if _, err := io.Copy(tw, fh); err != nil {
		return fmt.Errorf("copying %s: %w", src, err)
	}
	return nil
}
