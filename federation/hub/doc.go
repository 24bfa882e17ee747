// Package hub reconciles FederatedReplicaSets in the hub cluster. On the raft
// leader only, it plans each FederatedReplicaSet's per-member targets, commits
// them through raft, pokes the member workers, and writes the status the
// members report back. It also runs the deletion protocol behind the
// replicafed.io/cascade finalizer.
//
// Followers run the same informers but never write: every reconcile first asks
// the leader gate, and a new leader re-queues every FederatedReplicaSet.
//
// # One pass
//
// Reconcile (reconciler.go) reads the object, hands one being deleted to
// finalize (finalize.go), adds the cascade finalizer, and runs one pass over
// a scope: the object, its facts, its plan, the status being built and when
// to come back (requeue.go). Each phase records what it decided in the scope
// and may end the pass early. In order:
//
//  1. gatherFacts (facts.go): the registered members, their health, what each
//     runs and has room for, read at once and bounded per member (stalls.go).
//  2. awaitFacts (facts.go): end, writing nothing, while a candidate's facts
//     are missing and reportGrace has not run out.
//  3. planTargets (plan.go): the planner's targets; a placement that selects
//     no member holds the committed ones and ends (holdWithoutCandidates).
//  4. markForRepair (plan.go): AnnotationReplan when missing facts shaped
//     the plan.
//  5. commitTargets (plan.go): commit changed targets through raft and poke
//     the member workers.
//  6. clearRepairMark (plan.go): drop AnnotationReplan once the repair is done.
//  7. report (reconciler.go): the warnings (warnings.go) and the one status
//     write of the pass (status.go).
//
// A spec that cannot be interpreted runs rejectSpec (validate.go),
// gatherFacts and holdTargets instead, then report.
//
// A deletion is its own pass (finalize.go): recordPropagation,
// pickDeletionMembers, deleteInMembers, then reportDeletionWait while a
// member holds it up, or releaseFinalizer.
//
// A plan depends only on the spec, the committed targets and facts every
// replica reads alike (facts.go): the registered members, their health as
// recorded in raft when this replica has no verdict of its own, and what each
// member runs as its MemberReplicaSet status says. A leader that lacks some
// of them waits (bounded); a plan it had to make without them, and that they
// would have changed, is marked (AnnotationReplan) and repaired within the
// move budget once they arrive. A plan that cannot be committed still gets a
// status that shows what the members run, with the Planned condition False.
//
// Member taints come from the registrations (registry.AnnotationTaints); a
// taint without timeAdded counts from the time recorded in the member's
// MemberCluster status, else from when this replica first saw it (taints.go),
// so a handover continues the window, or restarts it and only lengthens it.
// The reconcile comes back at planner.Result.RequeueAt (grace period,
// unschedulable threshold or toleration running out). Warning events are
// emitted when a warning's text changes, not on every pass.
//
// A spec that cannot be interpreted (specProblems: the schema's rules, a name no
// label value can carry, a selector that does not parse or match the
// template) is never planned: the members keep their last committed targets,
// the condition Invalid names the fields and one warning is emitted per
// distinct text; members hand off the objects whose pods they could not
// manage (Workloads). A valid placement that selects no member holds the
// targets too (Planned False, NoCandidateClusters) unless replicas is 0.
//
// Every wait on a member is bounded (MemberTimeout): its facts are read for
// all members at once, and a member that does not answer in time is unknown
// for the pass (target held) and left unread for a while (stalls.go), so it
// never holds the worker that every FederatedReplicaSet shares.
//
// Triggers from outside the hub watch (member reports, health changes, a new
// leader) go through a workqueue (Triggers) and are never dropped.
package hub
