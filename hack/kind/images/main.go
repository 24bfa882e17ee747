// Command images assembles the container images a kind node needs (the
// control plane's, kube-proxy, etcd, CoreDNS, pause) and the project's test
// workload from binaries built here, because no registry is reachable to
// pull them from. It writes them, tagged, into one `docker save` style
// archive that `ctr images import` loads into the node's containerd.
//
//	images --out images.tar --base-layer rootfs.tar.gz \
//	  --image registry.k8s.io/kube-apiserver:v1.36.3 --on base \
//	  --add /usr/local/bin/kube-apiserver=bin/kind-node/kube-apiserver \
//	  --image registry.k8s.io/pause:3.10.2 --on scratch \
//	  --add /pause=/tmp/pause --entrypoint /pause
//
// --image starts an image; the flags after it (--on, --add, --entrypoint,
// --user) describe it. "--on base" puts the image on the given root file
// system layer (the node's Debian rootfs: glibc for cgo binaries, iptables
// for kube-proxy); "--on scratch" gives it only its own layer. Images
// sharing the base layer share its blob in the archive and in containerd.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	var (
		specs []*Spec
		cur   *Spec
	)
	fs := flag.NewFlagSet("images", flag.ContinueOnError)
	out := fs.String("out", "", "archive to write")
	baseLayer := fs.String("base-layer", "", "root file system tarball (gzip or plain) for images --on base")
	need := func(name string) (*Spec, error) {
		if cur == nil {
			return nil, fmt.Errorf("--%s before any --image", name)
		}
		return cur, nil
	}
	fs.Func("image", "start an image with this reference", func(ref string) error {
		cur = &Spec{Ref: ref}
		specs = append(specs, cur)
		return nil
	})
	fs.Func("on", "base of the current image: base or scratch", func(v string) error {
		s, err := need("on")
		if err != nil {
			return err
		}
		switch v {
		case "base":
			s.OnBase = true
		case "scratch":
			s.OnBase = false
		default:
			return fmt.Errorf("--on %q: want base or scratch", v)
		}
		return nil
	})
	fs.Func("add", "DEST=SRC: put file SRC at DEST (mode 0755) in the current image", func(v string) error {
		s, err := need("add")
		if err != nil {
			return err
		}
		dest, src, ok := strings.Cut(v, "=")
		if !ok || !strings.HasPrefix(dest, "/") || src == "" {
			return fmt.Errorf("--add %q: want /DEST=SRC", v)
		}
		s.Files = append(s.Files, File{Dest: dest, Src: src})
		return nil
	})
	fs.Func("entrypoint", "entrypoint of the current image (comma separated)", func(v string) error {
		s, err := need("entrypoint")
		if err != nil {
			return err
		}
		s.Entrypoint = strings.Split(v, ",")
		return nil
	})
	fs.Func("user", "user of the current image (uid:gid)", func(v string) error {
		s, err := need("user")
		if err != nil {
			return err
		}
		s.User = v
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || len(specs) == 0 {
		return fmt.Errorf("--out and at least one --image are required")
	}
	return Write(*out, *baseLayer, specs)
}
