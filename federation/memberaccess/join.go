package memberaccess

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/multicluster-runtime/providers/kubeconfig"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/internal/kubescheme"
)

// HubOptions locate the cluster registry in the hub; they must match the
// replicafed configuration's clusters.secretNamespace, secretSelector and
// secretKey.
type HubOptions struct {
	// Namespace of member kubeconfig Secrets; default DefaultNamespace.
	Namespace string
	// SecretLabel is the label whose value "true" registers a Secret;
	// default sigs.k8s.io/multicluster-runtime-kubeconfig.
	SecretLabel string
	// SecretKey is the data key of the kubeconfig; default "kubeconfig".
	SecretKey string
}

func (o HubOptions) withDefaults() HubOptions {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.SecretLabel == "" {
		o.SecretLabel = kubeconfig.DefaultKubeconfigSecretLabel
	}
	if o.SecretKey == "" {
		o.SecretKey = kubeconfig.DefaultKubeconfigSecretKey
	}
	return o
}

// JoinOptions describe one member joining.
type JoinOptions struct {
	// Name of the member: the hub Secret's name and the name placements and
	// status use.
	Name string
	// Labels are matched by clusterSelectors (put on the hub Secret).
	Labels map[string]string
	// Member is an admin configuration for the member.
	Member *rest.Config
	// Hub is a configuration for the hub allowed to write Secrets in the
	// registry namespace.
	Hub *rest.Config
	// Grant says how access is provisioned in the member.
	Grant GrantOptions
	// Registry locates the cluster registry in the hub.
	Registry HubOptions
}

// Join grants replicafed access in the member and registers it in the hub
// with a kubeconfig carrying the granted token. Joining again refreshes the
// token and the labels.
func Join(ctx context.Context, o JoinOptions) (*Access, error) {
	reg := o.Registry.withDefaults()
	if err := validateName(o.Name); err != nil {
		return nil, err
	}
	if err := validateLabels(o.Labels, reg.SecretLabel); err != nil {
		return nil, err
	}
	g := o.Grant
	if g.ClusterName == "" {
		g.ClusterName = o.Name
	}
	acc, err := Grant(ctx, o.Member, g)
	if err != nil {
		return nil, fmt.Errorf("granting access in member %s: %w", o.Name, err)
	}
	hub, err := hubClient(o.Hub)
	if err != nil {
		return nil, err
	}
	if err := Register(ctx, hub, o.Name, o.Labels, acc.Kubeconfig, reg); err != nil {
		return nil, err
	}
	ctrl.LoggerFrom(ctx).Info("Member joined", "cluster", o.Name, "secret", klog.KRef(reg.Namespace, o.Name))
	return acc, nil
}

// Register writes the member's labelled kubeconfig Secret in the hub,
// creating or replacing its data and labels.
func Register(ctx context.Context, hub client.Client, name string, labels map[string]string, kubeconfigData []byte, o HubOptions) error {
	o = o.withDefaults()
	want := map[string]string{}
	maps.Copy(want, labels)
	want[o.SecretLabel] = "true"
	sec := &corev1.Secret{}
	err := hub.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: name}, sec)
	switch {
	case apierrors.IsNotFound(err):
		sec = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: name, Labels: want},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{o.SecretKey: kubeconfigData},
		}
		if err := hub.Create(ctx, sec); err != nil {
			return fmt.Errorf("creating member Secret %s/%s in the hub: %w", o.Namespace, name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading member Secret %s/%s in the hub: %w", o.Namespace, name, err)
	}
	sec.Labels = want
	sec.Data = map[string][]byte{o.SecretKey: kubeconfigData}
	if err := hub.Update(ctx, sec); err != nil {
		return fmt.Errorf("updating member Secret %s/%s in the hub: %w", o.Namespace, name, err)
	}
	return nil
}

// UnjoinOptions describe one member leaving.
type UnjoinOptions struct {
	// Name of the member.
	Name string
	// Member is an admin configuration for the member; nil leaves the member
	// side alone (for a member that no longer exists).
	Member *rest.Config
	// Hub is a configuration for the hub allowed to read
	// FederatedReplicaSets and delete Secrets in the registry namespace.
	Hub *rest.Config
	// Force unjoins even while FederatedReplicaSets place replicas there.
	Force bool
	// Grant and Registry must match what Join used.
	Grant    GrantOptions
	Registry HubOptions
}

// InUseError refuses an unjoin: FederatedReplicaSets still place replicas
// in the member.
type InUseError struct {
	Cluster string
	// Users are "namespace/name" of the FederatedReplicaSets, sorted.
	Users []string
}

func (e *InUseError) Error() string {
	return fmt.Sprintf("member %s still has replicas of %d FederatedReplicaSet(s): %s; scale them away (clusterSelector, weights) or use --force",
		e.Cluster, len(e.Users), strings.Join(e.Users, ", "))
}

// Unjoin removes the member's Secret from the hub, then revokes access in
// the member. It refuses with *InUseError while a FederatedReplicaSet's
// status has a row for the member with a non-zero target or replicas,
// unless Force. Pods and MemberReplicaSets already in the member stay (with
// Force they are no longer managed).
func Unjoin(ctx context.Context, o UnjoinOptions) error {
	reg := o.Registry.withDefaults()
	if err := validateName(o.Name); err != nil {
		return err
	}
	hub, err := hubClient(o.Hub)
	if err != nil {
		return err
	}
	users, err := Placements(ctx, hub, o.Name)
	if err != nil {
		return err
	}
	log := ctrl.LoggerFrom(ctx)
	if len(users) > 0 {
		if !o.Force {
			return &InUseError{Cluster: o.Name, Users: users}
		}
		log.Info("Unjoining a member that still has replicas (forced)", "cluster", o.Name, "federatedReplicaSets", users)
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: reg.Namespace, Name: o.Name}}
	if err := hub.Delete(ctx, sec); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting member Secret %s/%s in the hub: %w", reg.Namespace, o.Name, err)
	}
	if o.Member != nil {
		if err := Revoke(ctx, o.Member, o.Grant); err != nil {
			return fmt.Errorf("revoking access in member %s: %w", o.Name, err)
		}
	}
	log.Info("Member unjoined", "cluster", o.Name)
	return nil
}

// Placements returns the FederatedReplicaSets ("namespace/name", sorted)
// whose status has a row for the member with a non-zero target or replicas.
func Placements(ctx context.Context, hub client.Reader, cluster string) ([]string, error) {
	var l v1alpha1.FederatedReplicaSetList
	if err := hub.List(ctx, &l); err != nil {
		return nil, fmt.Errorf("listing FederatedReplicaSets in the hub: %w", err)
	}
	var out []string
	for i := range l.Items {
		frs := &l.Items[i]
		for _, row := range frs.Status.Clusters {
			if row.Name == cluster && (row.Target > 0 || row.Replicas > 0) {
				out = append(out, frs.Namespace+"/"+frs.Name)
				break
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

func hubClient(cfg *rest.Config) (client.Client, error) {
	if cfg == nil {
		return nil, errors.New("no hub configuration")
	}
	s, err := kubescheme.New()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, fmt.Errorf("building hub client: %w", err)
	}
	return c, nil
}

func validateName(name string) error {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("member name %q: %s", name, strings.Join(errs, "; "))
	}
	return nil
}

func validateLabels(labels map[string]string, registration string) error {
	for k, v := range labels {
		if k == registration {
			return fmt.Errorf("label %s is the registration label; it is set by join", k)
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("label key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return fmt.Errorf("label %s value %q: %s", k, v, strings.Join(errs, "; "))
		}
	}
	return nil
}
