package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	toolswatch "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// sampleInterval is how often the observer lists every member's pods.
const sampleInterval = 100 * time.Millisecond

// podRecord is what the observer's watches saw of one pod.
type podRecord struct {
	member, name string
	uid          types.UID
	// initial pods existed when the round started; the others were created
	// during it, first seen at created.
	initial  bool
	created  time.Time
	deleting time.Time // deletionTimestamp first seen (or deletion)
}

// sample is one 100 ms listing of every member: active pods (not
// terminating) and all pods, by member; a member whose list failed is absent.
type sample struct {
	at     time.Time
	active map[string]int
	all    map[string]int
	errs   map[string]string
}

// observer watches and samples one FederatedReplicaSet's pods in every member
// directly (never through a fault proxy) for one round.
type observer struct {
	e      *env
	name   string
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	pods      map[types.UID]*podRecord
	samples   []sample
	watchErrs []string
	created   int // pods created since the start
	deleted   int // pods whose deletion started since the start
}

// startObserver lists every member's pods of FederatedReplicaSet name, then
// watches each member from that list's resourceVersion (so no creation is
// missed) and samples every member every sampleInterval.
func startObserver(e *env, name string) (*observer, error) {
	ctx, cancel := context.WithCancel(context.Background())
	o := &observer{e: e, name: name, cancel: cancel, pods: map[types.UID]*podRecord{}}
	sel := selector(name).String()
	for _, m := range allMembers {
		cs, err := kubernetes.NewForConfig(e.f.Member(m).Config())
		if err != nil {
			cancel()
			return nil, fmt.Errorf("client for %s: %w", m, err)
		}
		lctx, lcancel := context.WithTimeout(ctx, 30*time.Second)
		l, err := cs.CoreV1().Pods(e.ns).List(lctx, metav1.ListOptions{LabelSelector: sel})
		lcancel()
		if err != nil {
			cancel()
			return nil, fmt.Errorf("listing pods of %s in %s: %w", name, m, err)
		}
		for i := range l.Items {
			p := &l.Items[i]
			r := &podRecord{member: m, name: p.Name, uid: p.UID, initial: true}
			if p.DeletionTimestamp != nil {
				r.deleting = time.Now()
			}
			o.pods[p.UID] = r
		}
		rw, err := toolswatch.NewRetryWatcherWithContext(ctx, l.ResourceVersion, &cache.ListWatch{
			WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				opts.LabelSelector = sel
				return cs.CoreV1().Pods(e.ns).Watch(ctx, opts)
			},
		})
		if err != nil {
			cancel()
			return nil, fmt.Errorf("watching pods of %s in %s: %w", name, m, err)
		}
		o.wg.Add(1)
		go func() {
			defer o.wg.Done()
			defer rw.Stop()
			o.consume(ctx, m, rw)
		}()
	}
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		tick := time.NewTicker(sampleInterval)
		defer tick.Stop()
		for {
			o.sample(ctx)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return o, nil
}

func (o *observer) consume(ctx context.Context, member string, w watch.Interface) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			now := time.Now()
			if ev.Type == watch.Error {
				o.mu.Lock()
				o.watchErrs = append(o.watchErrs, fmt.Sprintf("%s %s: watch error %v", now.Format("15:04:05.000"), member, ev.Object))
				o.mu.Unlock()
				continue
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			o.mu.Lock()
			r := o.pods[p.UID]
			if r == nil {
				r = &podRecord{member: member, name: p.Name, uid: p.UID, created: now}
				o.pods[p.UID] = r
				o.created++
			}
			if r.deleting.IsZero() && (p.DeletionTimestamp != nil || ev.Type == watch.Deleted) {
				r.deleting = now
				o.deleted++
			}
			o.mu.Unlock()
		}
	}
}

// sample lists every member at once, metadata only.
func (o *observer) sample(ctx context.Context) {
	s := sample{at: time.Now(), active: map[string]int{}, all: map[string]int{}, errs: map[string]string{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, m := range allMembers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			l := &metav1.PartialObjectMetadataList{}
			l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
			err := o.e.f.MemberClients[m].List(lctx, l, client.InNamespace(o.e.ns), client.MatchingLabelsSelector{Selector: selector(o.name)})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				s.errs[m] = err.Error()
				return
			}
			n := 0
			for i := range l.Items {
				if l.Items[i].DeletionTimestamp == nil {
					n++
				}
			}
			s.active[m], s.all[m] = n, len(l.Items)
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	o.mu.Lock()
	o.samples = append(o.samples, s)
	o.mu.Unlock()
}

// initialActive counts, by member, the pods not terminating when the
// observer started.
func (o *observer) initialActive() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string]int{}
	for _, r := range o.pods {
		if r.initial && r.deleting.IsZero() {
			out[r.member]++
		}
	}
	return out
}

// progress returns how many pods were created and how many deletions
// started since the observer started.
func (o *observer) progress() (created, deleted int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.created, o.deleted
}

// stop ends the watches and the sampling, after one last sample.
func (o *observer) stop() {
	o.sample(context.Background())
	o.cancel()
	o.wg.Wait()
}

// roundCheck is what one round must show; analyze fills the findings.
type roundCheck struct {
	from, to   int            // fleet replicas before and after
	oldT, newT map[string]int // member targets before and after
	surge      int
	start      time.Time // scale request
	disrupted  time.Time // disruption applied (zero if never)
}

// findings are a round's measured results.
type findings struct {
	samples, overSamples, belowSamples int
	duplicates, extraDeletes           int
	created, deleted                   map[string]int
	maxActive, minActive               map[string]int
	violations                         []string
}

// analyze checks the observer's records against the round's bounds.
func (o *observer) analyze(c roundCheck) findings {
	o.mu.Lock()
	defer o.mu.Unlock()
	f := findings{created: map[string]int{}, deleted: map[string]int{}, maxActive: map[string]int{}, minActive: map[string]int{}}
	rel := func(t time.Time) string { return relTime(t, c.start, c.disrupted) }
	up := c.to > c.from

	// Samples: per member no more than max(old, new target) + maxSurge, the
	// fleet no more than max(from, to) + maxSurge; on a scale-down no member
	// below its new target and the fleet not below the new replicas.
	fleetBound := max(c.from, c.to) + c.surge
	var over, below []string
	for i, s := range o.samples {
		f.samples++
		total, complete := 0, len(s.errs) == 0
		for _, m := range allMembers {
			n, ok := s.active[m]
			if !ok {
				continue
			}
			total += n
			if _, seen := f.minActive[m]; !seen || n < f.minActive[m] {
				f.minActive[m] = n
			}
			f.maxActive[m] = max(f.maxActive[m], n)
			if bound := max(c.oldT[m], c.newT[m]) + c.surge; n > bound {
				f.overSamples++
				over = append(over, fmt.Sprintf("sample #%d at %s: %s runs %d active pods (%d with terminating) > bound %d (target %d->%d + maxSurge %d)",
					i, rel(s.at), m, n, s.all[m], bound, c.oldT[m], c.newT[m], c.surge))
			}
			if !up && n < c.newT[m] {
				f.belowSamples++
				below = append(below, fmt.Sprintf("sample #%d at %s: %s runs %d active pods < its target %d on a scale-down %d->%d",
					i, rel(s.at), m, n, c.newT[m], c.oldT[m], c.newT[m]))
			}
		}
		if complete && total > fleetBound {
			f.overSamples++
			over = append(over, fmt.Sprintf("sample #%d at %s: the fleet runs %d active pods > bound %d (replicas %d->%d + maxSurge %d): %s",
				i, rel(s.at), total, fleetBound, c.from, c.to, c.surge, fmtCounts(s.active)))
		}
		if complete && !up && total < c.to {
			f.belowSamples++
			below = append(below, fmt.Sprintf("sample #%d at %s: the fleet runs %d active pods < replicas %d on a scale-down: %s",
				i, rel(s.at), total, c.to, fmtCounts(s.active)))
		}
	}
	f.violations = append(f.violations, capList("over-target samples", over, 15)...)
	f.violations = append(f.violations, capList("below-target samples", below, 15)...)

	// Watches: a scale-up creates exactly the missing pods in each member
	// and deletes none; a scale-down deletes exactly the surplus and creates
	// none.
	byMember := map[string][]*podRecord{}
	for _, r := range o.pods {
		byMember[r.member] = append(byMember[r.member], r)
		if !r.initial {
			f.created[r.member]++
		}
		if !r.deleting.IsZero() {
			f.deleted[r.member]++
		}
	}
	totalCreated, totalDeleted := 0, 0
	for _, m := range allMembers {
		totalCreated += f.created[m]
		totalDeleted += f.deleted[m]
	}
	needCreate, needDelete := max(c.to-c.from, 0), max(c.from-c.to, 0)
	f.duplicates = max(totalCreated-needCreate, 0)
	f.extraDeletes = max(totalDeleted-needDelete, 0)
	for _, m := range allMembers {
		wantC, wantD := max(c.newT[m]-c.oldT[m], 0), max(c.oldT[m]-c.newT[m], 0)
		if f.created[m] <= wantC && f.deleted[m] <= wantD {
			continue
		}
		pods := byMember[m]
		sort.Slice(pods, func(i, j int) bool { return pods[i].created.Before(pods[j].created) })
		var late, gone []string
		for _, r := range pods {
			if !r.initial && !c.disrupted.IsZero() && r.created.After(c.disrupted) {
				late = append(late, fmt.Sprintf("%s(uid %s, seen %s)", r.name, shortUID(r.uid), rel(r.created)))
			}
			if !r.deleting.IsZero() {
				d := fmt.Sprintf("%s(uid %s, deleted %s", r.name, shortUID(r.uid), rel(r.deleting))
				if !r.initial {
					d += ", created " + rel(r.created)
				}
				gone = append(gone, d+")")
			}
		}
		msg := fmt.Sprintf("%s: %d pods created (needed %d) and %d deleted (needed %d) for target %d->%d",
			m, f.created[m], wantC, f.deleted[m], wantD, c.oldT[m], c.newT[m])
		if len(late) > 0 {
			msg += fmt.Sprintf("; created after the disruption (%d): %s", len(late), strings.Join(capStrings(late, 25), " "))
		}
		if len(gone) > 0 {
			msg += fmt.Sprintf("; deleted (%d): %s", len(gone), strings.Join(capStrings(gone, 25), " "))
		}
		f.violations = append(f.violations, msg)
	}
	if f.duplicates > 0 {
		f.violations = append(f.violations, fmt.Sprintf("%d distinct pods created for a change of %d->%d replicas: %d duplicate creates", totalCreated, c.from, c.to, f.duplicates))
	}
	if f.extraDeletes > 0 {
		f.violations = append(f.violations, fmt.Sprintf("%d pods deleted for a change of %d->%d replicas: %d deleted below target", totalDeleted, c.from, c.to, f.extraDeletes))
	}
	f.violations = append(f.violations, capList("watch errors", o.watchErrs, 5)...)
	return f
}

// relTime formats t relative to the scale request and the disruption.
func relTime(t, start, disrupted time.Time) string {
	s := fmt.Sprintf("%s (scale%+.2fs", t.Format("15:04:05.000"), t.Sub(start).Seconds())
	if !disrupted.IsZero() {
		s += fmt.Sprintf(", disruption%+.2fs", t.Sub(disrupted).Seconds())
	}
	return s + ")"
}

func fmtCounts(c map[string]int) string {
	var parts []string
	for _, m := range allMembers {
		if n, ok := c[m]; ok {
			parts = append(parts, fmt.Sprintf("%s=%d", m, n))
		} else {
			parts = append(parts, m+"=?")
		}
	}
	return strings.Join(parts, " ")
}

func shortUID(u types.UID) string {
	if len(u) > 8 {
		return string(u[:8])
	}
	return string(u)
}

func capStrings(ss []string, n int) []string {
	if len(ss) <= n {
		return ss
	}
	return append(ss[:n:n], fmt.Sprintf("... and %d more", len(ss)-n))
}

// capList turns findings into violation lines, the first n in full.
func capList(what string, ss []string, n int) []string {
	if len(ss) == 0 {
		return nil
	}
	out := []string{fmt.Sprintf("%d %s", len(ss), what)}
	for _, s := range capStrings(ss, n) {
		out = append(out, "  "+s)
	}
	return out
}
