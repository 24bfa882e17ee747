package main

import (
	"archive/tar"
	"bufio"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"sigs.k8s.io/yaml"
)

const testCommit = "0123456789abcdef0123456789abcdef01234567"

// chartAppVersion is the version `make image` stamps by default.
func chartAppVersion(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../../charts/replicafed/Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(raw, &c); err != nil || c.AppVersion == "" {
		t.Fatalf("reading appVersion from Chart.yaml: %v", err)
	}
	return c.AppVersion
}

// TestMakeImage runs `make image` for this machine's platform (a static
// binary and hack/image) and inspects what it wrote: the OCI layout's index,
// the platform's config, the layer's files, and the binary itself. One
// platform, not the default two: cross-compiling every dependency for the
// other architecture cost about six minutes of a cold CI run, and
// TestMakeImageDefaultPlatforms and TestIndexPlatforms cover what the second
// platform adds.
func TestMakeImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds replicafed")
	}
	out := t.TempDir()
	cmd := exec.Command("make", "--no-print-directory", "image", "IMAGE_OUT="+out, "COMMIT="+testCommit,
		"IMAGE_PLATFORMS=linux/"+runtime.GOARCH)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "MAKEFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, b)
	}
	version := chartAppVersion(t)
	wantLabels := map[string]string{
		"org.opencontainers.image.title":    "replicafed",
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.revision": testCommit,
		"org.opencontainers.image.source":   "https://github.com/replicafed/replicafed",
	}

	idx, err := layout.ImageIndexFromPath(filepath.Join(out, "oci"))
	if err != nil {
		t.Fatalf("reading the OCI layout: %v", err)
	}
	top, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(top.Manifests) != 1 {
		t.Fatalf("layout index.json has %d entries, want 1 (the multi-arch index)", len(top.Manifests))
	}
	named := top.Manifests[0]
	if got, want := named.Annotations["io.containerd.image.name"], "ghcr.io/replicafed/replicafed:"+version; got != want {
		t.Errorf("image name annotation %q, want %q", got, want)
	}
	if got := named.Annotations["org.opencontainers.image.ref.name"]; got != version {
		t.Errorf("ref.name annotation %q, want %q", got, version)
	}
	multi, err := idx.ImageIndex(named.Digest)
	if err != nil {
		t.Fatalf("opening the multi-arch index: %v", err)
	}
	im, err := multi.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, d := range im.Manifests {
		if d.Platform == nil {
			t.Fatalf("manifest %s has no platform", d.Digest)
		}
		p := d.Platform.OS + "/" + d.Platform.Architecture
		platforms = append(platforms, p)
		img, err := multi.Image(d.Digest)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatalf("%s config: %v", p, err)
		}
		if cf.OS+"/"+cf.Architecture != p {
			t.Errorf("%s: config says %s/%s", p, cf.OS, cf.Architecture)
		}
		if cf.Config.User != "65532:65532" {
			t.Errorf("%s: user %q, want 65532:65532", p, cf.Config.User)
		}
		if diff := cmp.Diff([]string{"/replicafed"}, cf.Config.Entrypoint); diff != "" {
			t.Errorf("%s: entrypoint (-want +got):\n%s", p, diff)
		}
		if len(cf.Config.Cmd) > 0 {
			t.Errorf("%s: cmd %q, want none", p, cf.Config.Cmd)
		}
		for k, v := range wantLabels {
			if cf.Config.Labels[k] != v {
				t.Errorf("%s: label %s = %q, want %q", p, k, cf.Config.Labels[k], v)
			}
		}
		files := layerFiles(t, img)
		bin, ok := files["replicafed"]
		if !ok {
			t.Fatalf("%s: no /replicafed in the layer (files: %v)", p, keys(files))
		}
		if bin.hdr.Mode&0o111 == 0 || bin.hdr.Uid != 0 {
			t.Errorf("%s: /replicafed mode %o uid %d, want executable and root-owned (read-only for 65532)", p, bin.hdr.Mode, bin.hdr.Uid)
		}
		if d := files["var/lib/replicafed/"]; d == nil || d.hdr.Uid != 65532 {
			t.Errorf("%s: /var/lib/replicafed missing or not owned by 65532", p)
		}
		if !strings.Contains(string(files["etc/passwd"].body), ":65532:65532:") {
			t.Errorf("%s: /etc/passwd lacks the 65532 user", p)
		}
		checkStatic(t, p, bin.body, d.Platform.Architecture)
		if p == "linux/"+runtime.GOARCH && runtime.GOOS == "linux" {
			runVersion(t, bin.body, version)
		}
	}
	if diff := cmp.Diff([]string{"linux/" + runtime.GOARCH}, platforms); diff != "" {
		t.Errorf("platforms (-want +got):\n%s", diff)
	}
	checkArchive(t, filepath.Join(out, "replicafed.oci.tar"), named.Digest)
}

// TestMakeImageDefaultPlatforms checks, from `make -n`, that `make image`
// builds a static binary for linux/amd64 and linux/arm64 by default and
// hands both to hack/image.
func TestMakeImageDefaultPlatforms(t *testing.T) {
	cmd := exec.Command("make", "--no-print-directory", "-n", "image", "IMAGE_OUT=/nonexistent", "COMMIT="+testCommit)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "MAKEFLAGS=")
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n image: %v\n%s", err, b)
	}
	plan := string(b)
	for _, want := range []string{"for p in linux/amd64 linux/arm64;",
		"--binary linux/amd64=/nonexistent/bin/linux_amd64/replicafed", "--binary linux/arm64=/nonexistent/bin/linux_arm64/replicafed"} {
		if !strings.Contains(plan, want) {
			t.Errorf("make image's plan lacks %q:\n%s", want, plan)
		}
	}
	if !strings.Contains(plan, "CGO_ENABLED=0 GOOS=${p%%/*} GOARCH=${p##*/} go build") {
		t.Errorf("make image does not build static binaries:\n%s", plan)
	}
}

// TestIndexPlatforms: an index of two platforms' binaries names each
// platform once, with a config of that platform.
func TestIndexPlatforms(t *testing.T) {
	dir := t.TempDir()
	bins := map[string]string{}
	for _, p := range []string{"linux/arm64", "linux/amd64"} {
		f := filepath.Join(dir, strings.ReplaceAll(p, "/", "_"))
		if err := os.WriteFile(f, []byte("binary for "+p), 0o755); err != nil {
			t.Fatal(err)
		}
		bins[p] = f
	}
	idx, err := Index(bins, Metadata{Repository: "example.com/replicafed", Version: "1.0.0", Commit: "abc", Source: "https://example.com"})
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range im.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, d.Platform.OS+"/"+d.Platform.Architecture+"="+cf.OS+"/"+cf.Architecture)
		if body := layerFiles(t, img)["replicafed"]; body == nil || string(body.body) != "binary for "+cf.OS+"/"+cf.Architecture {
			t.Errorf("%s: /replicafed is not that platform's binary", d.Platform.Architecture)
		}
	}
	if diff := cmp.Diff([]string{"linux/amd64=linux/amd64", "linux/arm64=linux/arm64"}, got); diff != "" {
		t.Errorf("index platforms (-want +got):\n%s", diff)
	}
}

type tarFile struct {
	hdr  *tar.Header
	body []byte
}

func keys(m map[string]*tarFile) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func layerFiles(t *testing.T, img v1.Image) map[string]*tarFile {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("want exactly one layer on the empty base, got %d (%v)", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	files := map[string]*tarFile{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading the layer: %v", err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = &tarFile{hdr: h, body: body}
	}
	return files
}

// checkStatic asserts a static binary: no program interpreter, so it runs on
// an empty base (CGO_ENABLED=0).
func checkStatic(t *testing.T, platform string, bin []byte, arch string) {
	t.Helper()
	f, err := elf.NewFile(strings.NewReader(string(bin)))
	if err != nil {
		t.Fatalf("%s: not an ELF binary: %v", platform, err)
	}
	want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]
	if f.Machine != want {
		t.Errorf("%s: ELF machine %v, want %v", platform, f.Machine, want)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s: binary has a program interpreter: it is not static", platform)
		}
	}
}

// runVersion runs the binary extracted from the layer.
func runVersion(t *testing.T, bin []byte, version string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "replicafed")
	if err := os.WriteFile(path, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(path, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("replicafed version: %v\n%s", err, out)
	}
	re := regexp.MustCompile(`^replicafed (\S+) \(commit (\S+), (go\S+), linux/` + runtime.GOARCH + `\)$`)
	m := re.FindStringSubmatch(strings.TrimSpace(string(out)))
	if m == nil {
		t.Fatalf("replicafed version printed %q", out)
	}
	if m[1] != version || m[2] != testCommit || m[3] != runtime.Version() {
		t.Errorf("version %q commit %q go %q, want %q %q %q", m[1], m[2], m[3], version, testCommit, runtime.Version())
	}
}

// checkArchive unpacks the OCI archive and finds the same index in it.
func checkArchive(t *testing.T, archive string, want v1.Hash) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatalf("opening the archive: %v", err)
	}
	defer func() { _ = f.Close() }()
	dir := t.TempDir()
	tr := tar.NewReader(bufio.NewReader(f))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading the archive: %v", err)
		}
		if strings.Contains(h.Name, "..") || filepath.IsAbs(h.Name) {
			t.Fatalf("unsafe path %q in the archive", h.Name)
		}
		p := filepath.Join(dir, h.Name)
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("the archive is not an OCI layout: %v", err)
	}
	m, err := idx.IndexManifest()
	if err != nil || len(m.Manifests) != 1 || m.Manifests[0].Digest != want {
		t.Fatalf("archive index %+v (%v), want the layout's %s", m, err, want)
	}
	if _, err := idx.ImageIndex(want); err != nil {
		t.Fatalf("archive lacks the multi-arch index blobs: %v", err)
	}
}

// TestDockerfileMatches keeps the Dockerfile giving the same image as
// hack/image: user, entrypoint, empty base and label keys.
func TestDockerfileMatches(t *testing.T) {
	raw, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(raw)
	final := df[strings.LastIndex(df, "\nFROM "):]
	for _, want := range []string{"\nFROM scratch", "\nUSER 65532:65532", "\nENTRYPOINT [\"/replicafed\"]", "CGO_ENABLED=0", "-trimpath", "internal/version.Version=${VERSION}", "internal/version.Commit=${COMMIT}"} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	for k := range (Metadata{}).Labels() {
		if !strings.Contains(final, k+"=") {
			t.Errorf("Dockerfile's final stage lacks label %s", k)
		}
	}
}

// TestReproducible: equal binaries and metadata give the same index digest,
// and a different binary a different one.
func TestReproducible(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := write("a", "binary-a"), write("b", "binary-b")
	m := Metadata{Repository: "example.com/replicafed", Version: "1.0.0", Commit: "abc", Source: "https://example.com"}
	digest := func(bins map[string]string) v1.Hash {
		idx, err := Index(bins, m)
		if err != nil {
			t.Fatal(err)
		}
		d, err := idx.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	first := digest(map[string]string{"linux/amd64": a, "linux/arm64": a})
	if again := digest(map[string]string{"linux/arm64": a, "linux/amd64": a}); again != first {
		t.Errorf("same inputs gave %s and %s", first, again)
	}
	if other := digest(map[string]string{"linux/amd64": b, "linux/arm64": a}); other == first {
		t.Error("a different binary gave the same digest")
	}
	layoutDir := filepath.Join(dir, "not-a-layout")
	if err := os.MkdirAll(filepath.Join(layoutDir, "keep"), 0o755); err != nil {
		t.Fatal(err)
	}
	idx, err := Index(map[string]string{"linux/amd64": a}, m)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteLayout(layoutDir, idx, m); err == nil {
		t.Error("WriteLayout replaced a directory that is not an OCI layout")
	}
}
