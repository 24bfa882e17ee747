// Command replicafed runs the multi-cluster federated replica controller.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/replicafed/replicafed/config"
	"github.com/replicafed/replicafed/internal/logging"
	"github.com/replicafed/replicafed/internal/version"
	"github.com/replicafed/replicafed/replica/server"
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1
	exitConfig = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// execute loads the configuration, sets up logging and runs until ctx ends,
// returning the process exit code; `replicafed version` prints the build
// identity and `join`/`unjoin` manage member access instead. It takes the
// environment, stdout and stderr as arguments so tests need not touch the
// real ones.
func execute(ctx context.Context, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "version" {
		if len(args) > 1 {
			fmt.Fprintf(stderr, "replicafed: version takes no arguments, got %q\n", args[1:])
			return exitConfig
		}
		fmt.Fprintln(stdout, version.Get())
		return exitOK
	}
	if len(args) > 0 && (args[0] == "join" || args[0] == "unjoin") {
		return runMemberCommand(ctx, args[0], args[1:], stdout, stderr)
	}
	fs := pflag.NewFlagSet("replicafed", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	config.BindFlags(fs)
	cfg, err := config.Load(fs, args, lookupEnv)
	if errors.Is(err, pflag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		// One line, so the reason shows in `kubectl describe pod`'s last
		// state and in CrashLoopBackOff events.
		fmt.Fprintf(stderr, "replicafed: invalid configuration: %s\n", strings.ReplaceAll(err.Error(), "\n", "; "))
		return exitConfig
	}
	log, err := logging.New(cfg.Logging)
	if err != nil {
		fmt.Fprintf(stderr, "replicafed: invalid configuration: %v\n", err)
		return exitConfig
	}
	ctrllog.SetLogger(log)
	if err := run(logr.NewContext(ctx, log), cfg); err != nil {
		log.Error(err, "Replicafed stopped")
		return exitFailed
	}
	return exitOK
}

// run starts replicafed from a validated configuration and blocks until ctx
// ends. Components (raft store, hub manager, member engines) are wired here.
func run(ctx context.Context, cfg *config.Config) error {
	v := version.Get()
	logr.FromContextOrDiscard(ctx).Info("Configuration loaded",
		"version", v.Version,
		"commit", v.Commit,
		"raftID", cfg.Raft.ID,
		"raftAdvertiseAddress", cfg.Raft.AdvertiseAddress,
		"peers", len(cfg.Raft.Peers),
		"staticClusters", len(cfg.Clusters.Static),
		"hubNamespace", cfg.Hub.Namespace)
	return server.Run(ctx, cfg)
}
