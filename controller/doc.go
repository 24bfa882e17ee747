// Package controller is the member side of replicafed: per member cluster, the
// Kubernetes ReplicaSet reconcile, with a MemberReplicaSet standing in for the
// ReplicaSet.
//
// # Design
//
// For each FederatedReplicaSet the hub wants in a member, the member holds a
// MemberReplicaSet (api/v1alpha1) with the same namespace and name. Its spec
// records the member's target (spec.replicas), the selector, minReadySeconds
// and the hub reference; its status carries the ReplicaSet status fields and
// the ReplicaFailure condition. Pods carry a controller owner reference to it
// (replicafed.io/v1alpha1 MemberReplicaSet, controller and blockOwnerDeletion
// true), so no other controller adopts them, the member's garbage collector
// removes them with it, and an operator in the member sees who owns them.
//
// Packages, one job each:
//   - expectations: the Store interface (fixed; raftstore implements it) and
//     Memory, the in-process store with upstream's counting semantics.
//   - podstate: active/terminating/ready/available predicates.
//   - ranking: upstream's deletion order (plus optional node cost tiers) and
//     the pods-to-delete choice.
//   - dependencies: the ConfigMaps, Secrets, ServiceAccounts and PVCs a pod
//     template references (for spec.propagateDependencies).
//   - replicastatus: status counts, the ReplicaFailure condition, the
//     next-availability requeue, unschedulable counts.
//   - slowstart: 1, 2, 4, … batches stopping at the first failing batch.
//   - claim: adoption and release with upstream's rules and patches.
//   - engine: one sync of one key (syncReplicaSet + manageReplicas).
//   - worker: informers, event rules, workqueue and goroutines per member, and
//     Manager, the multicluster.Aware that runs one worker per member.
//
// Inputs arrive through engine.WorkloadSource (what the hub wants) and results
// leave through engine.StatusSink; engine.Gate decides whether this process
// may write at all (the raft leader fence), so followers keep warm caches but
// never write. A sync holds a gate permit for its whole duration: a
// leadership handover cancels the permit's context and waits for the sync to
// return before it transfers leadership.
// With sharding each member has a gate of its own (worker.Options.GateFor),
// an engine.FencedGate on this replica's owner lease of the member
// (replica/ownergate): the owner writes whether or not it leads, its
// syncs carry the (owner, epoch) fence to the store instead of the term,
// and the takeover check below runs once per key and epoch.
//
// # Member writes across leader terms
//
//   - Before its first write for a key in a leader term (and when the store
//     dropped observations, or the key stayed unsatisfied for
//     Options.UnsatisfiedRequeue), the engine lists the key's pods with a
//     quorum read, lets a term-aware store (expectations.TermReconciler)
//     settle earlier terms' reservations from that list, and writes nothing
//     until the informer cache has caught up with it (store resource
//     version, else a pod-by-pod comparison). This plays the role of
//     upstream 1.36's consistency store for the case that matters here: a
//     new leader whose cache lags what the old leader saw. A key the store
//     would settle nothing for (expectations.QuietReconciler) is not
//     listed: a cache that has reached one quorum read of the member made
//     in the term stands in for its list (one read per member and term
//     instead of one per MemberReplicaSet, which a member's rate limit
//     charges like a write).
//   - A create refused by the API server releases its name
//     (Store.CreationFailed); one whose outcome is unknown (timeout, 5xx,
//     cancelled, transport error) keeps it (Store.CreationUnknown), so the
//     retry reuses the name and a late landing collides with it.
//   - A key whose expectations are unsatisfied requeues itself after
//     Options.UnsatisfiedRequeue instead of waiting for an event.
//   - Store.DeleteCluster, called when a member's worker stops, is local to
//     the process; a replicated store never forgets shared state for it.
//
// # Scale-down order
//
// Upstream's ReplicaSet controller (LogarithmicScaleDown and PodDeletionCost
// on) deletes first the pod that comes first by these rules, each consulted
// only when the ones before tie:
//
//  1. unassigned (no spec.nodeName) before assigned;
//  2. phase Pending (or empty/unrecognised) before Unknown before Running;
//  3. not Ready before Ready;
//  4. lower controller.kubernetes.io/pod-deletion-cost annotation first
//     (missing or invalid counts as 0);
//  5. more colocated first (more active related pods on the same node);
//  6. both Ready: Ready more recently first, in log2 buckets of age, equal
//     buckets by smaller UID (ending the comparison);
//  7. more restarts first (regular containers, then restartable init
//     containers);
//  8. created more recently first, in log2 buckets, equal buckets by
//     smaller UID;
//  9. otherwise tied.
//
// replicafed keeps that order and, when the MemberReplicaSet's
// spec.nodeCost is set (the FederatedReplicaSet's spec.scaleDown.nodeCost,
// or the controller's default), adds one rule between 4 and 5:
//
//	4b. pod on a cheaper-to-free node first. The node's label nodeCost.key
//	    ranks it: with nodeCost.values, by the value's position in the list
//	    (first is cheapest; a repeated value keeps its first position);
//	    with nodeCost.integer, by the value as a base-10 int64, lower is
//	    cheaper (as with pod-deletion-cost, lower goes first). A node without
//	    the label, with a value not listed or not an integer, or not in the
//	    node cache ranks after every ranked node; two such nodes tie.
//
// So readiness (1-3) still decides before the tier, an explicit
// pod-deletion-cost still wins over it (4; equal costs, including two pods
// without the annotation, fall through to the tier), and colocation, ready
// time, restarts and age (5-8) order pods within one tier. Nodes come from
// the member's node informer (started with the worker); a scale-down reads
// each distinct node once from that cache and makes no API call. Without
// nodeCost the order is exactly upstream's. Node label changes take effect
// at the next scale-down; they do not trigger one.
//
// # Namespaces created in members
//
// With Options.CreateNamespaces, a namespace missing in a member is created
// labelled app.kubernetes.io/managed-by=replicafed plus the
// pod-security.kubernetes.io/* labels of the hub namespace
// (Workload.NamespaceLabels, filtered by engine.PodSecurityLabels), so Pod
// Security admission applies the hub's level to the pods replicafed creates
// there. Other hub labels are not copied, and a namespace that already
// exists is never changed.
//
// # Deliberate differences from upstream
//
//   - The engine creates and updates the MemberReplicaSet from the Workload.
//     After creating it, pods are created on the next sync, once the owner is
//     in the cache, so pod add events resolve to it and settle expectations.
//     A key the WorkloadSource does not know is left alone (no pod writes, no
//     owner deletion): removing owners is the federation's decision.
//   - A Workload of target zero gets no MemberReplicaSet while no orphan pod
//     of its namespace matches its selector: the sync reports zero to the
//     hub instead (the planner gives every candidate member a target, so
//     most members of a small FederatedReplicaSet would hold an empty
//     object, its status and its event). An orphan that matches is adopted
//     and deleted as upstream, by creating the owner first; one that
//     appears later is found at the key's next periodic sync, not by the
//     pod's event (no owner to enqueue). An existing MemberReplicaSet is
//     kept at zero, as upstream keeps a scaled-down ReplicaSet.
//   - Pod names come from Store.ExpectCreations: a name-reserving store gives
//     exact names and AlreadyExists then counts as success; the in-memory store
//     gives empty names and pods use generateName "<name>-".
//   - Deletes carry a UID precondition (the raft fence: a deposed leader cannot
//     delete a replacement pod of the same name); a precondition conflict is
//     treated like NotFound.
//   - A failed delete settles its expectation only when it provably did not
//     happen (a 4xx other than a timeout, or never sent); one whose outcome
//     is unknown (timeout, 5xx, a call cancelled by a handover) keeps it, and
//     the reconcile at the start of a later sync, or of the next leader's,
//     returns it so the engine deletes that same pod again rather than
//     choosing another victim. Upstream settles every failed delete at once.
//   - A template without labels or with labels the selector does not match is
//     refused before any call, with a FailedCreate event and the ReplicaFailure
//     condition (upstream's API validation would refuse such a ReplicaSet).
//   - An empty selector is refused like an invalid one (upstream validation
//     forbids it), so an owner never adopts every pod of a namespace.
//   - Colocation ranks count the pods the MemberReplicaSet's selector matches
//     (as for a Deployment-owned ReplicaSet without siblings); a bare upstream
//     ReplicaSet has no controller and ranks every pod 0.
//   - Conditions are metav1.Condition: a failure with no replica difference
//     gets reason "Failed" instead of upstream's empty reason.
//   - terminatingReplicas is always set (upstream 1.35+ default).
//   - No deletion-age metric yet. Instead of upstream's consistency store
//     (which tracks the resource versions of a controller's own writes), the
//     engine compares its cache with a quorum list once per key and term
//     (or with one read of the member, for keys with nothing to settle),
//     see above.
//   - Events use the events.k8s.io API with reporting controller "replicafed".
//   - SuccessfulCreate and SuccessfulDelete are one event per sync, not per
//     pod: "Created 3 pods: a, b, c" (at most ten names, then "and N more");
//     a sync that touches one pod writes upstream's note ("Created pod: a").
//     With events.k8s.io the second event of an object, reason and action
//     starts a series: a PATCH at once and the final count 6 - 12 minutes
//     later, so per-pod events cost a MemberReplicaSet of three pods four
//     writes and one event per sync costs one. Failures stay one event each.
//   - With spec.propagateDependencies (Workload.Dependencies), pods are not
//     created while a required ConfigMap, Secret, ServiceAccount or
//     PersistentVolumeClaim of the template is missing in the member (checked
//     by Options.Dependencies before any name is reserved): the
//     MemberReplicaSet shows WaitingForDependencies and the key is synced
//     again after DependencyRecheck or when the hub has copied them. Upstream
//     creates such pods, which then fail to start. Deletions never wait.
package controller
