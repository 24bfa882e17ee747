package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/replicafed/replicafed/federation/registry/credentials"
)

// Condition types a member's registration can report (see
// Registry.Conditions).
const (
	// ConditionCredentialsRefused: the member's kubeconfig Secret uses a
	// field replicafed does not honour from a Secret, or cannot be read as
	// a kubeconfig; the Secret is not used.
	ConditionCredentialsRefused = "CredentialsRefused"
	// ConditionNameConflict: a kubeconfig Secret has the name of a static
	// member; the static entry is used and the Secret ignored.
	ConditionNameConflict = "NameConflict"
	// ConditionCredentialsExpiring: the member's inline token or client
	// certificate expires within clusters.credentials.expiryWarning, or
	// has expired.
	ConditionCredentialsExpiring = "CredentialsExpiring"
)

// Reasons of ConditionCredentialsRefused and ConditionNameConflict.
const (
	ReasonFieldNotAllowed   = "FieldNotAllowed"
	ReasonInvalidKubeconfig = "InvalidKubeconfig"
	ReasonStaticMember      = "StaticMemberWins"
)

// cacheStartTimeout bounds the wait for a new member cache to start. The
// cache has no informers yet, so this is not a wait for the member to
// answer: one unreachable member must not hold up the others.
const cacheStartTimeout = 30 * time.Second

// SecretProvider engages the members registered by kubeconfig Secrets in the
// hub. Unlike multicluster-runtime's kubeconfig provider, it checks each
// kubeconfig before building anything from it (credentials.Check), refuses a
// Secret named like a static member, and records why a Secret is not used
// and when its credentials expire.
type SecretProvider struct {
	opts    Options
	label   string
	static  map[string]bool
	policy  credentials.Policy
	cluster cluster.Option

	mgr      mcmanager.Manager
	recorder events.EventRecorder

	mu       sync.RWMutex
	clusters map[string]*secretCluster
	// states are per Secret name: why it is not used, when its
	// credentials expire. Deleted with the Secret.
	states   map[string]secretState
	indexers []indexer
}

var _ multicluster.Provider = &SecretProvider{}

type secretCluster struct {
	cl     cluster.Cluster
	cancel context.CancelFunc
	hash   string
}

// secretState is what the provider concluded about one Secret's content.
type secretState struct {
	hash string
	// refused says why the Secret is not used (type, reason, message);
	// nil when it is.
	refused *refusal
	// expiry of its inline credentials, when known.
	expiry    credentials.Expiration
	hasExpiry bool
}

type refusal struct {
	condition, reason, message string
}

type indexer struct {
	obj     client.Object
	field   string
	extract client.IndexerFunc
}

// NewProvider returns the kubeconfig-Secret provider to build the multicluster
// manager with.
func NewProvider(opts Options) (*SecretProvider, error) {
	label, err := SecretLabel(opts.SecretSelector)
	if err != nil {
		return nil, err
	}
	p := &SecretProvider{
		opts: opts, label: label, static: map[string]bool{}, policy: opts.Credentials,
		cluster:  memberClusterOptions(opts.Scheme, opts.MaxCachedPods),
		clusters: map[string]*secretCluster{}, states: map[string]secretState{},
	}
	for _, s := range opts.Static {
		p.static[s.Name] = true
	}
	return p, nil
}

// SetupWithManager watches the registration Secrets with the hub manager.
func (p *SecretProvider) SetupWithManager(mgr mcmanager.Manager) error {
	p.mgr = mgr
	local := mgr.GetLocalManager()
	p.recorder = local.GetEventRecorder("replicafed")
	err := ctrl.NewControllerManagedBy(local).
		For(&corev1.Secret{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == p.opts.SecretNamespace && o.GetLabels()[p.label] == "true"
		}))).
		Named("member-secrets").
		Complete(p)
	if err != nil {
		return fmt.Errorf("creating member Secret controller: %w", err)
	}
	return nil
}

// Get returns the cluster of an engaged Secret member.
func (p *SecretProvider) Get(_ context.Context, name multicluster.ClusterName) (cluster.Cluster, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if c, ok := p.clusters[string(name)]; ok {
		return c.cl, nil
	}
	return nil, multicluster.ErrClusterNotFound
}

// IndexField indexes a field on every Secret member's cache, now and later.
func (p *SecretProvider) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.indexers = append(p.indexers, indexer{obj, field, extract})
	for name, c := range p.clusters {
		if err := c.cl.GetFieldIndexer().IndexField(ctx, obj, field, extract); err != nil {
			return fmt.Errorf("indexing %s in member %s: %w", field, name, err)
		}
	}
	return nil
}

// Reconcile engages, replaces or drops the member of one Secret.
func (p *SecretProvider) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	name := req.Name
	log := logr.FromContextOrDiscard(ctx).WithValues("cluster", name, "secret", req.NamespacedName)
	sec := &corev1.Secret{}
	if err := p.mgr.GetLocalManager().GetClient().Get(ctx, req.NamespacedName, sec); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("reading member Secret %s: %w", req.NamespacedName, err)
		}
		sec = nil
	}
	if sec == nil || sec.DeletionTimestamp != nil || sec.Labels[p.label] != "true" {
		p.forget(name)
		p.remove(log, name)
		return ctrl.Result{}, nil
	}
	data := sec.Data[p.opts.SecretKey]
	hash := hashOf(data)
	p.mu.RLock()
	prev, seen := p.states[name]
	engaged := p.clusters[name]
	p.mu.RUnlock()
	if seen && prev.hash == hash && (prev.refused != nil || engaged != nil) {
		return ctrl.Result{}, nil
	}

	st, rc := p.judge(name, data)
	st.hash = hash
	p.mu.Lock()
	p.states[name] = st
	p.mu.Unlock()
	if st.refused != nil {
		p.remove(log, name)
		log.Info("Member kubeconfig Secret refused", "condition", st.refused.condition, "reason", st.refused.message)
		p.recorder.Eventf(sec, nil, corev1.EventTypeWarning, st.refused.condition, "Register", "%s", st.refused.message)
		return ctrl.Result{}, nil
	}
	p.remove(log, name)
	if err := p.engage(ctx, log, name, rc, hash); err != nil {
		// Retried with backoff: building a client or starting its cache
		// can fail for reasons that pass.
		p.mu.Lock()
		delete(p.states, name)
		p.mu.Unlock()
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}

// judge decides whether a Secret's kubeconfig may be used and returns its
// client configuration if so. Nothing is built from the kubeconfig before
// credentials.Check accepted it.
func (p *SecretProvider) judge(name string, data []byte) (secretState, *rest.Config) {
	if p.static[name] {
		return secretState{refused: &refusal{ConditionNameConflict, ReasonStaticMember,
			fmt.Sprintf("kubeconfig Secret %s/%s has the name of a static member (clusters.static); the static entry is used and the Secret is ignored: rename the Secret",
				p.opts.SecretNamespace, name)}}, nil
	}
	if len(data) == 0 {
		return secretState{refused: &refusal{ConditionCredentialsRefused, ReasonInvalidKubeconfig,
			fmt.Sprintf("kubeconfig Secret %s/%s has no data key %q", p.opts.SecretNamespace, name, p.opts.SecretKey)}}, nil
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return secretState{refused: &refusal{ConditionCredentialsRefused, ReasonInvalidKubeconfig,
			fmt.Sprintf("kubeconfig Secret %s/%s: %v", p.opts.SecretNamespace, name, err)}}, nil
	}
	if rs := credentials.Check(cfg, p.policy); len(rs) > 0 {
		return secretState{refused: &refusal{ConditionCredentialsRefused, ReasonFieldNotAllowed, credentials.Message(rs)}}, nil
	}
	rc, err := p.restConfig(name, cfg)
	if err != nil {
		return secretState{refused: &refusal{ConditionCredentialsRefused, ReasonInvalidKubeconfig, err.Error()}}, nil
	}
	st := secretState{}
	st.expiry, st.hasExpiry = credentials.Expiry(cfg)
	return st, rc
}

// restConfig builds the client configuration from the checked kubeconfig
// itself, never from the bytes again, so what runs is what was checked.
func (p *SecretProvider) restConfig(name string, cfg *clientcmdapi.Config) (*rest.Config, error) {
	rc, err := clientcmd.NewDefaultClientConfig(*cfg, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig Secret %s/%s: %w", p.opts.SecretNamespace, name, err)
	}
	if err := p.opts.configure(name, rc); err != nil {
		return nil, fmt.Errorf("configuring client of member %s: %w", name, err)
	}
	return rc, nil
}

func (p *SecretProvider) engage(ctx context.Context, log logr.Logger, name string, rc *rest.Config, hash string) error {
	cl, err := cluster.New(rc, p.cluster)
	if err != nil {
		return fmt.Errorf("creating client of member %s: %w", name, err)
	}
	p.mu.RLock()
	idx := append([]indexer(nil), p.indexers...)
	p.mu.RUnlock()
	for _, i := range idx {
		if err := cl.GetFieldIndexer().IndexField(ctx, i.obj, i.field, i.extract); err != nil {
			return fmt.Errorf("indexing %s in member %s: %w", i.field, name, err)
		}
	}
	// The reconcile context is the controller's, which lives as long as the
	// manager: the member lives until its Secret changes or goes, or the
	// manager stops.
	cctx, cancel := context.WithCancel(logr.NewContext(ctx, log))
	go func() {
		if err := cl.Start(cctx); err != nil {
			log.Error(err, "Member cluster stopped")
		}
	}()
	wctx, wcancel := context.WithTimeout(cctx, cacheStartTimeout)
	started := cl.GetCache().WaitForCacheSync(wctx)
	wcancel()
	if !started {
		cancel()
		return fmt.Errorf("starting the cache of member %s: not started within %s", name, cacheStartTimeout)
	}
	p.mu.Lock()
	p.clusters[name] = &secretCluster{cl: cl, cancel: cancel, hash: hash}
	p.mu.Unlock()
	if err := p.mgr.Engage(cctx, multicluster.ClusterName(name), cl); err != nil {
		p.remove(log, name)
		return fmt.Errorf("engaging member %s: %w", name, err)
	}
	log.V(1).Info("Member engaged from its kubeconfig Secret")
	return nil
}

// remove stops and forgets the engaged cluster of a Secret, if any.
func (p *SecretProvider) remove(log logr.Logger, name string) {
	p.mu.Lock()
	c, ok := p.clusters[name]
	delete(p.clusters, name)
	p.mu.Unlock()
	if ok {
		c.cancel()
		log.V(1).Info("Member disengaged")
	}
}

// forget drops what was concluded about a Secret that is gone.
func (p *SecretProvider) forget(name string) {
	p.mu.Lock()
	delete(p.states, name)
	p.mu.Unlock()
}

// state returns what is known of a Secret's content.
func (p *SecretProvider) state(name string) (secretState, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	st, ok := p.states[name]
	return st, ok
}

// expiries returns the known credential expiries of Secret members in use.
func (p *SecretProvider) expiries(into map[string]credentials.Expiration) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	for name, st := range p.states {
		if st.refused == nil && st.hasExpiry {
			into[name] = st.expiry
		}
	}
}

func hashOf(data []byte) string {
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:])
}
