// Package registry knows the member clusters: those registered as kubeconfig
// Secrets in the hub (SecretProvider, which checks each kubeconfig before
// using it) and those listed in the configuration file. It engages static
// members with the multicluster manager itself, records every engaged member
// with its labels and client configuration, starts its health probe, tells
// listeners when the set of members changes, and says what is wrong with a
// registration (Conditions) and when its credentials expire.
package registry

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/worker"
	"github.com/replicafed/replicafed/federation/health"
	"github.com/replicafed/replicafed/federation/registry/credentials"
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
	// RESTOptionsFor returns the options of one member's client
	// configuration, applied after RESTOptions whenever the member's
	// client is built (a static member, a kubeconfig Secret); optional.
	// Sharding fences each member's writes by its own owner lease here.
	RESTOptionsFor func(cluster string) []func(*rest.Config) error
	// Health probes engaged members; nil disables probing.
	Health *health.Monitor
	// Credentials says what a kubeconfig Secret may use beyond inline
	// credentials.
	Credentials credentials.Policy
	// ExpiryWarning is how long before its credentials expire a member
	// reports CredentialsExpiring; DefaultExpiryWarning when zero.
	ExpiryWarning time.Duration
	// Clock for expiry conditions and metrics; the real clock when nil.
	Clock clock.PassiveClock
	// MaxCachedPods bounds each member's pod cache
	// (controller.maxCachedPodsPerMember); 0 means no bound. The member
	// workers must be given the same value (worker.Options.MaxCachedPods).
	MaxCachedPods int
}

// DefaultExpiryWarning is Options.ExpiryWarning's default.
const DefaultExpiryWarning = 30 * 24 * time.Hour

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
	provider  *SecretProvider
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
	// staticExpiry holds static members' inline credential expiries.
	staticExpiry map[string]credentials.Expiration
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

// memberClusterOptions configures every member cluster the same way: the
// scheme, the member workers' informer transforms (slim pods and nodes) and
// the bound on cached pods.
func memberClusterOptions(scheme *runtime.Scheme, maxCachedPods int) cluster.Option {
	return func(o *cluster.Options) {
		o.Scheme = scheme
		worker.CacheOptionsFor(maxCachedPods)(o)
	}
}

// New returns a Registry. Call Setup before the manager starts.
func New(opts Options, provider *SecretProvider) *Registry {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.ExpiryWarning <= 0 {
		opts.ExpiryWarning = DefaultExpiryWarning
	}
	return &Registry{
		opts: opts, provider: provider, members: map[string]*Member{},
		roots: map[string]context.Context{}, refreshing: map[string]cluster.Cluster{},
		current: map[string]context.CancelFunc{}, staticStop: map[string]context.CancelFunc{},
		staticExpiry: map[string]credentials.Expiration{},
	}
}

// Setup registers the provider's Secret controller and the registry itself
// with the manager, and schedules the static members' engagement.
func (r *Registry) Setup(ctx context.Context, mgr mcmanager.Manager) error {
	r.mgr = mgr
	if r.provider != nil {
		if err := r.provider.SetupWithManager(mgr); err != nil {
			return err
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

// engageStatic engages a member from the operator's own kubeconfig file,
// with every kubeconfig feature (exec plugins, files) client-go supports.
func (r *Registry) engageStatic(ctx context.Context, s Static) error {
	cfg, err := r.staticConfig(s)
	if err != nil {
		return err
	}
	cl, err := cluster.New(cfg, memberClusterOptions(r.opts.Scheme, r.opts.MaxCachedPods))
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

// staticConfig is the client configuration of a static member: its
// kubeconfig file with the REST options applied. It records the expiry
// of the file's credentials.
func (r *Registry) staticConfig(s Static) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig of static member %s from %s: %w", s.Name, s.Kubeconfig, err)
	}
	if raw, err := clientcmd.LoadFromFile(s.Kubeconfig); err == nil {
		if exp, ok := credentials.Expiry(raw); ok {
			r.mu.Lock()
			r.staticExpiry[s.Name] = exp
			r.mu.Unlock()
		}
	}
	if err := r.opts.configure(s.Name, cfg); err != nil {
		return nil, fmt.Errorf("configuring client of static member %s: %w", s.Name, err)
	}
	return cfg, nil
}

// configure applies RESTOptions, then RESTOptionsFor(name), to rc.
func (o *Options) configure(name string, rc *rest.Config) error {
	for _, f := range o.RESTOptions {
		if err := f(rc); err != nil {
			return err
		}
	}
	if o.RESTOptionsFor == nil {
		return nil
	}
	for _, f := range o.RESTOptionsFor(name) {
		if err := f(rc); err != nil {
			return err
		}
	}
	return nil
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
	cl, err := cluster.New(rest.CopyConfig(m.Cluster.GetConfig()), memberClusterOptions(r.opts.Scheme, r.opts.MaxCachedPods))
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
		var stopRefreshed context.CancelFunc
		if cur, ok := r.members[name]; ok && cur == m {
			delete(r.members, name)
			// Nothing of a member that left stays behind; a later
			// engagement under the same name starts afresh.
			stopRefreshed = r.current[name]
			delete(r.current, name)
			if root := r.roots[name]; root == nil || root.Err() != nil {
				delete(r.roots, name)
			}
		} else {
			m = nil
		}
		listeners := append([]func(string, bool){}, r.listeners...)
		r.mu.Unlock()
		if stopRefreshed != nil {
			stopRefreshed()
		}
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
			if st, ok := r.provider.state(s.Name); ok && st.refused != nil {
				reg.Taints = append(reg.Taints, v1alpha1.ClusterTaint{Key: TaintCredentialsRefused, Effect: v1alpha1.TaintNoSchedule})
			}
			out = append(out, reg)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// SecretProblem says, in one line, what is wrong with a member's
// registration: the first condition of Conditions that is True, as
// "Type: message". Empty when nothing is, and for a Secret the provider has
// not looked at yet. It reads only what the provider recorded; it never
// parses a kubeconfig again.
func (r *Registry) SecretProblem(_ context.Context, name string) string {
	for _, c := range r.Conditions(name) {
		if c.Status == metav1.ConditionTrue {
			return c.Type + ": " + c.Message
		}
	}
	return ""
}

// Conditions returns what is known about a member's registration, for its
// MemberCluster: ConditionNameConflict or ConditionCredentialsRefused (True)
// when its Secret is not used, and ConditionCredentialsExpiring (True or
// False) when the expiry of its inline credentials is known. The times are
// left for the writer to set.
func (r *Registry) Conditions(name string) []metav1.Condition {
	var out []metav1.Condition
	var exp credentials.Expiration
	known := false
	if r.provider != nil {
		if st, ok := r.provider.state(name); ok {
			if st.refused != nil {
				out = append(out, metav1.Condition{Type: st.refused.condition, Status: metav1.ConditionTrue,
					Reason: st.refused.reason, Message: st.refused.message})
			} else {
				exp, known = st.expiry, st.hasExpiry
			}
		}
	}
	if r.isStatic(name) {
		r.mu.RLock()
		exp, known = r.staticExpiry[name]
		r.mu.RUnlock()
	}
	if known {
		v := credentials.Assess(exp, r.opts.Clock.Now(), r.opts.ExpiryWarning)
		status := metav1.ConditionFalse
		if v.Expiring {
			status = metav1.ConditionTrue
		}
		out = append(out, metav1.Condition{Type: ConditionCredentialsExpiring, Status: status, Reason: v.Reason, Message: v.Message})
	}
	return out
}

func (r *Registry) isStatic(name string) bool {
	for _, s := range r.opts.Static {
		if s.Name == name {
			return true
		}
	}
	return false
}

// Expiries returns the known credential expiries of the registered members
// in use: Secrets accepted by the provider and static members.
func (r *Registry) Expiries() map[string]credentials.Expiration {
	out := map[string]credentials.Expiration{}
	if r.provider != nil {
		r.provider.expiries(out)
	}
	r.mu.RLock()
	for name, exp := range r.staticExpiry {
		out[name] = exp
	}
	r.mu.RUnlock()
	return out
}
