// Package propagation copies the objects a FederatedReplicaSet's pod
// template references (spec.propagateDependencies) from its hub namespace
// into the members that run its replicas, keeps the copies in line with the
// hub and removes them when no FederatedReplicaSet needs them there any
// more. It runs on the raft leader only.
//
// The unit of work is a hub namespace: every FederatedReplicaSet of the
// namespace is looked at together, so a copy several of them reference is
// shared (the replicafed.io/dependency-of annotation lists them) and removed
// with the last. A member object of the same name without the
// replicafed.io/dependency label was not made by replicafed: it is never
// changed, and the FederatedReplicaSet shows condition
// DependenciesPropagated False, reason Conflict, and a warning event.
//
// Only the FederatedReplicaSet's own namespace is read: a template names
// its dependencies by name alone, every read and every copy uses the
// FederatedReplicaSet's namespace, and a name that is not an object name
// (say "other-ns/secret") is refused with reason InvalidReference and never
// read. So a FederatedReplicaSet can copy only what a pod in its namespace
// could mount; replicafed's wider read rights reach nothing else.
//
// Reads of dependency objects are live GETs by name, in the hub and in the
// members: replicafed caches no Secret or ConfigMap, needs no list or watch
// on them in the hub, and reads only objects a template names. Changes in
// the hub therefore reach the members on the next pass: at once for changes
// to a FederatedReplicaSet or its targets, within Options.Resync for a
// change to the referenced object itself (as the kubelet's own refresh of
// mounted ConfigMaps and Secrets is periodic). Secret data is never logged.
//
// Presence, in the same package, is the member engine's check that the
// dependencies exist before it creates pods.
package propagation

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/dependencies"
	"github.com/replicafed/replicafed/federation/hub"
	"github.com/replicafed/replicafed/internal/clientlimit"
	"github.com/replicafed/replicafed/internal/ctxjoin"
	"github.com/replicafed/replicafed/internal/fedref"
)

// Defaults of Options.
const (
	// DefaultResync is how often every namespace with copies or with a
	// propagating FederatedReplicaSet is looked at again.
	DefaultResync = 30 * time.Second
	// DefaultRetry is how soon a namespace with a problem is looked at again.
	DefaultRetry = 5 * time.Second
	// DefaultMemberTimeout bounds one namespace's work in one member.
	DefaultMemberTimeout = 15 * time.Second
)

// pendingRequeue is how soon a namespace is looked at again when a member
// lacks the namespace itself (the member engine creates it with the first
// MemberReplicaSet).
const pendingRequeue = time.Second

// Options configure a Propagator.
type Options struct {
	// Hub reads FederatedReplicaSets (the hub cache) and writes their status.
	Hub client.Client
	// HubLive reads dependency objects in the hub, live (the manager's API
	// reader): they are never cached.
	HubLive client.Reader
	// Members are the engaged members.
	Members hub.Members
	// Health skips unreachable members; optional.
	Health hub.HealthSource
	// Targets are the committed per-member targets.
	Targets hub.TargetStore
	// Rollouts are the rollout records of rolling FederatedReplicaSets:
	// the references of every live revision are copied, not the spec
	// template's alone, since old pods keep running and a rollback creates
	// them again; optional.
	Rollouts hub.RolloutStore
	// Gate lets only the raft leader act.
	Gate hub.Gate
	// Poker asks a member worker to sync a key once its dependencies are
	// copied, so pods start without waiting for the engine's recheck; optional.
	Poker hub.Poker
	// Recorder emits events on FederatedReplicaSets; optional.
	Recorder events.EventRecorder
	// Orphaned reports whether a FederatedReplicaSet being deleted leaves
	// its pods running (its copies are then left in place, unmarked);
	// optional, nil means never.
	Orphaned func(*v1alpha1.FederatedReplicaSet) bool
	// Resync, Retry and MemberTimeout; 0 means the defaults.
	Resync, Retry, MemberTimeout time.Duration
	// Clock is injected for tests; nil means the real clock.
	Clock clock.PassiveClock
}

// Propagator copies dependencies to members. Add it to the hub manager with
// SetupWithManager.
type Propagator struct {
	o        Options
	triggers *hub.Triggers
	kick     chan struct{}
}

// New returns a Propagator with defaults filled in.
func New(o Options) *Propagator {
	if o.Resync <= 0 {
		o.Resync = DefaultResync
	}
	if o.Retry <= 0 {
		o.Retry = DefaultRetry
	}
	if o.MemberTimeout <= 0 {
		o.MemberTimeout = DefaultMemberTimeout
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return &Propagator{o: o, triggers: hub.NewTriggers(), kick: make(chan struct{}, 1)}
}

// SetupWithManager adds the namespace controller (triggered by changes of
// propagating FederatedReplicaSets, by Trigger and by Enqueue) and the
// periodic sweep to the hub manager.
func (p *Propagator) SetupWithManager(mgr manager.Manager) error {
	if err := mgr.Add(&sweeper{p: p}); err != nil {
		return fmt.Errorf("adding the dependency sweep: %w", err)
	}
	err := ctrl.NewControllerManagedBy(mgr).
		Named("dependencies").
		Watches(&v1alpha1.FederatedReplicaSet{}, handler.EnqueueRequestsFromMapFunc(
			func(_ context.Context, obj client.Object) []reconcile.Request {
				return []reconcile.Request{namespaceRequest(obj.GetNamespace())}
			}), builder.WithPredicates(relevant())).
		WatchesRawSource(p.triggers).
		// One name per process is the rule; tests run several hubs in one.
		WithOptions(controller.Options{SkipNameValidation: ptr.To(true)}).
		Complete(p)
	if err != nil {
		return fmt.Errorf("creating the dependency controller: %w", err)
	}
	return nil
}

// namespaceRequest is the request for a pass over namespace ns: the
// namespace alone, with an empty name, so the controller's request logger
// names it as the namespace.
func namespaceRequest(ns string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns}}
}

// Trigger asks for a pass over namespace.
func (p *Propagator) Trigger(namespace string) { p.triggers.Trigger(namespace, "") }

// Resync asks for a sweep of every namespace soon (a member joined or left).
func (p *Propagator) Resync() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Enqueue implements hub.Poker: the hub calls it when a FederatedReplicaSet's
// targets changed, which may add or remove members that need its copies.
func (p *Propagator) Enqueue(key fedref.MemberObject) {
	frs := &v1alpha1.FederatedReplicaSet{}
	err := p.o.Hub.Get(context.Background(), types.NamespacedName{Namespace: key.Namespace, Name: key.Name}, frs)
	if err == nil && !frs.Spec.PropagateDependencies {
		return
	}
	p.Trigger(key.Namespace)
}

// relevant passes the FederatedReplicaSet events that can change what is
// copied: creation and deletion of propagating ones, and updates of the
// spec (generation), of the deletion state and annotations (orphan intent),
// or of this package's condition (someone else's status write dropped it).
func relevant() predicate.Predicate {
	propagates := func(o client.Object) bool {
		f, ok := o.(*v1alpha1.FederatedReplicaSet)
		return ok && f.Spec.PropagateDependencies
	}
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return propagates(e.Object) },
		DeleteFunc: func(e event.DeleteEvent) bool { return propagates(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			if !propagates(e.ObjectOld) && !propagates(e.ObjectNew) {
				return false
			}
			o, n := e.ObjectOld.(*v1alpha1.FederatedReplicaSet), e.ObjectNew.(*v1alpha1.FederatedReplicaSet)
			return o.Generation != n.Generation || !o.DeletionTimestamp.Equal(n.DeletionTimestamp) ||
				!equalStrings(o.Annotations, n.Annotations) ||
				!sameCondition(meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionDependenciesPropagated),
					meta.FindStatusCondition(n.Status.Conditions, v1alpha1.ConditionDependenciesPropagated))
		},
		GenericFunc: func(event.GenericEvent) bool { return true },
	}
}

func equalStrings(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func sameCondition(a, b *metav1.Condition) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message && a.ObservedGeneration == b.ObservedGeneration
}

// ReasonDependencyInvalidReference is the DependenciesPropagated reason
// for a template reference that cannot name an object of the
// FederatedReplicaSet's own namespace (dependencies.CheckName): it is
// refused, never read, and reported with a warning event.
const ReasonDependencyInvalidReference = "InvalidReference"

// Hints added to a forbidden error: where the missing permission comes from.
const (
	hubRBACHint    = "the hub chart grants it with rbac.propagateDependencies=true"
	memberRBACHint = "the member role grants it with the replicafed-member chart's propagateDependencies=true or `replicafed join --propagate-dependencies`"
)

// explain returns err's text, with hint when the API server refused the
// request for lack of permission.
func explain(err error, hint string) string {
	if apierrors.IsForbidden(err) {
		return err.Error() + " (" + hint + ")"
	}
	return err.Error()
}

// pass is one namespace's reconcile.
type pass struct {
	ns       string
	frs      map[string]*v1alpha1.FederatedReplicaSet
	wants    map[string]dependencies.Want
	released map[string]bool
	desired  map[string]map[dependencies.Key][]string
	hubObjs  map[dependencies.Key]dependencies.Object
	// skip are keys whose hub object could not be read: left as they are.
	skip     map[dependencies.Key]bool
	problems map[string][]problem
	// pending names FederatedReplicaSets whose copies wait for a member
	// namespace: their condition is not written this pass.
	pending map[string]bool
	// failed is set when some write failed: look again soon.
	failed bool
}

// Reconcile brings one hub namespace's copies in every member in line.
// The request's Namespace is the namespace; its Name is empty.
func (p *Propagator) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	gctx, ok := p.o.Gate.Allowed()
	if !ok {
		return reconcile.Result{}, nil
	}
	ctx, cancel := ctxjoin.Join(ctx, gctx)
	defer cancel()
	ns := req.Namespace

	var list v1alpha1.FederatedReplicaSetList
	if err := p.o.Hub.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing FederatedReplicaSets in %s: %w", ns, err)
	}
	ps := newPass(ns)
	var stopped []*v1alpha1.FederatedReplicaSet
	var wants []dependencies.Want
	for i := range list.Items {
		frs := &list.Items[i]
		if !frs.Spec.PropagateDependencies {
			stopped = append(stopped, frs)
			continue
		}
		w := p.want(ps, frs)
		ps.wants[frs.Name] = w
		wants = append(wants, w)
	}
	ps.desired = dependencies.Desired(wants)
	p.readHub(ctx, ps)

	for _, name := range p.memberNames(ps) {
		p.syncMember(ctx, ps, name)
	}

	conflict, err := p.writeConditions(ctx, ps, stopped)
	if err != nil {
		return reconcile.Result{}, err
	}
	switch {
	case conflict:
		// The hub reconciler wrote the status meanwhile (the cache had an
		// older copy): try again once the cache has the new one.
		ctrl.LoggerFrom(ctx).V(2).Info("Status changed meanwhile, writing the condition again")
		return reconcile.Result{RequeueAfter: pendingRequeue}, nil
	case len(ps.pending) > 0:
		return reconcile.Result{RequeueAfter: pendingRequeue}, nil
	case ps.failed || anyProblem(ps.problems):
		return reconcile.Result{RequeueAfter: p.o.Retry}, nil
	}
	return reconcile.Result{}, nil
}

// newPass starts a pass over namespace ns.
func newPass(ns string) *pass {
	return &pass{ns: ns, frs: map[string]*v1alpha1.FederatedReplicaSet{}, wants: map[string]dependencies.Want{},
		released: map[string]bool{}, hubObjs: map[dependencies.Key]dependencies.Object{}, skip: map[dependencies.Key]bool{},
		problems: map[string][]problem{}, pending: map[string]bool{}}
}

// want records frs in the pass and returns what it wants copied and where:
// its valid references, in the members it has targets in, or released when
// it is deleted with orphaning. Invalid references are recorded as problems.
func (p *Propagator) want(ps *pass, frs *v1alpha1.FederatedReplicaSet) dependencies.Want {
	ps.frs[frs.Name] = frs
	refs, invalid := dependencies.Split(dependencies.OfAll(p.specs(frs)...))
	for _, bad := range invalid {
		// Never read: only the namespace's own objects, by name, are copied.
		ps.problems[frs.Name] = append(ps.problems[frs.Name], problem{Key: bad.Ref.Key(), Reason: ReasonDependencyInvalidReference,
			Message: bad.Err.Error()})
	}
	w := dependencies.Want{FRS: frs.Name, Refs: refs}
	if frs.DeletionTimestamp != nil && p.o.Orphaned != nil && p.o.Orphaned(frs) {
		w.Release = true
		ps.released[frs.Name] = true
		return w
	}
	// A FederatedReplicaSet being deleted keeps its copies while its targets
	// last: its pods may still be running.
	if targets, _, ok := p.o.Targets.Targets(fedref.FRS{Namespace: frs.Namespace, Name: frs.Name, UID: string(frs.UID)}); ok {
		for m, t := range targets {
			if t > 0 {
				w.Members = append(w.Members, m)
			}
		}
		slices.Sort(w.Members)
	}
	return w
}

// specs are the pod specs whose references frs needs copied: its
// template's, and those of its rollout's live revisions.
func (p *Propagator) specs(frs *v1alpha1.FederatedReplicaSet) []*corev1.PodSpec {
	specs := []*corev1.PodSpec{&frs.Spec.Template.Spec}
	if p.o.Rollouts == nil {
		return specs
	}
	rec, ok := p.o.Rollouts.Rollout(fedref.FRS{Namespace: frs.Namespace, Name: frs.Name, UID: string(frs.UID)})
	if !ok {
		return specs
	}
	for i := range rec.Revisions {
		specs = append(specs, &rec.Revisions[i].Template.Spec)
	}
	return specs
}

// writeConditions writes the DependenciesPropagated condition of every
// FederatedReplicaSet in the pass (except those being deleted or waiting for
// a member namespace) and removes it from those that stopped propagating.
// conflict reports that some status changed meanwhile; other write errors
// are joined.
func (p *Propagator) writeConditions(ctx context.Context, ps *pass, stopped []*v1alpha1.FederatedReplicaSet) (conflict bool, err error) {
	var errs []error
	write := func(frs *v1alpha1.FederatedReplicaSet, c *metav1.Condition) {
		if werr := p.writeCondition(ctx, frs, c); apierrors.IsConflict(werr) {
			conflict = true
		} else if werr != nil {
			errs = append(errs, werr)
		}
	}
	for name, frs := range ps.frs {
		if frs.DeletionTimestamp != nil || ps.pending[name] {
			continue
		}
		c := condition(ps.problems[name], p.copiedFor(ps, name), len(ps.wants[name].Members), frs.Generation)
		write(frs, &c)
	}
	for _, frs := range stopped {
		if frs.DeletionTimestamp == nil {
			write(frs, nil)
		}
	}
	return conflict, errors.Join(errs...)
}

// anyProblem reports whether some FederatedReplicaSet has a problem.
func anyProblem(m map[string][]problem) bool {
	for _, ps := range m {
		if len(ps) > 0 {
			return true
		}
	}
	return false
}

// copiedFor counts the objects copied for one FederatedReplicaSet: its
// references that exist in the hub.
func (p *Propagator) copiedFor(ps *pass, name string) int {
	n := 0
	for _, r := range ps.wants[name].Refs {
		if ps.hubObjs[r.Key()] != nil {
			n++
		}
	}
	return n
}

// readHub reads every object some member needs from the hub, once.
func (p *Propagator) readHub(ctx context.Context, ps *pass) {
	needed := map[dependencies.Key]bool{}
	for _, objs := range ps.desired {
		for k := range objs {
			needed[k] = true
		}
	}
	for k := range needed {
		obj := dependencies.NewObject(k.Kind)
		err := p.o.HubLive.Get(ctx, types.NamespacedName{Namespace: ps.ns, Name: k.Name}, obj)
		switch {
		case err == nil:
			ps.hubObjs[k] = obj
		case apierrors.IsNotFound(err):
			// Not in the hub: nothing to copy, and a copy left from before
			// goes. Pods wait for it only if a template requires it.
			for name, w := range ps.wants {
				for _, r := range w.Refs {
					if r.Key() == k && !r.Optional && len(w.Members) > 0 {
						ps.problems[name] = append(ps.problems[name], problem{Key: k, Reason: v1alpha1.ReasonDependencyNotFound,
							Message: "not found in the hub namespace"})
					}
				}
			}
		default:
			ctrl.LoggerFrom(ctx).Error(err, "Reading a dependency in the hub", "object", k.String())
			ps.skip[k] = true
			for name, w := range ps.wants {
				for _, r := range w.Refs {
					if r.Key() == k && len(w.Members) > 0 {
						ps.problems[name] = append(ps.problems[name], problem{Key: k, Reason: v1alpha1.ReasonDependencyCopyFailed,
							Message: "reading it in the hub: " + explain(err, hubRBACHint)})
					}
				}
			}
		}
	}
}

// memberNames returns every member to look at: those that should hold
// copies and every other engaged one (it may hold copies to remove).
func (p *Propagator) memberNames(ps *pass) []string {
	names := map[string]bool{}
	for m := range ps.desired {
		names[m] = true
	}
	for _, m := range p.o.Members.Members() {
		names[m.Name] = true
	}
	return slices.Sorted(maps.Keys(names))
}

// reachable reports whether writes to member may be tried.
func (p *Propagator) reachable(member string) bool {
	if p.o.Health == nil {
		return true
	}
	st, ok := p.o.Health.State(member)
	return !ok || st.Health != v1alpha1.ClusterUnreachable
}

// memberProblem records a problem with key in member for every
// FederatedReplicaSet that wants it there.
func (ps *pass) memberProblem(member string, k dependencies.Key, reason, msg string) {
	for _, name := range ps.desired[member][k] {
		ps.problems[name] = append(ps.problems[name], problem{Member: member, Key: k, Reason: reason, Message: msg})
	}
}

// syncMember brings one member's copies in ps.ns in line.
func (p *Propagator) syncMember(ctx context.Context, ps *pass, member string) {
	log := ctrl.LoggerFrom(ctx).WithValues("cluster", member)
	ctx = ctrl.LoggerInto(ctx, log)
	mem, ok := p.o.Members.Get(member)
	if !ok || !p.reachable(member) {
		// Not engaged or unreachable: nothing can be done there now (the
		// FederatedReplicaSet's ClusterUnavailable condition says so).
		log.V(2).Info("Member not reachable, its copies wait")
		return
	}
	ctx, cancel := context.WithTimeout(ctx, p.o.MemberTimeout)
	defer cancel()
	// Pods wait for these copies: they take the member's rate limit before
	// events and other background requests, as the engine's syncs do.
	ctx = clientlimit.First(ctx)
	m := &memberPass{pass: ps, member: member, cl: mem.Cluster, existing: map[dependencies.Key]*dependencies.Existing{},
		meta: map[dependencies.Key]metav1.Object{}, full: map[dependencies.Key]dependencies.Object{}}
	if err := m.load(ctx); err != nil {
		if len(ps.desired[member]) == 0 && apierrors.IsForbidden(err) {
			// A member whose role lacks the dependency rule holds no
			// copies; nothing is needed there.
			log.V(2).Info("Member role does not allow dependency copies", "reason", err.Error())
			return
		}
		log.Error(err, "Reading copies in member")
		ps.failed = true
		for k := range ps.desired[member] {
			ps.memberProblem(member, k, v1alpha1.ReasonDependencyCopyFailed, explain(err, memberRBACHint))
		}
		return
	}
	want := map[dependencies.Key][]string{}
	for k, owners := range ps.desired[member] {
		if _, ok := ps.hubObjs[k]; ok && !m.unreadable(k) {
			want[k] = owners
		}
	}
	for _, step := range dependencies.Decide(want, m.existing, ps.released) {
		m.apply(ctx, p, step)
	}
}

// memberPass is one namespace in one member.
type memberPass struct {
	*pass
	member   string
	cl       cluster.Cluster
	existing map[dependencies.Key]*dependencies.Existing
	meta     map[dependencies.Key]metav1.Object
	full     map[dependencies.Key]dependencies.Object
	badRead  map[dependencies.Key]bool
}

func (m *memberPass) unreadable(k dependencies.Key) bool { return m.badRead[k] || m.skip[k] }

// load finds the copies in the namespace (metadata only) and reads every
// wanted name whole. A name whose hub object could not be read is left
// out entirely, so its copy is neither changed nor removed.
func (m *memberPass) load(ctx context.Context) error {
	rd := m.cl.GetAPIReader()
	for _, kind := range dependencies.Kinds {
		l := metadataListOf(kind)
		if err := rd.List(ctx, l, client.InNamespace(m.ns), client.MatchingLabels{v1alpha1.LabelDependency: "true"}); err != nil {
			return fmt.Errorf("listing %s copies: %w", kind, err)
		}
		for i := range l.Items {
			k := dependencies.Key{Kind: kind, Name: l.Items[i].Name}
			m.existing[k] = &dependencies.Existing{Copy: dependencies.IsCopy(&l.Items[i]), Owners: dependencies.Owners(&l.Items[i])}
			m.meta[k] = &l.Items[i]
		}
	}
	m.badRead = map[dependencies.Key]bool{}
	for k := range m.desired[m.member] {
		if _, ok := m.hubObjs[k]; !ok {
			continue
		}
		obj := dependencies.NewObject(k.Kind)
		err := rd.Get(ctx, types.NamespacedName{Namespace: m.ns, Name: k.Name}, obj)
		switch {
		case apierrors.IsNotFound(err):
			m.existing[k] = nil
		case err != nil:
			m.badRead[k] = true
			m.failed = true
			m.memberProblem(m.member, k, v1alpha1.ReasonDependencyCopyFailed, "reading it in the member: "+explain(err, memberRBACHint))
		default:
			m.existing[k] = &dependencies.Existing{Copy: dependencies.IsCopy(obj), Owners: dependencies.Owners(obj)}
			m.meta[k], m.full[k] = obj, obj
		}
	}
	for k := range m.skip {
		delete(m.existing, k)
	}
	for k := range m.badRead {
		delete(m.existing, k)
	}
	return nil
}

// apply carries out one step in the member.
func (m *memberPass) apply(ctx context.Context, p *Propagator, step dependencies.Step) {
	log := ctrl.LoggerFrom(ctx).WithValues("object", step.Key.String())
	ctx = ctrl.LoggerInto(ctx, log)
	k := step.Key
	switch step.Action {
	case dependencies.Create:
		m.create(ctx, p, step)
	case dependencies.Conflict:
		log.V(1).Info("Member object of the same name was not made by replicafed, leaving it alone")
		m.memberProblem(m.member, k, v1alpha1.ReasonDependencyConflict,
			"an object of this name exists in the member and was not created by replicafed; it is not overwritten")
	case dependencies.Keep:
		m.keep(ctx, p, step)
	case dependencies.Delete:
		if err := m.delete(ctx, k); err != nil {
			log.Error(err, "Removing a dependency copy nobody needs")
			m.failed = true
			return
		}
		log.V(1).Info("Removed dependency copy from member")
	case dependencies.ReleaseCopy:
		m.release(ctx, k)
	}
}

// fail records that writing k's copy failed: the pass looks again soon and
// the owners' condition says what failed.
func (m *memberPass) fail(ctx context.Context, k dependencies.Key, what string, err error) {
	ctrl.LoggerFrom(ctx).Error(err, "Propagating a dependency", "step", what)
	m.failed = true
	m.memberProblem(m.member, k, v1alpha1.ReasonDependencyCopyFailed, what+": "+explain(err, memberRBACHint))
}

// create copies the hub object to the member, where it does not exist yet.
func (m *memberPass) create(ctx context.Context, p *Propagator, step dependencies.Step) {
	log := ctrl.LoggerFrom(ctx)
	k := step.Key
	want, err := dependencies.Copy(m.hubObjs[k], step.Owners)
	if err != nil {
		m.memberProblem(m.member, k, v1alpha1.ReasonDependencyCopyFailed, err.Error())
		return
	}
	err = m.cl.GetClient().Create(ctx, want)
	switch {
	case err == nil:
		log.V(1).Info("Copied dependency to member", "for", step.Owners)
		m.poke(p, step.Owners)
	case apierrors.IsNotFound(err):
		// The namespace is not there yet: the engine creates it with
		// the MemberReplicaSet.
		log.V(2).Info("Namespace missing in member, copy waits")
		for _, o := range step.Owners {
			m.pending[o] = true
		}
	case apierrors.IsAlreadyExists(err):
		// Created meanwhile by someone: decided again next pass.
		m.failed = true
	default:
		m.fail(ctx, k, "creating the copy", err)
	}
}

// keep brings an existing copy in line with the hub object: updated in
// place, or deleted and created again when immutable fields changed.
func (m *memberPass) keep(ctx context.Context, p *Propagator, step dependencies.Step) {
	log := ctrl.LoggerFrom(ctx)
	wr := m.cl.GetClient()
	k := step.Key
	want, err := dependencies.Copy(m.hubObjs[k], step.Owners)
	if err != nil {
		m.memberProblem(m.member, k, v1alpha1.ReasonDependencyCopyFailed, err.Error())
		return
	}
	merged, change := dependencies.Merge(m.full[k], want)
	switch change {
	case dependencies.Update:
		if err := wr.Update(ctx, merged); err != nil {
			m.fail(ctx, k, "updating the copy", err)
			return
		}
		log.V(1).Info("Updated dependency copy in member", "for", step.Owners)
		m.poke(p, step.Owners)
	case dependencies.Recreate:
		if err := m.delete(ctx, k); err != nil {
			m.fail(ctx, k, "replacing the copy (immutable fields changed)", err)
			return
		}
		if err := wr.Create(ctx, want); err != nil {
			m.fail(ctx, k, "replacing the copy (immutable fields changed)", err)
			return
		}
		log.V(1).Info("Replaced dependency copy in member", "for", step.Owners)
		m.poke(p, step.Owners)
	}
}

// release hands a copy over to the member (an orphaning deletion of its
// FederatedReplicaSet): it stays, no longer marked as replicafed's.
func (m *memberPass) release(ctx context.Context, k dependencies.Key) {
	log := ctrl.LoggerFrom(ctx)
	obj := dependencies.NewObject(k.Kind)
	err := m.cl.GetAPIReader().Get(ctx, types.NamespacedName{Namespace: m.ns, Name: k.Name}, obj)
	if err == nil && dependencies.IsCopy(obj) {
		err = m.cl.GetClient().Update(ctx, dependencies.Release(obj))
	}
	if client.IgnoreNotFound(err) != nil {
		log.Error(err, "Releasing a dependency copy of an orphaning deletion")
		m.failed = true
		return
	}
	log.V(1).Info("Released dependency copy in member (orphaning deletion)")
}

// delete removes a copy, only if it is still the object that was read.
func (m *memberPass) delete(ctx context.Context, k dependencies.Key) error {
	md := m.meta[k]
	obj := metadataOf(k.Kind)
	obj.Namespace, obj.Name = m.ns, k.Name
	err := m.cl.GetClient().Delete(ctx, obj, client.Preconditions{UID: ptr.To(md.GetUID()), ResourceVersion: ptr.To(md.GetResourceVersion())})
	return client.IgnoreNotFound(err)
}

// poke asks the member's worker to sync each owner's key now.
func (m *memberPass) poke(p *Propagator, owners []string) {
	if p.o.Poker == nil {
		return
	}
	for _, o := range owners {
		p.o.Poker.Enqueue(fedref.MemberObject{Cluster: m.member, Namespace: m.ns, Name: o})
	}
}

// writeCondition sets (c) or removes (nil) the DependenciesPropagated
// condition, with an optimistic lock so a concurrent status write is never
// overwritten, and emits an event when the state changes.
func (p *Propagator) writeCondition(ctx context.Context, frs *v1alpha1.FederatedReplicaSet, c *metav1.Condition) error {
	cur := meta.FindStatusCondition(frs.Status.Conditions, v1alpha1.ConditionDependenciesPropagated)
	if c == nil && cur == nil || c != nil && sameCondition(cur, c) {
		return nil
	}
	obj := frs.DeepCopy()
	patch := client.MergeFromWithOptions(frs.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if c == nil {
		meta.RemoveStatusCondition(&obj.Status.Conditions, v1alpha1.ConditionDependenciesPropagated)
	} else {
		c.LastTransitionTime = metav1.NewTime(p.o.Clock.Now())
		meta.SetStatusCondition(&obj.Status.Conditions, *c)
	}
	if err := p.o.Hub.Status().Patch(ctx, obj, patch); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("writing condition %s of %s: %w", v1alpha1.ConditionDependenciesPropagated, klog.KObj(frs), err)
	}
	if c == nil || p.o.Recorder == nil {
		return nil
	}
	switch {
	case c.Status == metav1.ConditionFalse:
		p.o.Recorder.Eventf(frs, nil, corev1.EventTypeWarning, "Dependency"+c.Reason, "Propagate", "%s", c.Message)
	case cur != nil && cur.Status == metav1.ConditionFalse:
		p.o.Recorder.Eventf(frs, nil, corev1.EventTypeNormal, v1alpha1.ConditionDependenciesPropagated, "Propagate", "%s", c.Message)
	}
	return nil
}

// sweeper runs a pass over every namespace that has copies in a member or
// a propagating FederatedReplicaSet: when this replica becomes leader,
// every Resync, and on Resync(). It finds copies left behind by a
// FederatedReplicaSet that went while no leader was watching.
type sweeper struct{ p *Propagator }

// NeedLeaderElection is false: leadership comes from raft (Gate).
func (s *sweeper) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable.
func (s *sweeper) Start(ctx context.Context) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var last time.Time
	leading := false
	for {
		kicked := false
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-s.p.kick:
			kicked = true
		}
		_, ok := s.p.o.Gate.Allowed()
		now := s.p.o.Clock.Now()
		if ok && (!leading || kicked || now.Sub(last) >= s.p.o.Resync) {
			s.p.sweep(ctx)
			last = now
		}
		leading = ok
	}
}

// sweep triggers a pass over every namespace with a propagating
// FederatedReplicaSet or with copies in some reachable member.
func (p *Propagator) sweep(ctx context.Context) {
	log := ctrl.LoggerFrom(ctx).WithName("dependencies")
	namespaces := map[string]bool{}
	var list v1alpha1.FederatedReplicaSetList
	if err := p.o.Hub.List(ctx, &list); err != nil {
		log.Error(err, "Listing FederatedReplicaSets for the dependency sweep")
	}
	for i := range list.Items {
		if list.Items[i].Spec.PropagateDependencies {
			namespaces[list.Items[i].Namespace] = true
		}
	}
	for _, m := range p.o.Members.Members() {
		if !p.reachable(m.Name) {
			continue
		}
		mctx, cancel := context.WithTimeout(ctx, p.o.MemberTimeout)
		for _, kind := range dependencies.Kinds {
			l := metadataListOf(kind)
			if err := m.Cluster.GetAPIReader().List(mctx, l, client.MatchingLabels{v1alpha1.LabelDependency: "true"}); err != nil {
				// Forbidden where the member role has no dependency rule:
				// there are no copies there either.
				if !apierrors.IsForbidden(err) {
					log.Error(err, "Listing dependency copies in member", "cluster", m.Name, "kind", kind)
				}
				break
			}
			for i := range l.Items {
				namespaces[l.Items[i].Namespace] = true
			}
		}
		cancel()
	}
	names := make([]string, 0, len(namespaces))
	for ns := range namespaces {
		names = append(names, ns)
		p.Trigger(ns)
	}
	slices.Sort(names)
	log.V(2).Info("Dependency sweep", "namespaces", strings.Join(names, ","))
}
