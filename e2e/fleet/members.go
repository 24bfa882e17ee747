package fleet

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/federation/memberaccess"
	"github.com/replicafed/replicafed/internal/test/faultproxy"
)

// Member credentials issued for Secret registration: a ServiceAccount bound to
// replicafed's member ClusterRole in each member, whose tokens
// RotateMemberCredentials renews.
const (
	memberSANamespace = "kube-system"
	memberSAName      = "replicafed-member"
	// secretLabel is the default clusters.secretSelector label.
	secretLabel = "sigs.k8s.io/multicluster-runtime-kubeconfig"
	// tokenLifetime outlives any test run.
	tokenLifetime = 24 * 60 * 60
)

// startProxies puts a fault proxy in front of each member named in o.Proxied.
// They forward untouched until a test sets faults.
func (f *Fleet) startProxies(o Options) error {
	for _, name := range o.Proxied {
		m := f.Member(name)
		if m == nil {
			return fmt.Errorf("proxied member %s is not in the fleet", name)
		}
		cfg := m.Config()
		h := fnv.New64a()
		_, _ = h.Write([]byte(name))
		p, err := faultproxy.New(faultproxy.Options{Upstream: cfg.Host, UpstreamCA: cfg.CAData, Seed: h.Sum64()})
		if err != nil {
			return fmt.Errorf("starting fault proxy for %s: %w", name, err)
		}
		f.proxies[name] = p
	}
	return nil
}

// Proxy returns the fault proxy in front of a member, or nil if replicafed
// reaches that member directly.
func (f *Fleet) Proxy(member string) *faultproxy.Proxy { return f.proxies[member] }

// endpoint is where replicafed reaches a member: the member itself or its
// fault proxy.
func (f *Fleet) endpoint(m Cluster) (server string, ca []byte) {
	if p := f.proxies[m.Name()]; p != nil {
		return p.URL(), p.CAData()
	}
	cfg := m.Config()
	return cfg.Host, cfg.CAData
}

// staticKubeconfig writes the kubeconfig a static member entry points at: the
// member's admin credentials, at its endpoint.
func (f *Fleet) staticKubeconfig(m Cluster) (string, error) {
	if f.proxies[m.Name()] == nil {
		return m.Kubeconfig(), nil
	}
	server, ca := f.endpoint(m)
	cfg := m.Config()
	raw, err := kubeconfig(m.Name(), server, ca, &clientcmdapi.AuthInfo{
		Token: cfg.BearerToken, ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData,
	})
	if err != nil {
		return "", err
	}
	path := filepath.Join(f.Dir, m.Name()+"-via-proxy.kubeconfig")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		return "", fmt.Errorf("writing kubeconfig of %s: %w", m.Name(), err)
	}
	return path, nil
}

func kubeconfig(name, server string, ca []byte, auth *clientcmdapi.AuthInfo) ([]byte, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	kc.AuthInfos[name] = auth
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	raw, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, fmt.Errorf("encoding kubeconfig of %s: %w", name, err)
	}
	return raw, nil
}

// registerSecrets creates the member ServiceAccounts and one kubeconfig
// Secret per member in the hub, as an operator registers members.
func (f *Fleet) registerSecrets(ctx context.Context, o Options) error {
	for _, m := range f.Members {
		if err := ensureMemberAccount(ctx, m.Config(), m.Name()); err != nil {
			return fmt.Errorf("member %s: %w", m.Name(), err)
		}
		if err := f.writeMemberSecret(ctx, m, o.MemberLabels[m.Name()]); err != nil {
			return err
		}
	}
	return nil
}

// ensureMemberAccount provisions replicafed's least-privilege access in a
// member (federation/memberaccess: the member ClusterRole, no more), so every
// e2e test fails if that role is short of anything replicafed does.
func ensureMemberAccount(ctx context.Context, cfg *rest.Config, name string) error {
	_, err := memberaccess.Grant(ctx, cfg, memberaccess.GrantOptions{
		Namespace: memberSANamespace, ServiceAccount: memberSAName, ClusterName: name,
		Role: memberaccess.RoleOptions{CreateNamespaces: true},
	})
	if err != nil {
		return fmt.Errorf("granting replicafed's member role: %w", err)
	}
	return nil
}

// writeMemberSecret issues a fresh ServiceAccount token for a member and
// writes (creates or replaces) its kubeconfig Secret in the hub.
func (f *Fleet) writeMemberSecret(ctx context.Context, m Cluster, labels map[string]string) error {
	cs, err := kubernetes.NewForConfig(m.Config())
	if err != nil {
		return fmt.Errorf("member %s client: %w", m.Name(), err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(memberSANamespace).CreateToken(ctx, memberSAName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](tokenLifetime)},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("issuing a token in member %s: %w", m.Name(), err)
	}
	server, ca := f.endpoint(m)
	raw, err := kubeconfig(m.Name(), server, ca, &clientcmdapi.AuthInfo{Token: tr.Status.Token})
	if err != nil {
		return err
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: m.Name()}}
	err = f.HubClient.Get(ctx, client.ObjectKeyFromObject(sec), sec)
	switch {
	case apierrors.IsNotFound(err):
		sec.Labels = map[string]string{secretLabel: "true"}
		for k, v := range labels {
			sec.Labels[k] = v
		}
		sec.Data = map[string][]byte{"kubeconfig": raw}
		if err := f.HubClient.Create(ctx, sec); err != nil {
			return fmt.Errorf("creating kubeconfig Secret of %s: %w", m.Name(), err)
		}
	case err != nil:
		return fmt.Errorf("reading kubeconfig Secret of %s: %w", m.Name(), err)
	default:
		sec.Data = map[string][]byte{"kubeconfig": raw}
		if err := f.HubClient.Update(ctx, sec); err != nil {
			return fmt.Errorf("updating kubeconfig Secret of %s: %w", m.Name(), err)
		}
	}
	return nil
}

// RotateMemberCredentials issues a new token for a member and writes it into
// the member's kubeconfig Secret, as a credential rotation does; the old token
// stays valid. Only for fleets started with SecretMembers.
func (f *Fleet) RotateMemberCredentials(ctx context.Context, member string) error {
	if !f.secretMembers {
		return fmt.Errorf("members are static config entries, not Secrets: start the fleet with SecretMembers")
	}
	m := f.Member(member)
	if m == nil {
		return fmt.Errorf("no member %s", member)
	}
	return f.writeMemberSecret(ctx, m, nil)
}
