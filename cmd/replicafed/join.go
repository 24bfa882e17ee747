package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/replicafed/replicafed/config"
	"github.com/replicafed/replicafed/federation/memberaccess"
	"github.com/replicafed/replicafed/internal/logging"
)

const joinUsage = `Usage:
  replicafed join NAME --member-kubeconfig FILE [--hub-kubeconfig FILE] [--labels k=v,...] [flags]
  replicafed join NAME --rotate --member-kubeconfig FILE [--hub-kubeconfig FILE] [--token-expiration D]
  replicafed unjoin NAME [--member-kubeconfig FILE] [--hub-kubeconfig FILE] [--force] [flags]

join creates, in the member, the MemberReplicaSet CRD, a ServiceAccount, the
least-privilege member ClusterRole and its binding, and a token; then writes
the labelled kubeconfig Secret (server, CA, token) into the hub's cluster
registry. unjoin deletes that Secret and the member's ServiceAccount, role and
binding; it refuses while FederatedReplicaSets place replicas there unless
--force. The member kubeconfig needs admin rights there; it is used only by
this command and never stored.

join --rotate renews the token of an already joined member: it requests a
fresh token for the ServiceAccount and replaces only the token in the hub
Secret's kubeconfig, keeping its server, CA, labels and annotations. Rotate
before the token expires (the MemberCluster says CredentialsExpiring 30 days
before, and replicafed_member_credentials_expiry_seconds counts down). The
previous token stays valid until its own expiry; unjoin revokes every token.

Flags:
`

// runMemberCommand runs `join` or `unjoin` with args (after the command
// name) and returns the exit code.
func runMemberCommand(ctx context.Context, cmd string, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("replicafed "+cmd, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, joinUsage)
		fs.PrintDefaults()
	}
	memberKC := fs.String("member-kubeconfig", "", "kubeconfig with admin access to the member (required for join)")
	memberCtx := fs.String("member-context", "", "context in --member-kubeconfig (default: its current context)")
	hubKC := fs.String("hub-kubeconfig", "", "kubeconfig for the hub (default: $KUBECONFIG or ~/.kube/config)")
	hubCtx := fs.String("hub-context", "", "context in the hub kubeconfig")
	namespace := fs.StringP("namespace", "n", memberaccess.DefaultNamespace, "hub namespace of member kubeconfig Secrets (clusters.secretNamespace)")
	secretLabel := fs.String("secret-label", "sigs.k8s.io/multicluster-runtime-kubeconfig", "label registering a Secret (the key of clusters.secretSelector)")
	secretKey := fs.String("secret-key", "kubeconfig", "Secret data key of the kubeconfig (clusters.secretKey)")
	memberNS := fs.String("member-namespace", memberaccess.DefaultNamespace, "member namespace of replicafed's ServiceAccount")
	sa := fs.String("service-account", memberaccess.DefaultServiceAccount, "name of replicafed's ServiceAccount in the member")
	role := fs.String("cluster-role", memberaccess.ClusterRoleName, "name of the member ClusterRole and its binding")
	var labels map[string]string
	var createNS, propagateDeps, force, insecure, rotate bool
	var server string
	var expiration time.Duration
	if cmd == "join" {
		fs.StringToStringVar(&labels, "labels", nil, "member labels matched by clusterSelectors, k=v,...")
		fs.BoolVar(&createNS, "create-namespaces", true, "grant namespace creation; must match the hub's controller.createNamespaces")
		fs.BoolVar(&propagateDeps, "propagate-dependencies", false, "grant access to ConfigMaps, Secrets, ServiceAccounts and PersistentVolumeClaims, for FederatedReplicaSets with spec.propagateDependencies")
		fs.StringVar(&server, "member-server", "", "member API server address as the hub replicas reach it (default: the member kubeconfig's)")
		fs.DurationVar(&expiration, "token-expiration", memberaccess.DefaultTokenExpiration, "requested token lifetime; join again to renew")
		fs.BoolVar(&insecure, "allow-insecure-member", false, "accept a member kubeconfig that skips TLS verification (the hub Secret will skip it too; the hub then needs clusters.credentials.allowInsecureTLS)")
		fs.BoolVar(&rotate, "rotate", false, "renew the token of an already joined member in its hub Secret, changing nothing else")
	} else {
		fs.BoolVar(&force, "force", false, "unjoin even while FederatedReplicaSets place replicas in the member")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintf(stderr, "replicafed %s: %v\n", cmd, err)
		return exitConfig
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "replicafed %s: exactly one member NAME expected, got %d arguments\n", cmd, fs.NArg())
		return exitConfig
	}
	name := fs.Arg(0)
	log, err := logging.NewWithWriter(config.Logging{Level: "info", Format: "console"}, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "replicafed %s: %v\n", cmd, err)
		return exitFailed
	}
	ctx = ctrl.LoggerInto(ctx, log)

	if cmd == "join" && *memberKC == "" {
		fmt.Fprintln(stderr, "replicafed join: --member-kubeconfig is required")
		return exitConfig
	}
	if rotate {
		for _, f := range []string{"labels", "create-namespaces", "propagate-dependencies", "member-server", "allow-insecure-member", "cluster-role"} {
			if fs.Changed(f) {
				fmt.Fprintf(stderr, "replicafed join: --rotate changes only the token; drop --%s (join without --rotate to change it)\n", f)
				return exitConfig
			}
		}
	}
	hub, err := loadConfig(*hubKC, *hubCtx)
	if err != nil {
		fmt.Fprintf(stderr, "replicafed %s: hub kubeconfig: %v\n", cmd, err)
		return exitConfig
	}
	var member *rest.Config
	if *memberKC != "" {
		if member, err = loadConfig(*memberKC, *memberCtx); err != nil {
			fmt.Fprintf(stderr, "replicafed %s: member kubeconfig: %v\n", cmd, err)
			return exitConfig
		}
	}
	grant := memberaccess.GrantOptions{Namespace: *memberNS, ServiceAccount: *sa, ClusterRoleName: *role,
		Role: memberaccess.RoleOptions{CreateNamespaces: createNS, PropagateDependencies: propagateDeps}, TokenExpiration: expiration, Server: server, AllowInsecure: insecure}
	reg := memberaccess.HubOptions{Namespace: *namespace, SecretLabel: *secretLabel, SecretKey: *secretKey}

	if rotate {
		acc, err := memberaccess.Rotate(ctx, memberaccess.RotateOptions{Name: name, Member: member, Hub: hub, Grant: grant, Registry: reg})
		if err != nil {
			fmt.Fprintf(stderr, "replicafed join --rotate: %v\n", err)
			return exitFailed
		}
		fmt.Fprintf(stdout, "member %s: token rotated in Secret %s/%s in the hub, valid until %s\n",
			name, *namespace, name, acc.ExpiresAt.UTC().Format(time.RFC3339))
		return exitOK
	}
	if cmd == "join" {
		acc, err := memberaccess.Join(ctx, memberaccess.JoinOptions{Name: name, Labels: labels, Member: member, Hub: hub, Grant: grant, Registry: reg})
		if err != nil {
			fmt.Fprintf(stderr, "replicafed join: %v\n", err)
			return exitFailed
		}
		fmt.Fprintf(stdout, "member %s joined: Secret %s/%s in the hub, ServiceAccount %s/%s in the member, token valid until %s\n",
			name, *namespace, name, *memberNS, *sa, acc.ExpiresAt.UTC().Format(time.RFC3339))
		return exitOK
	}
	if member == nil {
		fmt.Fprintln(stderr, "replicafed unjoin: no --member-kubeconfig; removing the hub Secret only")
	}
	err = memberaccess.Unjoin(ctx, memberaccess.UnjoinOptions{Name: name, Member: member, Hub: hub, Force: force, Grant: grant, Registry: reg})
	if err != nil {
		fmt.Fprintf(stderr, "replicafed unjoin: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "member %s unjoined\n", name)
	return exitOK
}

// loadConfig loads a kubeconfig file (empty: the default loading rules).
func loadConfig(path, context string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		rules.ExplicitPath = path
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
}
