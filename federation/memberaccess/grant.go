package memberaccess

import (
	"context"
	"errors"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/replicafed/replicafed/api/crds"
	"github.com/replicafed/replicafed/federation/membersetup"
)

// DefaultTokenExpiration is how long a granted token is requested for. The
// member's API server may shorten it (--service-account-max-token-expiration);
// Access.ExpiresAt says what it granted. Running Grant again (or `replicafed
// join` again) mints a fresh token; deleting the ServiceAccount revokes every
// token it was issued.
const DefaultTokenExpiration = 365 * 24 * time.Hour

// GrantOptions say where and how access is provisioned in a member.
type GrantOptions struct {
	// Namespace of the ServiceAccount; default DefaultNamespace. Created when
	// missing.
	Namespace string
	// ServiceAccount name; default DefaultServiceAccount.
	ServiceAccount string
	// ClusterRoleName names the ClusterRole and its binding; default
	// ClusterRoleName.
	ClusterRoleName string
	// Role selects the optional rules; it must match the hub's
	// controller.createNamespaces.
	Role RoleOptions
	// TokenExpiration is requested for the token; default
	// DefaultTokenExpiration.
	TokenExpiration time.Duration
	// Server is the member API server address the hub should dial; default
	// the Host of the admin configuration Grant is given.
	Server string
	// ClusterName names the cluster and context inside the kubeconfig;
	// default "member".
	ClusterName string
	// AllowInsecure lets an admin configuration that skips TLS verification
	// produce a kubeconfig that skips it too; otherwise Grant refuses, so a
	// test setting does not end up in the hub unnoticed.
	AllowInsecure bool
}

func (o GrantOptions) withDefaults() GrantOptions {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.ServiceAccount == "" {
		o.ServiceAccount = DefaultServiceAccount
	}
	if o.ClusterRoleName == "" {
		o.ClusterRoleName = ClusterRoleName
	}
	if o.TokenExpiration <= 0 {
		o.TokenExpiration = DefaultTokenExpiration
	}
	if o.ClusterName == "" {
		o.ClusterName = "member"
	}
	return o
}

// Access is what Grant provisioned.
type Access struct {
	// Kubeconfig reaches the member as the ServiceAccount: server address,
	// CA and a bearer token, nothing else (no exec plugin, no file paths), so
	// it works from a Secret in the hub.
	Kubeconfig []byte
	// ExpiresAt is when the token expires.
	ExpiresAt time.Time
	// Config is Kubeconfig as a client configuration.
	Config *rest.Config
}

// Grant provisions replicafed's access in a member, using admin (credentials
// allowed to create CRDs and RBAC objects there): it installs the
// MemberReplicaSet CRD (the member ClusterRole cannot create CRDs), creates
// the namespace, the ServiceAccount, the ClusterRole and its binding
// (updating them when they differ), requests a token for the ServiceAccount
// and returns a kubeconfig carrying it. It is idempotent; each call mints a
// new token.
func Grant(ctx context.Context, admin *rest.Config, o GrantOptions) (*Access, error) {
	o = o.withDefaults()
	if admin.Insecure && !o.AllowInsecure {
		return nil, errors.New("the member configuration skips TLS verification; the kubeconfig for the hub would too (allow it explicitly)")
	}
	log := ctrl.LoggerFrom(ctx)
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return nil, fmt.Errorf("building member client: %w", err)
	}
	memberCRDs, err := crds.Member()
	if err != nil {
		return nil, err
	}
	if err := membersetup.EnsureCRDs(ctx, admin, memberCRDs); err != nil {
		return nil, fmt.Errorf("installing the MemberReplicaSet CRD: %w", err)
	}
	if err := ensureNamespace(ctx, cs, o.Namespace); err != nil {
		return nil, err
	}
	if err := ensureServiceAccount(ctx, cs, o); err != nil {
		return nil, err
	}
	if err := ensureClusterRole(ctx, cs, o); err != nil {
		return nil, err
	}
	if err := ensureBinding(ctx, cs, o); err != nil {
		return nil, err
	}
	tr, err := requestToken(ctx, cs, o)
	if err != nil {
		return nil, err
	}
	acc, err := kubeconfigFor(admin, o, tr.Status.Token)
	if err != nil {
		return nil, err
	}
	acc.ExpiresAt = tr.Status.ExpirationTimestamp.Time
	log.V(1).Info("Granted member access", "serviceAccount", klog.KRef(o.Namespace, o.ServiceAccount),
		"clusterRole", o.ClusterRoleName, "tokenExpires", acc.ExpiresAt)
	return acc, nil
}

// Revoke removes what Grant created except the namespace and the CRD:
// deleting the CRD would delete every MemberReplicaSet and, through the
// garbage collector, their pods. Deleting the ServiceAccount invalidates
// every token issued for it. Missing objects are not an error.
func Revoke(ctx context.Context, admin *rest.Config, o GrantOptions) error {
	o = o.withDefaults()
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return fmt.Errorf("building member client: %w", err)
	}
	var errs []error
	if err := cs.RbacV1().ClusterRoleBindings().Delete(ctx, o.ClusterRoleName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting ClusterRoleBinding %s: %w", o.ClusterRoleName, err))
	}
	if err := cs.RbacV1().ClusterRoles().Delete(ctx, o.ClusterRoleName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting ClusterRole %s: %w", o.ClusterRoleName, err))
	}
	if err := cs.CoreV1().ServiceAccounts(o.Namespace).Delete(ctx, o.ServiceAccount, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting ServiceAccount %s/%s: %w", o.Namespace, o.ServiceAccount, err))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Revoked member access", "serviceAccount", klog.KRef(o.Namespace, o.ServiceAccount))
	return nil
}

func ensureNamespace(ctx context.Context, cs kubernetes.Interface, name string) error {
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: copyLabels()}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}

func ensureServiceAccount(ctx context.Context, cs kubernetes.Interface, o GrantOptions) error {
	sa := &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: o.ServiceAccount, Labels: copyLabels()},
		// Only the hub uses this account, through its kubeconfig Secret.
		AutomountServiceAccountToken: new(false),
	}
	_, err := cs.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, sa, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating ServiceAccount %s/%s: %w", o.Namespace, o.ServiceAccount, err)
	}
	return nil
}

func ensureClusterRole(ctx context.Context, cs kubernetes.Interface, o GrantOptions) error {
	want := ClusterRole(o.Role)
	want.Name = o.ClusterRoleName
	api := cs.RbacV1().ClusterRoles()
	got, err := api.Get(ctx, want.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if _, err := api.Create(ctx, want, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating ClusterRole %s: %w", want.Name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading ClusterRole %s: %w", want.Name, err)
	}
	if equalRules(got.Rules, want.Rules) {
		return nil
	}
	got.Rules = want.Rules
	if _, err := api.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating ClusterRole %s: %w", want.Name, err)
	}
	return nil
}

func ensureBinding(ctx context.Context, cs kubernetes.Interface, o GrantOptions) error {
	want := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: o.ClusterRoleName, Labels: copyLabels()},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: o.ClusterRoleName},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: o.Namespace, Name: o.ServiceAccount}},
	}
	api := cs.RbacV1().ClusterRoleBindings()
	got, err := api.Get(ctx, want.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if _, err := api.Create(ctx, want, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating ClusterRoleBinding %s: %w", want.Name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading ClusterRoleBinding %s: %w", want.Name, err)
	}
	if got.RoleRef != want.RoleRef {
		// roleRef is immutable: replace the binding.
		if err := api.Delete(ctx, want.Name, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("replacing ClusterRoleBinding %s: %w", want.Name, err)
		}
		if _, err := api.Create(ctx, want, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating ClusterRoleBinding %s: %w", want.Name, err)
		}
		return nil
	}
	if len(got.Subjects) == 1 && got.Subjects[0] == want.Subjects[0] {
		return nil
	}
	got.Subjects = want.Subjects
	if _, err := api.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating ClusterRoleBinding %s: %w", want.Name, err)
	}
	return nil
}

// kubeconfigFor builds a token kubeconfig for the member from the admin
// configuration's server and CA, everything inline: whatever the admin
// configuration authenticates with (client certificate, exec plugin, token
// file) stays out of it.
func kubeconfigFor(admin *rest.Config, o GrantOptions, token string) (*Access, error) {
	tlsCfg := rest.CopyConfig(admin)
	if err := rest.LoadTLSFiles(tlsCfg); err != nil {
		return nil, fmt.Errorf("reading the member CA: %w", err)
	}
	server := o.Server
	if server == "" {
		server = admin.Host
	}
	if server == "" {
		return nil, errors.New("member API server address is unknown")
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters[o.ClusterName] = &clientcmdapi.Cluster{
		Server:                   server,
		CertificateAuthorityData: tlsCfg.CAData,
		TLSServerName:            tlsCfg.ServerName,
		InsecureSkipTLSVerify:    tlsCfg.Insecure,
	}
	user := o.Namespace + "/" + o.ServiceAccount
	kc.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts[o.ClusterName] = &clientcmdapi.Context{Cluster: o.ClusterName, AuthInfo: user}
	kc.CurrentContext = o.ClusterName
	return encodeAccess(kc)
}

// requestToken asks the member for a token of the grant's ServiceAccount
// that lasts the grant's TokenExpiration.
func requestToken(ctx context.Context, cs kubernetes.Interface, o GrantOptions) (*authenticationv1.TokenRequest, error) {
	secs := int64(o.TokenExpiration / time.Second)
	tr, err := cs.CoreV1().ServiceAccounts(o.Namespace).CreateToken(ctx, o.ServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("requesting a token for ServiceAccount %s/%s: %w", o.Namespace, o.ServiceAccount, err)
	}
	return tr, nil
}

// encodeAccess serialises kc and reads it back as the client configuration
// it gives, so what is written and what is used are the same.
func encodeAccess(kc *clientcmdapi.Config) (*Access, error) {
	data, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, fmt.Errorf("encoding member kubeconfig: %w", err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return nil, fmt.Errorf("decoding member kubeconfig: %w", err)
	}
	return &Access{Kubeconfig: data, Config: cfg}, nil
}
