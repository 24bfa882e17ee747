// Package frsmetrics exports per-FederatedReplicaSet gauges: what each one
// asks for, what is planned and what runs, in total and (optionally) per
// member cluster.
//
// The values are computed at scrape time from the hub cache (spec and
// status) and the replicated targets, so a series disappears with its
// FederatedReplicaSet or member on the next scrape; nothing is left to
// delete. Only the raft leader exports them: every replica could compute the
// same numbers, but one copy keeps sums across pods right and cardinality
// at one copy per fleet.
package frsmetrics

import (
	"context"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/federation/registry"
	"github.com/replicafed/replicafed/internal/fedref"
)

var (
	frsLabels    = []string{"namespace", "name"}
	memberLabels = []string{"namespace", "name", "cluster"}
)

// Family names: totals per FederatedReplicaSet (labels namespace, name), then
// rows per member (labels namespace, name, cluster).
const (
	// SpecReplicas is spec.replicas.
	SpecReplicas = "replicafed_frs_spec_replicas"
	// TargetReplicas is the sum of the committed targets of registered members.
	TargetReplicas = "replicafed_frs_target_replicas"
	// Replicas is status.replicas.
	Replicas = "replicafed_frs_replicas"
	// ReadyReplicas is status.readyReplicas.
	ReadyReplicas = "replicafed_frs_ready_replicas"
	// AvailableReplicas is status.availableReplicas.
	AvailableReplicas = "replicafed_frs_available_replicas"

	// MemberTargetReplicas is a member's committed target.
	MemberTargetReplicas = "replicafed_frs_member_target_replicas"
	// MemberReplicas is a member's status row: active pods.
	MemberReplicas = "replicafed_frs_member_replicas"
	// MemberReadyReplicas is a member's status row: ready pods.
	MemberReadyReplicas = "replicafed_frs_member_ready_replicas"
	// MemberAvailableReplicas is a member's status row: available pods.
	MemberAvailableReplicas = "replicafed_frs_member_available_replicas"
)

var (
	totals = []*prometheus.Desc{
		prometheus.NewDesc(SpecReplicas, "Replicas a FederatedReplicaSet asks for (spec.replicas).", frsLabels, nil),
		prometheus.NewDesc(TargetReplicas, "Replicas planned across registered members: the sum of the committed per-member targets; below spec when the fleet lacks room.", frsLabels, nil),
		prometheus.NewDesc(Replicas, "Active pods of a FederatedReplicaSet across members (status.replicas).", frsLabels, nil),
		prometheus.NewDesc(ReadyReplicas, "Ready pods of a FederatedReplicaSet across members (status.readyReplicas).", frsLabels, nil),
		prometheus.NewDesc(AvailableReplicas, "Available pods of a FederatedReplicaSet across members (status.availableReplicas).", frsLabels, nil),
	}
	perMember = []*prometheus.Desc{
		prometheus.NewDesc(MemberTargetReplicas, "A member's committed target for a FederatedReplicaSet (replicated through raft).", memberLabels, nil),
		prometheus.NewDesc(MemberReplicas, "Active pods of a FederatedReplicaSet in a member (its status row).", memberLabels, nil),
		prometheus.NewDesc(MemberReadyReplicas, "Ready pods of a FederatedReplicaSet in a member (its status row).", memberLabels, nil),
		prometheus.NewDesc(MemberAvailableReplicas, "Available pods of a FederatedReplicaSet in a member (its status row).", memberLabels, nil),
	}
	descs = map[string]*prometheus.Desc{
		SpecReplicas: totals[0], TargetReplicas: totals[1], Replicas: totals[2], ReadyReplicas: totals[3], AvailableReplicas: totals[4],
		MemberTargetReplicas: perMember[0], MemberReplicas: perMember[1], MemberReadyReplicas: perMember[2], MemberAvailableReplicas: perMember[3],
	}
)

// Sample is one series value.
type Sample struct {
	// Name is the family (one of the constants above).
	Name string
	// Labels are the values of namespace, name (and cluster).
	Labels []string
	Value  float64
}

// Samples computes the series of one FederatedReplicaSet. targets are its
// committed per-member targets; registered says which members count (rows
// of members that left are dropped at once, before the next plan removes
// them). members adds one row per member to the totals.
func Samples(frs *v1alpha1.FederatedReplicaSet, targets map[string]int32, registered func(string) bool, members bool) []Sample {
	ns, name := frs.Namespace, frs.Name
	spec := int32(1) // the API default
	if frs.Spec.Replicas != nil {
		spec = *frs.Spec.Replicas
	}
	// Summed in int64: members' int32 targets can add up past MaxInt32.
	var planned int64
	for c, t := range targets {
		if registered(c) {
			planned += int64(t)
		}
	}
	st := frs.Status
	out := []Sample{
		{SpecReplicas, []string{ns, name}, float64(spec)},
		{TargetReplicas, []string{ns, name}, float64(planned)},
		{Replicas, []string{ns, name}, float64(st.Replicas)},
		{ReadyReplicas, []string{ns, name}, float64(st.ReadyReplicas)},
		{AvailableReplicas, []string{ns, name}, float64(st.AvailableReplicas)},
	}
	if !members {
		return out
	}
	rows := map[string]*v1alpha1.ClusterStatus{}
	var clusters []string
	for i := range st.Clusters {
		c := &st.Clusters[i]
		rows[c.Name] = c
		clusters = append(clusters, c.Name)
	}
	for c := range targets {
		if _, ok := rows[c]; !ok {
			clusters = append(clusters, c)
		}
	}
	slices.Sort(clusters)
	for _, c := range slices.Compact(clusters) {
		if !registered(c) {
			continue
		}
		l := []string{ns, name, c}
		out = append(out, Sample{MemberTargetReplicas, l, float64(targets[c])})
		// A member planned but not yet reported has no pods we know of.
		var row v1alpha1.ClusterStatus
		if r := rows[c]; r != nil {
			row = *r
		}
		out = append(out,
			Sample{MemberReplicas, l, float64(row.Replicas)},
			Sample{MemberReadyReplicas, l, float64(row.ReadyReplicas)},
			Sample{MemberAvailableReplicas, l, float64(row.AvailableReplicas)},
		)
	}
	return out
}

// Targets reads the committed per-member targets (hub.TargetStore).
type Targets interface {
	Targets(frs fedref.FRS) (map[string]int32, int64, bool)
}

// Leader says whether this replica leads (raftstore/node.Node).
type Leader interface {
	Leading() (ctx context.Context, term uint64, ok bool)
}

// Collector is a prometheus.Collector serving Samples of every
// FederatedReplicaSet on the raft leader, nothing on followers.
type Collector struct {
	// Reader lists FederatedReplicaSets (the hub cache).
	Reader client.Reader
	// Targets are the replicated per-member targets.
	Targets Targets
	// Registered lists the registered members.
	Registered func(context.Context) ([]registry.Registration, error)
	// Leader gates the export.
	Leader Leader
	// PerMember adds per-member rows (metrics.perFRS: members).
	PerMember bool
	// Log receives list errors (V(1)); a failed scrape of these series
	// must not fail the whole endpoint.
	Log logr.Logger
}

// listTimeout bounds the cache reads of one scrape.
const listTimeout = 10 * time.Second

// Describe sends every family this collector may serve.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range totals {
		ch <- d
	}
	if c.PerMember {
		for _, d := range perMember {
			ch <- d
		}
	}
}

// Collect serves the current values; followers serve none.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	if _, _, ok := c.Leader.Leading(); !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), listTimeout)
	defer cancel()
	regs, err := c.Registered(ctx)
	if err != nil {
		c.Log.V(1).Error(err, "Listing registered members for per-FRS metrics")
		return
	}
	members := map[string]bool{}
	for _, r := range regs {
		members[r.Name] = true
	}
	list := &v1alpha1.FederatedReplicaSetList{}
	if err := c.Reader.List(ctx, list); err != nil {
		c.Log.V(1).Error(err, "Listing FederatedReplicaSets for per-FRS metrics")
		return
	}
	for i := range list.Items {
		frs := &list.Items[i]
		targets, _, _ := c.Targets.Targets(fedref.FRS{Namespace: frs.Namespace, Name: frs.Name, UID: string(frs.UID)})
		for _, s := range Samples(frs, targets, func(m string) bool { return members[m] }, c.PerMember) {
			ch <- prometheus.MustNewConstMetric(descs[s.Name], prometheus.GaugeValue, s.Value, s.Labels...)
		}
	}
}
