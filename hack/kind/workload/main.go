// Command workload is the container the kind clusters' test and demo pods
// run: a static HTTP server (no registry to pull a stock image from) that
// answers probes and says which pod served the request.
//
// Endpoints: /healthz (liveness), /readyz (readiness; 503 once SIGTERM has
// been received, so endpoints drop the pod while it drains), / (pod name).
// The listen address is $LISTEN_ADDR, ":8080" by default.
//
// As a client, for checks from inside a pod (the image has no shell):
// `workload get URL` prints the body of a GET and fails on any other status
// than 200; `workload lookup NAME` prints the addresses NAME resolves to;
// `workload dial HOST:PORT` opens a TCP connection and closes it (for ports
// that do not speak plain HTTP, such as raft's).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) == 3 {
		if err := client(os.Args[1], os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	addr := os.Getenv("LISTEN_ADDR")
	if addr == "" {
		addr = ":8080"
	}
	host, _ := os.Hostname()
	var draining atomic.Bool

	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if draining.Load() {
			http.Error(w, "draining", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "served by %s\n", host)
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		draining.Store(true)
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdown); err != nil {
			log.Printf("Shutdown: %v", err)
		}
	}()
	log.Printf("Serving on %s", addr)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatalf("Serving: %v", err)
	}
}

// client runs one check: get URL, lookup NAME or dial HOST:PORT, each
// bounded by 10 s (dial by 5 s, so a dropped SYN fails well inside an exec).
func client(cmd, arg string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	switch cmd {
	case "get":
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, arg, nil)
		if err != nil {
			return fmt.Errorf("building request for %s: %w", arg, err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("getting %s: %w", arg, err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		if err != nil {
			return fmt.Errorf("reading %s: %w", arg, err)
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("getting %s: %s", arg, resp.Status)
		}
		_, err = os.Stdout.Write(body)
		return err
	case "lookup":
		addrs, err := net.DefaultResolver.LookupHost(ctx, arg)
		if err != nil {
			return fmt.Errorf("looking up %s: %w", arg, err)
		}
		for _, a := range addrs {
			fmt.Println(a)
		}
		return nil
	case "dial":
		d := net.Dialer{Timeout: 5 * time.Second}
		conn, err := d.DialContext(ctx, "tcp", arg)
		if err != nil {
			return fmt.Errorf("dialing %s: %w", arg, err)
		}
		fmt.Printf("connected to %s\n", conn.RemoteAddr())
		return conn.Close()
	default:
		return fmt.Errorf("unknown command %q: want get URL, lookup NAME or dial HOST:PORT", cmd)
	}
}
