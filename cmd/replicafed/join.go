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
	fs, f := newMemberFlagSet(cmd, stderr)
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
	log, err := logging.NewWithWriter(config.Logging{Level: "info", Format: "console"}, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "replicafed %s: %v\n", cmd, err)
		return exitFailed
	}
	ctx = ctrl.LoggerInto(ctx, log)

	if !f.consistent(cmd, fs, stderr) {
		return exitConfig
	}
	r := memberRun{name: fs.Arg(0), flags: f, stdout: stdout, stderr: stderr}
	if !r.loadKubeconfigs(cmd) {
		return exitConfig
	}
	r.grant, r.registry = f.accessOptions()
	switch {
	case f.rotate:
		return r.rotate(ctx)
	case cmd == "join":
		return r.join(ctx)
	default:
		return r.unjoin(ctx)
	}
}

// memberFlags holds the flags of join and unjoin. Flags the command does not
// register keep their zero values.
type memberFlags struct {
	memberKubeconfig, memberContext   string
	hubKubeconfig, hubContext         string
	namespace, secretLabel, secretKey string
	memberNamespace, serviceAccount   string
	clusterRole                       string

	// join only
	labels                          map[string]string
	createNamespaces, propagateDeps bool
	server                          string
	expiration                      time.Duration
	insecure, rotate                bool

	// unjoin only
	force bool
}

// newMemberFlagSet registers cmd's flags on a new FlagSet that prints its
// usage to stderr.
func newMemberFlagSet(cmd string, stderr io.Writer) (*pflag.FlagSet, *memberFlags) {
	f := &memberFlags{}
	fs := pflag.NewFlagSet("replicafed "+cmd, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, joinUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&f.memberKubeconfig, "member-kubeconfig", "", "kubeconfig with admin access to the member (required for join)")
	fs.StringVar(&f.memberContext, "member-context", "", "context in --member-kubeconfig (default: its current context)")
	fs.StringVar(&f.hubKubeconfig, "hub-kubeconfig", "", "kubeconfig for the hub (default: $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&f.hubContext, "hub-context", "", "context in the hub kubeconfig")
	fs.StringVarP(&f.namespace, "namespace", "n", memberaccess.DefaultNamespace, "hub namespace of member kubeconfig Secrets (clusters.secretNamespace)")
	fs.StringVar(&f.secretLabel, "secret-label", "sigs.k8s.io/multicluster-runtime-kubeconfig", "label registering a Secret (the key of clusters.secretSelector)")
	fs.StringVar(&f.secretKey, "secret-key", "kubeconfig", "Secret data key of the kubeconfig (clusters.secretKey)")
	fs.StringVar(&f.memberNamespace, "member-namespace", memberaccess.DefaultNamespace, "member namespace of replicafed's ServiceAccount")
	fs.StringVar(&f.serviceAccount, "service-account", memberaccess.DefaultServiceAccount, "name of replicafed's ServiceAccount in the member")
	fs.StringVar(&f.clusterRole, "cluster-role", memberaccess.ClusterRoleName, "name of the member ClusterRole and its binding")
	if cmd == "join" {
		fs.StringToStringVar(&f.labels, "labels", nil, "member labels matched by clusterSelectors, k=v,...")
		fs.BoolVar(&f.createNamespaces, "create-namespaces", true, "grant namespace creation; must match the hub's controller.createNamespaces")
		fs.BoolVar(&f.propagateDeps, "propagate-dependencies", false, "grant access to ConfigMaps, Secrets, ServiceAccounts and PersistentVolumeClaims, for FederatedReplicaSets with spec.propagateDependencies")
		fs.StringVar(&f.server, "member-server", "", "member API server address as the hub replicas reach it (default: the member kubeconfig's)")
		fs.DurationVar(&f.expiration, "token-expiration", memberaccess.DefaultTokenExpiration, "requested token lifetime; join again to renew")
		fs.BoolVar(&f.insecure, "allow-insecure-member", false, "accept a member kubeconfig that skips TLS verification (the hub Secret will skip it too; the hub then needs clusters.credentials.allowInsecureTLS)")
		fs.BoolVar(&f.rotate, "rotate", false, "renew the token of an already joined member in its hub Secret, changing nothing else")
	} else {
		fs.BoolVar(&f.force, "force", false, "unjoin even while FederatedReplicaSets place replicas in the member")
	}
	return fs, f
}

// consistent reports whether the flags given make sense together, saying on
// stderr which one does not: join needs the member kubeconfig, and --rotate
// refuses every flag it would ignore.
func (f *memberFlags) consistent(cmd string, fs *pflag.FlagSet, stderr io.Writer) bool {
	if cmd == "join" && f.memberKubeconfig == "" {
		fmt.Fprintln(stderr, "replicafed join: --member-kubeconfig is required")
		return false
	}
	if f.rotate {
		for _, name := range []string{"labels", "create-namespaces", "propagate-dependencies", "member-server", "allow-insecure-member", "cluster-role"} {
			if fs.Changed(name) {
				fmt.Fprintf(stderr, "replicafed join: --rotate changes only the token; drop --%s (join without --rotate to change it)\n", name)
				return false
			}
		}
	}
	return true
}

// accessOptions returns what to grant in the member and where to register it
// in the hub.
func (f *memberFlags) accessOptions() (memberaccess.GrantOptions, memberaccess.HubOptions) {
	grant := memberaccess.GrantOptions{Namespace: f.memberNamespace, ServiceAccount: f.serviceAccount, ClusterRoleName: f.clusterRole,
		Role: memberaccess.RoleOptions{CreateNamespaces: f.createNamespaces, PropagateDependencies: f.propagateDeps}, TokenExpiration: f.expiration, Server: f.server, AllowInsecure: f.insecure}
	reg := memberaccess.HubOptions{Namespace: f.namespace, SecretLabel: f.secretLabel, SecretKey: f.secretKey}
	return grant, reg
}

// memberRun is one join, join --rotate or unjoin of the member name.
type memberRun struct {
	name           string
	flags          *memberFlags
	hub, member    *rest.Config // member is nil when no member kubeconfig was given
	grant          memberaccess.GrantOptions
	registry       memberaccess.HubOptions
	stdout, stderr io.Writer
}

// loadKubeconfigs loads the hub's and, when given, the member's kubeconfig,
// saying on stderr which one failed.
func (r *memberRun) loadKubeconfigs(cmd string) bool {
	var err error
	if r.hub, err = loadConfig(r.flags.hubKubeconfig, r.flags.hubContext); err != nil {
		fmt.Fprintf(r.stderr, "replicafed %s: hub kubeconfig: %v\n", cmd, err)
		return false
	}
	if r.flags.memberKubeconfig != "" {
		if r.member, err = loadConfig(r.flags.memberKubeconfig, r.flags.memberContext); err != nil {
			fmt.Fprintf(r.stderr, "replicafed %s: member kubeconfig: %v\n", cmd, err)
			return false
		}
	}
	return true
}

// rotate renews the member's token in its hub Secret.
func (r *memberRun) rotate(ctx context.Context) int {
	acc, err := memberaccess.Rotate(ctx, memberaccess.RotateOptions{Name: r.name, Member: r.member, Hub: r.hub, Grant: r.grant, Registry: r.registry})
	if err != nil {
		fmt.Fprintf(r.stderr, "replicafed join --rotate: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(r.stdout, "member %s: token rotated in Secret %s/%s in the hub, valid until %s\n",
		r.name, r.flags.namespace, r.name, acc.ExpiresAt.UTC().Format(time.RFC3339))
	return exitOK
}

// join grants replicafed access in the member and registers it in the hub.
func (r *memberRun) join(ctx context.Context) int {
	acc, err := memberaccess.Join(ctx, memberaccess.JoinOptions{Name: r.name, Labels: r.flags.labels, Member: r.member, Hub: r.hub, Grant: r.grant, Registry: r.registry})
	if err != nil {
		fmt.Fprintf(r.stderr, "replicafed join: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(r.stdout, "member %s joined: Secret %s/%s in the hub, ServiceAccount %s/%s in the member, token valid until %s\n",
		r.name, r.flags.namespace, r.name, r.flags.memberNamespace, r.flags.serviceAccount, acc.ExpiresAt.UTC().Format(time.RFC3339))
	return exitOK
}

// unjoin removes the member's registration from the hub and, with a member
// kubeconfig, replicafed's access in the member.
func (r *memberRun) unjoin(ctx context.Context) int {
	if r.member == nil {
		fmt.Fprintln(r.stderr, "replicafed unjoin: no --member-kubeconfig; removing the hub Secret only")
	}
	err := memberaccess.Unjoin(ctx, memberaccess.UnjoinOptions{Name: r.name, Member: r.member, Hub: r.hub, Force: r.flags.force, Grant: r.grant, Registry: r.registry})
	if err != nil {
		fmt.Fprintf(r.stderr, "replicafed unjoin: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(r.stdout, "member %s unjoined\n", r.name)
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
