package hub

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/federation/planner"
	"github.com/replicafed/replicafed/federation/registry"
	"github.com/replicafed/replicafed/internal/fedref"
)

// A plan is a function of the spec, the committed targets and facts every
// replica reads alike: which members are registered (hub Secrets and the
// configuration), their replicated health, and what each member runs (its
// MemberReplicaSet status, stored in the member). What one replica happens to
// have observed first (its own probes, which members it has engaged so far,
// the reports its own workers produced) must not change the plan: a new
// leader with two members not yet engaged would otherwise place the whole
// scale-up on the third, and with moveBack Never those replicas never come
// back (the 75/75/150 of issue 9).

// facts is what one plan is made from.
type facts struct {
	members []planner.Member
	// missing names each candidate whose facts this replica does not have
	// yet, with the reason.
	missing map[string]string
	// reports are the members' latest status, by member.
	reports map[string]engine.MemberStatus
	// revisions are a rolling object's reports by member and revision
	// object (its MemberReplicaSet's name).
	revisions map[string]map[string]engine.MemberStatus
	// unconnected are registered members this replica has not engaged.
	unconnected map[string]bool
	// taintErrors say why a member's taints could not be read.
	taintErrors map[string]string
	// stalled are engaged members that did not answer within the bound
	// (or did not in a recent pass): planned as of unknown health, and
	// missing without being waited for.
	stalled map[string]bool
}

// memberRead is what one member's cache says for one FederatedReplicaSet.
type memberRead struct {
	report     engine.MemberStatus
	haveReport bool
	// revisions are the reports per revision object of a rolling
	// FederatedReplicaSet (report is then their sum).
	revisions map[string]engine.MemberStatus
	// free is the member's free room for the template (haveFree), own the
	// FederatedReplicaSet's pods its cache counts in it (-1 unknown).
	free, own int32
	haveFree  bool
}

// readMember reads what m runs of frs and its room. The room is read
// whatever m's health, the caller uses it only when healthy.
func (r *Reconciler) readMember(ctx context.Context, m *registry.Member, frs *v1alpha1.FederatedReplicaSet, objects []string, termStart time.Time) memberRead {
	var out memberRead
	key := fedref.MemberObject{Cluster: m.Name, Namespace: frs.Namespace, Name: frs.Name}
	if len(objects) == 0 {
		out.report, out.haveReport = r.memberReport(ctx, m, frs, key, termStart)
	} else {
		out.revisions = map[string]engine.MemberStatus{}
		for _, obj := range objects {
			key.Name = obj
			if rep, ok := r.memberReport(ctx, m, frs, key, termStart); ok {
				out.revisions[obj] = rep
			}
		}
		out.report, out.haveReport = sumReports(out.revisions)
	}
	if st, ok := r.Health.State(m.Name); ok && st.Health == v1alpha1.ClusterHealthy {
		out.free, out.haveFree = r.memberCapacity(ctx, m, &frs.Spec.Template)
		if out.haveFree {
			out.own = r.podsTakingRoom(ctx, m, frs)
		}
	}
	return out
}

// waitedOut plans the members this replica still cannot connect to, once the
// wait for facts has run out, as unreachable since the wait began: they are
// held through the grace period and then failed over like any member the
// leader cannot reach (a Secret with a broken kubeconfig, say). The start is
// this replica's own, so a new leader only ever measures a longer outage.
func (f *facts) waitedOut(since time.Time) {
	for i := range f.members {
		m := &f.members[i]
		if f.unconnected[m.Name] && m.Health != planner.Unhealthy {
			m.Health, m.UnhealthySince = planner.Unhealthy, since
		}
	}
}

func (f *facts) missingText() string {
	parts := make([]string, 0, len(f.missing))
	for name, why := range f.missing {
		parts = append(parts, name+" ("+why+")")
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// gatherFacts reads the facts the plan is made from (gather).
func (r *Reconciler) gatherFacts(ctx context.Context, s *scope) (bool, error) {
	s.facts = r.gather(ctx, s.frs, s.prev, rolloutObjects(s.rec), s.termStart, s.now)
	return true, nil
}

// awaitFacts ends the pass, with no status to write, while a candidate
// member's facts are missing and the wait for them (reportGrace) has not
// run out. Once it has, the members this replica cannot connect to are
// planned as unreachable since the wait began (facts.waitedOut).
func (r *Reconciler) awaitFacts(ctx context.Context, s *scope) (bool, error) {
	if wait := r.factsWait(s.key, s.facts, s.termStart, s.now); wait > 0 {
		ctrl.LoggerFrom(ctx).V(2).Info("Waiting for member facts before planning", "frs", klog.KObj(s.frs), "missing", s.facts.missingText())
		// A member may lack a report because its worker never got the
		// key: ask it.
		r.pokeLagging(s.frs, s.prev, s.facts)
		s.requeue.after(wait)
		return false, nil
	}
	if since, waited := r.awaiting.Load(s.key); waited && len(s.facts.missing) > 0 {
		s.facts.waitedOut(since)
	}
	return true, nil
}

// reportGrace bounds how long a plan waits for the facts of every candidate
// member (engaged here, health known, a report of its pods when it holds
// replicas). A new leader, or a replica that just started, may lack them;
// planning without them would treat running replicas as missing, so it waits.
// Past the bound it plans anyway (a member may be broken for good) and marks
// the object for repair (AnnotationReplan) if the missing facts changed the
// plan.
const reportGrace = 10 * time.Second

// factsWait returns how long to wait before planning the object of key
// because some member's facts are missing (bounded by reportGrace from the
// first wait in this term: a wait left from an earlier term of this replica
// does not count).
func (r *Reconciler) factsWait(key string, f facts, termStart, now time.Time) time.Duration {
	waitFor := 0
	for name := range f.missing {
		if !f.stalled[name] { // a member that does not answer is never waited for
			waitFor++
		}
	}
	if waitFor == 0 {
		r.awaiting.Delete(key)
		return 0
	}
	since, ok := r.awaiting.Load(key)
	if !ok || since.Before(termStart) {
		r.awaiting.Store(key, now)
		since = now
	}
	if left := reportGrace - now.Sub(since); left > 0 {
		return min(left, time.Second)
	}
	return 0
}

// termMark remembers when this replica's current leadership began, so local
// reports from an earlier term of its own are not taken for current ones.
type termMark struct {
	mu    sync.Mutex
	ctx   context.Context
	start time.Time
}

// observe returns the start of the term whose leader context is ctx.
func (t *termMark) observe(ctx context.Context, now time.Time) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ctx != ctx {
		t.ctx, t.start = ctx, now
	}
	return t.start
}

// gather collects the facts for frs. Candidates are the registered members,
// the engaged ones and those holding a committed target.
func (r *Reconciler) gather(ctx context.Context, frs *v1alpha1.FederatedReplicaSet, prev map[string]int32, objects []string, termStart, now time.Time) facts {
	f := facts{missing: map[string]string{}, reports: map[string]engine.MemberStatus{}, revisions: map[string]map[string]engine.MemberStatus{}, unconnected: map[string]bool{}, taintErrors: map[string]string{}, stalled: map[string]bool{}}
	fl, err := r.fleet(ctx)
	if err != nil {
		// Without the list, only what is engaged here is known to exist.
		f.missing["*"] = "registered members unknown: " + err.Error()
	}
	maps.Copy(f.taintErrors, fl.taintErrors)
	read := r.readMembers(ctx, frs, fl, objects, termStart, now)
	for _, name := range fl.names {
		f.members = append(f.members, r.memberFacts(ctx, &f, fl, name, read, prev[name], now))
	}
	if err == nil {
		r.taints.retain(fl.registered)
		r.stalls.retain(fl.registered)
	}
	f.keepCandidates(&frs.Spec.Placement, prev)
	return f
}

// fleetView is every member a plan may consider: the registered ones, with
// their labels and taints, and those engaged on this replica.
type fleetView struct {
	// names are the registered members, sorted.
	names      []string
	registered map[string]bool
	labels     map[string]map[string]string
	taints     map[string][]v1alpha1.ClusterTaint
	// taintErrors say why a member's taints could not be read.
	taintErrors map[string]string
	engaged     map[string]*registry.Member
}

// fleet lists the members a plan may consider. On an error the
// registrations are unknown and the view holds the engaged members only.
func (r *Reconciler) fleet(ctx context.Context) (fleetView, error) {
	fl := fleetView{registered: map[string]bool{}, labels: map[string]map[string]string{},
		taints: map[string][]v1alpha1.ClusterTaint{}, taintErrors: map[string]string{}, engaged: map[string]*registry.Member{}}
	var err error
	if r.Registered != nil {
		var regs []registry.Registration
		regs, err = r.Registered(ctx)
		for _, reg := range regs {
			fl.registered[reg.Name] = true
			fl.labels[reg.Name] = reg.Labels
			fl.taints[reg.Name] = reg.Taints
			if reg.TaintsError != "" {
				fl.taintErrors[reg.Name] = reg.TaintsError
			}
		}
	}
	for _, m := range r.Registry.Members() {
		fl.engaged[m.Name] = m
		fl.registered[m.Name] = true
		// The registration's current labels win over those read when the
		// member was engaged, so relabelling a Secret moves replicas
		// without a restart.
		if _, ok := fl.labels[m.Name]; !ok {
			fl.labels[m.Name] = m.Labels
		}
	}
	fl.names = slices.Sorted(maps.Keys(fl.registered))
	return fl, err
}

// readMembers reads what each engaged member runs of frs and has room for,
// from its cache, at once for every member and bounded: a member that does
// not answer in time is unknown for this pass, never a reason to wait, and
// is left unread for a while (stalls).
func (r *Reconciler) readMembers(ctx context.Context, frs *v1alpha1.FederatedReplicaSet, fl fleetView, objects []string, termStart, now time.Time) map[*registry.Member]memberRead {
	var toRead []*registry.Member
	for _, name := range fl.names {
		if m, ok := fl.engaged[name]; ok && !r.stalls.stalled(m, now) {
			toRead = append(toRead, m)
		}
	}
	// A read the pass gives up on may still run when the caller writes frs:
	// the reads get their own copy.
	snap := frs.DeepCopy()
	return boundedRead(ctx, &r.stalls, toRead, r.memberTimeout(), now, func(ctx context.Context, m *registry.Member) memberRead {
		return r.readMember(ctx, m, snap, objects, termStart)
	})
}

// memberFacts is member name as the planner sees it, from the fleet view,
// its health and what was read of it (read); prev is its committed target.
// It records in f what is missing of it and its report.
func (r *Reconciler) memberFacts(ctx context.Context, f *facts, fl fleetView, name string, read map[*registry.Member]memberRead, prev int32, now time.Time) planner.Member {
	var recorded []v1alpha1.ClusterTaint
	if r.RecordedTaints != nil && len(fl.taints[name]) > 0 {
		recorded = r.RecordedTaints(ctx, name)
	}
	pm := planner.Member{Name: name, Labels: fl.labels[name], Taints: r.taints.convert(name, fl.taints[name], recorded, now)}
	pm.Health, pm.UnhealthySince = r.plannerHealth(name)
	m, isEngaged := fl.engaged[name]
	got, answered := read[m]
	if isEngaged && !answered && pm.Health != planner.Unhealthy {
		// Unknown for this pass: held at its committed target.
		pm.Health = planner.HealthUnknown
		f.stalled[name] = true
	}
	switch {
	case pm.Health == planner.Unhealthy:
		// Known unreachable: the grace period decides, facts or not.
	case !isEngaged:
		f.missing[name] = "not connected on this replica yet"
		f.unconnected[name] = true
	case f.stalled[name]:
		f.missing[name] = fmt.Sprintf("did not answer within %s", r.memberTimeout())
	case pm.Health == planner.HealthUnknown:
		f.missing[name] = "health unknown"
	}
	if !answered {
		return pm
	}
	if got.haveReport {
		f.reports[name] = got.report
		if got.revisions != nil {
			f.revisions[name] = got.revisions
		}
		pm.Current, pm.Ready = got.report.Replicas, got.report.ReadyReplicas
		pm.Unschedulable, pm.UnschedulableSince = got.report.Unschedulable, got.report.UnschedulableSince
	} else if prev > 0 && pm.Health == planner.Healthy {
		f.missing[name] = "no report of its pods yet"
	}
	if pm.Health == planner.Healthy && got.haveFree {
		free := roomBeyondReport(got.free, got.own, pm.Current)
		pm.FreeCapacity = &free
	}
	return pm
}

// plannerHealth is the member's health as the planner takes it: unknown
// until a verdict exists.
func (r *Reconciler) plannerHealth(name string) (planner.Health, time.Time) {
	st, known := r.Health.State(name)
	switch {
	case !known:
		return planner.HealthUnknown, time.Time{}
	case st.Health == v1alpha1.ClusterHealthy:
		return planner.Healthy, time.Time{}
	case st.Health == v1alpha1.ClusterUnreachable:
		return planner.Unhealthy, st.Since
	}
	return planner.HealthUnknown, time.Time{}
}

// keepCandidates drops from f.missing the members that cannot change the
// plan: those the placement does not select and that hold no target.
func (f *facts) keepCandidates(placement *v1alpha1.Placement, prev map[string]int32) {
	candidates := map[string]bool{}
	for _, c := range planner.Select(placement, f.members).Candidates {
		candidates[c.Member.Name] = true
	}
	for name := range f.missing {
		if name != "*" && !candidates[name] && prev[name] == 0 {
			delete(f.missing, name)
		}
	}
}

// memberReport is what a member runs for frs: this term's report of the
// local worker when there is one, else the MemberReplicaSet status the
// member stores (written by whichever leader synced it last), read from this
// replica's member cache. ok is false when neither exists.
func (r *Reconciler) memberReport(ctx context.Context, m *registry.Member, frs *v1alpha1.FederatedReplicaSet, key fedref.MemberObject, termStart time.Time) (engine.MemberStatus, bool) {
	local, haveLocal := r.Reports.Get(key)
	if haveLocal && !local.ReportedAt.Before(termStart) && (local.Hub.UID == "" || local.Hub.UID == frs.UID) {
		return local, true
	}
	mrs := &v1alpha1.MemberReplicaSet{}
	err := m.Cluster.GetCache().Get(ctx, types.NamespacedName{Namespace: frs.Namespace, Name: key.Name}, mrs)
	if err != nil || (mrs.Spec.Hub.UID != "" && mrs.Spec.Hub.UID != frs.UID) {
		// Not found: no pods can exist yet (they are created only once their
		// owner exists); any other error: nothing known.
		return engine.MemberStatus{}, false
	}
	st := engine.MemberStatus{
		Target: mrs.Spec.Replicas, Hub: mrs.Spec.Hub,
		Replicas: mrs.Status.Replicas, FullyLabeledReplicas: mrs.Status.FullyLabeledReplicas,
		ReadyReplicas: mrs.Status.ReadyReplicas, AvailableReplicas: mrs.Status.AvailableReplicas,
		ObservedGeneration: mrs.Status.ObservedGeneration, ReportedAt: r.Clock.Now(),
	}
	if mrs.Status.TerminatingReplicas != nil {
		st.TerminatingReplicas = *mrs.Status.TerminatingReplicas
	}
	for i := range mrs.Status.Conditions {
		if c := mrs.Status.Conditions[i]; c.Type == v1alpha1.ConditionReplicaFailure && c.Status == "True" {
			st.ReplicaFailure = &c
		}
	}
	if haveLocal {
		// Counts from the member, the unschedulable detail (not in the
		// MemberReplicaSet status) from the older local report.
		st.Unschedulable, st.UnschedulableSince = min(local.Unschedulable, st.Replicas), local.UnschedulableSince
	}
	return st, true
}

// optimistic returns members with every missing member as it would be once
// its facts arrive and nothing changed: healthy, running its committed
// target. A plan that differs from the real one was shaped by the missing
// facts.
func optimistic(f facts, prev map[string]int32) []planner.Member {
	out := make([]planner.Member, len(f.members))
	copy(out, f.members)
	for i := range out {
		if _, miss := f.missing[out[i].Name]; miss {
			out[i].Health = planner.Healthy
			out[i].Current, out[i].Ready = prev[out[i].Name], prev[out[i].Name]
			out[i].FreeCapacity = nil
		}
	}
	return out
}

// AnnotationReplan marks a FederatedReplicaSet whose committed plan was made
// while some members' facts were missing (after the wait for them ran out)
// and came out different from the plan those facts would likely have given.
// While it is set, and once every fact is in, the hub plans it with
// moveBack OnRecovery, within the move budget, until no move is pending: the
// spread returns to what an undisturbed plan gives, whatever the
// FederatedReplicaSet's own moveBack policy. It lives on the hub object so
// every later leader sees it.
const AnnotationReplan = "replicafed.io/replan"

func replanValue(missing map[string]string) string {
	names := make([]string, 0, len(missing))
	for n := range missing {
		names = append(names, n)
	}
	sort.Strings(names)
	return fmt.Sprintf("planned without facts of: %s", strings.Join(names, ","))
}
