package main

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func TestWriteFilesAddsParentsOnce(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a")
	b := filepath.Join(dir, "b")
	if err := os.WriteFile(a, []byte("aa"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, []byte("b"), 0o600); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	files := []File{{Dest: "/usr/local/bin/y", Src: b}, {Dest: "/usr/local/bin/x", Src: a}, {Dest: "/pause", Src: a}}
	if err := writeFiles(&buf, files); err != nil {
		t.Fatal(err)
	}
	var got []string
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Mode != 0o755 || h.Uid != 0 || !h.ModTime.Equal(epoch) {
			t.Errorf("%s: mode %o uid %d mtime %v, want 755, 0, epoch", h.Name, h.Mode, h.Uid, h.ModTime)
		}
		got = append(got, h.Name)
	}
	want := []string{"pause", "usr/", "usr/local/", "usr/local/bin/", "usr/local/bin/x", "usr/local/bin/y"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
}

func TestWriteNamesEveryImageAndSharesTheBase(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.WriteFile(bin, []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A one-file root file system stands in for the Debian base.
	base := filepath.Join(dir, "base.tar")
	var bt bytes.Buffer
	tw := tar.NewWriter(&bt)
	if err := tw.WriteHeader(&tar.Header{Name: "etc/", Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(base, bt.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "images.tar")
	specs := []*Spec{
		{Ref: "registry.k8s.io/kube-apiserver:v1.36.3", OnBase: true, Files: []File{{Dest: "/usr/local/bin/kube-apiserver", Src: bin}}},
		{Ref: "registry.k8s.io/etcd:3.6.8-0", OnBase: true, Files: []File{{Dest: "/usr/local/bin/etcd", Src: bin}}},
		{Ref: "registry.k8s.io/pause:3.10.2", Files: []File{{Dest: "/pause", Src: bin}}, Entrypoint: []string{"/pause"}, User: "65535:65535"},
	}
	if err := Write(out, base, specs); err != nil {
		t.Fatal(err)
	}
	layers := map[string]int{}
	for _, s := range specs {
		tag, err := name.NewTag(s.Ref)
		if err != nil {
			t.Fatal(err)
		}
		img, err := tarball.ImageFromPath(out, &tag)
		if err != nil {
			t.Fatalf("%s not in the archive: %v", s.Ref, err)
		}
		ls, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		wantLayers := 1
		if s.OnBase {
			wantLayers = 2
		}
		if len(ls) != wantLayers {
			t.Errorf("%s: %d layers, want %d", s.Ref, len(ls), wantLayers)
		}
		for _, l := range ls {
			d, err := l.Digest()
			if err != nil {
				t.Fatal(err)
			}
			layers[d.String()]++
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(s.Entrypoint, cf.Config.Entrypoint); diff != "" {
			t.Errorf("%s: entrypoint (-want +got):\n%s", s.Ref, diff)
		}
		if cf.Config.User != s.User || cf.Config.Env[0] != defaultPath {
			t.Errorf("%s: config %+v, want user %q and PATH", s.Ref, cf.Config, s.User)
		}
	}
	// The two images on the base share its layer; every file layer differs.
	shared := 0
	for _, n := range layers {
		if n > 1 {
			shared++
		}
	}
	if shared != 1 {
		t.Errorf("layer use counts %v: want exactly the base layer shared", layers)
	}
}
