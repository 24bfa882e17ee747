// Command image assembles the replicafed container image without Docker: one
// static binary per platform on an empty base, as an OCI image index written
// to an OCI image layout directory and to a tar of that layout (an OCI
// archive, loadable with `kind load image-archive`, `docker load` and
// `skopeo copy oci-archive:`). `make image` builds the binaries and runs it.
//
//	go run ./hack/image --version 0.2.0 --commit $(git rev-parse HEAD) \
//	  --binary linux/amd64=dist/bin/linux_amd64/replicafed \
//	  --binary linux/arm64=dist/bin/linux_arm64/replicafed \
//	  --layout dist/image/oci --archive dist/image/replicafed.oci.tar
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

type binaryFlags map[string]string

func (b binaryFlags) String() string { return fmt.Sprint(map[string]string(b)) }

func (b binaryFlags) Set(v string) error {
	platform, path, ok := strings.Cut(v, "=")
	if !ok || platform == "" || path == "" {
		return fmt.Errorf("want os/arch=path, got %q", v)
	}
	b[platform] = path
	return nil
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	binaries := binaryFlags{}
	var m Metadata
	var created, layoutDir, archive string
	fs.Var(binaries, "binary", "os/arch=path of a static replicafed binary (repeat per platform)")
	fs.StringVar(&m.Repository, "repository", "ghcr.io/replicafed/replicafed", "image repository the archive is named for")
	fs.StringVar(&m.Version, "version", "", "release version (image tag and label)")
	fs.StringVar(&m.Commit, "commit", "", "git commit (label)")
	fs.StringVar(&m.Source, "source", "https://github.com/replicafed/replicafed", "source repository URL (label)")
	fs.StringVar(&created, "created", "1970-01-01T00:00:00Z", "creation time, RFC 3339 (the commit time keeps builds reproducible)")
	fs.StringVar(&layoutDir, "layout", "", "OCI image layout directory to write")
	fs.StringVar(&archive, "archive", "", "tar of the layout to write (optional)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(binaries) == 0 || m.Version == "" || m.Commit == "" || layoutDir == "" {
		return fmt.Errorf("--binary, --version, --commit and --layout are required")
	}
	t, err := time.Parse(time.RFC3339, created)
	if err != nil {
		return fmt.Errorf("--created: %w", err)
	}
	m.Created = t.UTC()
	idx, err := Index(binaries, m)
	if err != nil {
		return err
	}
	if err := WriteLayout(layoutDir, idx, m); err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return fmt.Errorf("computing the index digest: %w", err)
	}
	fmt.Printf("%s@%s -> %s\n", m.Ref(), d, layoutDir)
	if archive != "" {
		if err := WriteArchive(layoutDir, archive, m.Created); err != nil {
			return err
		}
		fmt.Printf("%s -> %s\n", m.Ref(), archive)
	}
	return nil
}
