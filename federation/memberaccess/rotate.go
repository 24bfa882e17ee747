package memberaccess

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RotateOptions describe renewing a joined member's token.
type RotateOptions struct {
	// Name of the member (its hub Secret's name).
	Name string
	// Member is an admin configuration for the member, allowed to request
	// tokens for replicafed's ServiceAccount.
	Member *rest.Config
	// Hub is a configuration for the hub allowed to read and update Secrets
	// in the registry namespace.
	Hub *rest.Config
	// Grant names the ServiceAccount (Namespace, ServiceAccount) and the
	// TokenExpiration to request; the rest is not used.
	Grant GrantOptions
	// Registry locates the cluster registry in the hub.
	Registry HubOptions
}

// Rotate requests a fresh token for an already joined member's
// ServiceAccount and writes it into the member's hub Secret in place: only
// the token of the kubeconfig's current user changes; the server, the CA,
// the Secret's labels and annotations stay. It changes nothing else in the
// member (no RBAC, no CRD). The previous token stays valid until its own
// expiry: tokens of a ServiceAccount cannot be revoked one by one (deleting
// the ServiceAccount, as unjoin does, revokes them all).
func Rotate(ctx context.Context, o RotateOptions) (*Access, error) {
	reg := o.Registry.withDefaults()
	g := o.Grant.withDefaults()
	if err := validateName(o.Name); err != nil {
		return nil, err
	}
	if o.Member == nil {
		return nil, fmt.Errorf("no member configuration")
	}
	hub, err := hubClient(o.Hub)
	if err != nil {
		return nil, err
	}
	sec := &corev1.Secret{}
	key := client.ObjectKey{Namespace: reg.Namespace, Name: o.Name}
	if err := hub.Get(ctx, key, sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("member %s is not joined (no Secret %s/%s in the hub): run replicafed join without --rotate", o.Name, reg.Namespace, o.Name)
		}
		return nil, fmt.Errorf("reading member Secret %s/%s in the hub: %w", reg.Namespace, o.Name, err)
	}
	kc, err := clientcmd.Load(sec.Data[reg.SecretKey])
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig in Secret %s/%s: %w", reg.Namespace, o.Name, err)
	}
	kctx := kc.Contexts[kc.CurrentContext]
	if kctx == nil || kc.AuthInfos[kctx.AuthInfo] == nil || kc.AuthInfos[kctx.AuthInfo].Token == "" {
		return nil, fmt.Errorf("the kubeconfig in Secret %s/%s has no inline token to rotate (was it written by replicafed join?)", reg.Namespace, o.Name)
	}
	cs, err := kubernetes.NewForConfig(o.Member)
	if err != nil {
		return nil, fmt.Errorf("building member client: %w", err)
	}
	tr, err := requestToken(ctx, cs, g)
	if err != nil {
		return nil, fmt.Errorf("member %s: %w", o.Name, err)
	}
	kc.AuthInfos[kctx.AuthInfo].Token = tr.Status.Token
	acc, err := encodeAccess(kc)
	if err != nil {
		return nil, err
	}
	// An update, not a patch: a Secret changed since it was read (another
	// rotation, say) makes this fail instead of writing over it.
	sec.Data[reg.SecretKey] = acc.Kubeconfig
	if err := hub.Update(ctx, sec); err != nil {
		return nil, fmt.Errorf("updating member Secret %s/%s in the hub: %w", reg.Namespace, o.Name, err)
	}
	acc.ExpiresAt = tr.Status.ExpirationTimestamp.Time
	ctrl.LoggerFrom(ctx).Info("Member token rotated", "cluster", o.Name, "secret", klog.KRef(reg.Namespace, o.Name), "tokenExpires", acc.ExpiresAt)
	return acc, nil
}
