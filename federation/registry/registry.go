// Package registry knows the member clusters: those registered as kubeconfig
// Secrets in the hub (through multicluster-runtime's kubeconfig provider) and
// those listed in the configuration file. It engages static members with the
// multicluster manager itself, records every engaged member with its labels and
// client configuration, starts its health probe, and tells listeners when the
// set of members changes.
package registry

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	"sigs.k8s.io/multicluster-runtime/providers/kubeconfig"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/worker"
	"github.com/replicafed/replicafed/federation/health"
)

// Member is one engaged member cluster.
type Member struct {
	// Name is the cluster name used in placements and status.
	Name string
	// Labels are matched by placement cluster selectors.
	Labels map[string]string
	// Cluster gives the member's client and caches.
	Cluster cluster.Cluster
}

// Options configure a Registry.
type Options struct {
	// SecretNamespace and SecretSelector locate kubeconfig Secrets in the hub.
	// The selector must have the form "<label>=true", the form the kubeconfig
	// provider understands.
	SecretNamespace string
	SecretSelector  string
	SecretKey       string
	// Static members from the configuration file.
	Static []Static
	// Scheme for member clients (core types plus replicafed's).
	Scheme *runtime.Scheme
	// RESTOptions adjust every member's client configuration (rate limits).
	RESTOptions []func(*rest.Config) error
	// Health probes engaged members; nil disables probing.
	Health *health.Monitor
}

// Static is a member given by a kubeconfig file.
type Static struct {
	Name       string
	Kubeconfig string
	Labels     map[string]string
	// Taints of the member (clusters.static[].taints).
	Taints []v1alpha1.ClusterTaint
}

// Registry tracks engaged members. It implements multicluster.Aware so the
// multicluster manager engages it like any other component.
type Registry struct {
	opts      Options
	provider  *kubeconfig.Provider
	mu        sync.RWMutex
	members   map[string]*Member
	listeners []func(cluster string, joined bool)
	mgr       mcmanager.Manager

	// roots are the contexts members were first engaged with; refreshed
	// engagements live under them. current is the refreshed engagement's
	// cancel func; staticStop ends a static member's first cluster.
	roots      map[string]context.Context
	refreshing map[string]cluster.Cluster
	current    map[string]context.CancelFunc
	staticStop map[string]context.CancelFunc
}

var _ multicluster.Aware = &Registry{}

// SecretLabel returns the label key of a "<label>=true" selector.
func SecretLabel(selector string) (string, error) {
	sel, err := labels.Parse(selector)
	if err != nil {
		return "", fmt.Errorf("parsing cluster Secret selector %q: %w", selector, err)
	}
	reqs, _ := sel.Requirements()
	if len(reqs) != 1 || (reqs[0].Operator() != selection.Equals && reqs[0].Operator() != selection.DoubleEquals) ||
		reqs[0].Values().Len() != 1 || reqs[0].Values().List()[0] != "true" {
		return "", fmt.Errorf("cluster Secret selector %q must have the form <label>=true", selector)
	}
	return reqs[0].Key(), nil
}

// NewProvider returns the kubeconfig-Secret provider to build the multicluster
// manager with.
func NewProvider(opts Options) (*kubeconfig.Provider, error) {
	label, err := SecretLabel(opts.SecretSelector)
	if err != nil {
		return nil, err
	}
	return kubeconfig.New(kubeconfig.Options{
		Namespace:             opts.SecretNamespace,
		KubeconfigSecretLabel: label,
		KubeconfigSecretKey:   opts.SecretKey,
		ClusterOptions:        []cluster.Option{memberClusterOptions(opts.Scheme)},
		RESTOptions:           opts.RESTOptions,
	}), nil
}

// memberClusterOptions configures every member cluster the same way: the
// scheme, and the member workers' informer transforms (slim pods and nodes).
func memberClusterOptions(scheme *runtime.Scheme) cluster.Option {
	return func(o *cluster.Options) {
		o.Scheme = scheme
		worker.CacheOptions(o)
	}
}

// New returns a Registry. Call Setup before the manager starts.
func New(opts Options, provider *kubeconfig.Provider) *Registry {
	return &Registry{
		opts: opts, provider: provider, members: map[string]*Member{},
		roots: map[string]context.Context{}, refreshing: map[string]cluster.Cluster{},
		current: map[string]context.CancelFunc{}, staticStop: map[string]context.CancelFunc{},
	}
}

// Setup registers the provider's Secret controller and the registry itself
// with the manager, and schedules the static members' engagement.
func (r *Registry) Setup(ctx context.Context, mgr mcmanager.Manager) error {
	r.mgr = mgr
	if r.provider != nil {
		if err := r.provider.SetupWithManager(ctx, mgr); err != nil {
			return fmt.Errorf("setting up kubeconfig provider: %w", err)
		}
	}
	if err := mgr.Add(r); err != nil {
		return fmt.Errorf("adding cluster registry: %w", err)
	}
	return nil
}

// OnChange registers a listener called when a member joins or leaves.
func (r *Registry) OnChange(fn func(cluster string, joined bool)) {
	r.mu.Lock()
	r.listeners = append(r.listeners, fn)
	r.mu.Unlock()
}

// Start engages the static members and blocks until ctx ends.
func (r *Registry) Start(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	for _, s := range r.opts.Static {
		if err := r.engageStatic(ctx, s); err != nil {
			return err
		}
		log.V(1).Info("Static member engaged", "cluster", s.Name)
	}
	<-ctx.Done()
	return nil
}

func (r *Registry) engageStatic(ctx context.Context, s Static) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		return fmt.Errorf("loading kubeconfig of static member %s from %s: %w", s.Name, s.Kubeconfig, err)
	}
	for _, o := range r.opts.RESTOptions {
		if err := o(cfg); err != nil {
			return fmt.Errorf("configuring client of static member %s: %w", s.Name, err)
		}
	}
	cl, err := cluster.New(cfg, memberClusterOptions(r.opts.Scheme))
	if err != nil {
		return fmt.Errorf("creating client of static member %s: %w", s.Name, err)
	}
	first, stop := context.WithCancel(ctx)
	r.mu.Lock()
	r.roots[s.Name] = ctx
	r.staticStop[s.Name] = stop
	r.mu.Unlock()
	go func() {
		if err := cl.Start(first); err != nil {
			logr.FromContextOrDiscard(ctx).Error(err, "Member cluster stopped", "cluster", s.Name)
		}
	}()
	// Engaging does not wait for a cache sync: an unreachable static member
	// must not block the others; its workers wait for their own informers.
	return r.mgr.Engage(first, multicluster.ClusterName(s.Name), cl)
}

// Refresh replaces a member's cluster (clients and informers) with a new one
// built from the same configuration, and engages it with every component.
// It is called when an unreachable member comes back: client-go's informers
// would otherwise wait out their reconnect backoff (up to a minute or two)
// and the workers would act on stale caches meanwhile.
func (r *Registry) Refresh(name string) error {
	r.mu.Lock()
	m, ok := r.members[name]
	root := r.roots[name]
	r.mu.Unlock()
	if !ok || root == nil || root.Err() != nil || r.mgr == nil {
		return nil
	}
	cl, err := cluster.New(rest.CopyConfig(m.Cluster.GetConfig()), memberClusterOptions(r.opts.Scheme))
	if err != nil {
		return fmt.Errorf("recreating client of member %s: %w", name, err)
	}
	ctx, cancel := context.WithCancel(root)
	go func() {
		if err := cl.Start(ctx); err != nil {
			logr.FromContextOrDiscard(root).Error(err, "Member cluster stopped", "cluster", name)
		}
	}()
	r.mu.Lock()
	r.refreshing[name] = cl
	r.mu.Unlock()
	err = r.mgr.Engage(ctx, multicluster.ClusterName(name), cl)
	r.mu.Lock()
	delete(r.refreshing, name)
	prev, static := r.current[name], r.staticStop[name]
	r.current[name] = cancel
	delete(r.staticStop, name)
	r.mu.Unlock()
	// The replaced cluster stops only now, after every component moved on.
	if prev != nil {
		prev()
	}
	if static != nil {
		static()
	}
	if err != nil {
		return fmt.Errorf("engaging refreshed member %s: %w", name, err)
	}
	logr.FromContextOrDiscard(root).V(1).Info("Member clients refreshed", "cluster", name)
	return nil
}

// NeedLeaderElection lets the registry run on every replica, so followers
// keep member caches warm.
func (r *Registry) NeedLeaderElection() bool { return false }

// Engage records a member for as long as ctx lives.
func (r *Registry) Engage(ctx context.Context, clusterName multicluster.ClusterName, cl cluster.Cluster) error {
	name := string(clusterName)
	m := &Member{Name: name, Labels: r.labelsFor(ctx, name), Cluster: cl}
	r.mu.Lock()
	if old, ok := r.members[name]; ok && old.Cluster == cl {
		r.mu.Unlock()
		return nil
	}
	if r.refreshing[name] != cl {
		// A new engagement from a provider (first, or a changed kubeconfig):
		// refreshed clusters now live under its context.
		if _, static := r.staticStop[name]; !static || r.roots[name] == nil {
			r.roots[name] = ctx
		}
		if c := r.current[name]; c != nil {
			defer c()
			delete(r.current, name)
		}
	}
	r.members[name] = m
	listeners := append([]func(string, bool){}, r.listeners...)
	r.mu.Unlock()
	if r.opts.Health != nil {
		probe, err := health.ReadyzProbe(cl.GetConfig())
		if err != nil {
			return fmt.Errorf("building health probe for member %s: %w", name, err)
		}
		r.opts.Health.Watch(ctx, name, probe)
	}
	for _, fn := range listeners {
		fn(name, true)
	}
	go func() {
		<-ctx.Done()
		r.mu.Lock()
		if cur, ok := r.members[name]; ok && cur == m {
			delete(r.members, name)
		} else {
			m = nil
		}
		listeners := append([]func(string, bool){}, r.listeners...)
		r.mu.Unlock()
		if m == nil {
			return // replaced by a newer engagement
		}
		if r.opts.Health != nil {
			r.opts.Health.Forget(name)
		}
		for _, fn := range listeners {
			fn(name, false)
		}
	}()
	return nil
}

// labelsFor returns a member's labels: from the static list, or the labels of
// its kubeconfig Secret minus the registration label.
func (r *Registry) labelsFor(ctx context.Context, name string) map[string]string {
	for _, s := range r.opts.Static {
		if s.Name == name {
			return s.Labels
		}
	}
	if r.mgr == nil {
		return nil
	}
	sec := &corev1.Secret{}
	if err := r.mgr.GetLocalManager().GetAPIReader().Get(ctx, clientKey(r.opts.SecretNamespace, name), sec); err != nil {
		logr.FromContextOrDiscard(ctx).Error(err, "Reading member Secret labels", "cluster", name)
		return nil
	}
	label, _ := SecretLabel(r.opts.SecretSelector)
	out := map[string]string{}
	for k, v := range sec.Labels {
		if k != label {
			out[k] = v
		}
	}
	return out
}

// Get returns an engaged member.
func (r *Registry) Get(name string) (*Member, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	m, ok := r.members[name]
	return m, ok
}

// Members returns the engaged members sorted by name.
func (r *Registry) Members() []*Member {
	r.mu.RLock()
	out := make([]*Member, 0, len(r.members))
	for _, m := range r.members {
		out = append(out, m)
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Names returns the engaged member names, sorted, for logs.
func (r *Registry) Names() string {
	ms := r.Members()
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = m.Name
	}
	return strings.Join(names, ",")
}

// Registration is a member registered with replicafed (a kubeconfig Secret in
// the hub or a static entry), whether or not this replica has engaged it yet.
type Registration struct {
	Name   string
	Labels map[string]string
	// Taints are the member's taints (AnnotationTaints on its Secret).
	Taints []v1alpha1.ClusterTaint
	// TaintsError says why AnnotationTaints could not be read; Taints then
	// holds TaintInvalid so the member takes no new replicas until it is
	// fixed.
	TaintsError string
}

// Registered lists the registered members from the hub cache, sorted by name.
// Engagement is local and asynchronous (a replica that just started may have
// engaged one member of three); registration is what every replica reads
// alike, so the planner asks this list which members exist.
func (r *Registry) Registered(ctx context.Context) ([]Registration, error) {
	seen := map[string]bool{}
	var out []Registration
	for _, s := range r.opts.Static {
		if !seen[s.Name] {
			seen[s.Name] = true
			out = append(out, Registration{Name: s.Name, Labels: s.Labels, Taints: s.Taints})
		}
	}
	if r.mgr != nil && r.provider != nil {
		sel, err := labels.Parse(r.opts.SecretSelector)
		if err != nil {
			return nil, fmt.Errorf("parsing cluster Secret selector: %w", err)
		}
		label, _ := SecretLabel(r.opts.SecretSelector)
		secrets := &corev1.SecretList{}
		if err := r.mgr.GetLocalManager().GetCache().List(ctx, secrets, client.InNamespace(r.opts.SecretNamespace),
			client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return nil, fmt.Errorf("listing member kubeconfig Secrets: %w", err)
		}
		for _, s := range secrets.Items {
			if seen[s.Name] || s.DeletionTimestamp != nil {
				continue
			}
			seen[s.Name] = true
			l := map[string]string{}
			for k, v := range s.Labels {
				if k != label {
					l[k] = v
				}
			}
			reg := Registration{Name: s.Name, Labels: l}
			reg.Taints, reg.TaintsError = ParseTaints(s.Annotations[AnnotationTaints])
			out = append(out, reg)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// SecretProblem says why a member's kubeconfig Secret cannot give a client
// (no such key, a kubeconfig that does not parse); empty when it can, and for
// static members. It reads the hub cache and parses the kubeconfig, so it is
// meant for occasional status, not every reconcile.
func (r *Registry) SecretProblem(ctx context.Context, name string) string {
	for _, s := range r.opts.Static {
		if s.Name == name {
			return ""
		}
	}
	if r.mgr == nil {
		return ""
	}
	sec := &corev1.Secret{}
	if err := r.mgr.GetLocalManager().GetCache().Get(ctx, clientKey(r.opts.SecretNamespace, name), sec); err != nil {
		return fmt.Sprintf("reading kubeconfig Secret: %v", err)
	}
	raw, ok := sec.Data[r.opts.SecretKey]
	if !ok || len(raw) == 0 {
		return fmt.Sprintf("kubeconfig Secret %s/%s has no data key %q", sec.Namespace, sec.Name, r.opts.SecretKey)
	}
	if _, err := clientcmd.RESTConfigFromKubeConfig(raw); err != nil {
		return fmt.Sprintf("kubeconfig Secret %s/%s: %v", sec.Namespace, sec.Name, err)
	}
	return ""
}
