// Package hub reconciles FederatedReplicaSets in the hub cluster. On the raft
// leader only, it plans each FederatedReplicaSet's per-member targets, commits
// them through raft, pokes the member workers, and writes the status the
// members report back. It also runs the deletion protocol behind the
// replicafed.io/cascade finalizer.
//
// Followers run the same informers but never write: every reconcile first asks
// the leader gate, and a new leader re-queues every FederatedReplicaSet.
package hub
