// Package fedref names the objects replicafed keeps state about, apart from
// where that state lives: a FederatedReplicaSet in the hub (FRS) and its share
// of one member cluster (MemberObject). The hub, the member engine and worker,
// and the expectations stores all key by these two types.
//
// raftstore/fsm keeps its own wire forms (fsm.Key, fsm.FRSRef): their short
// JSON tags are the persisted raft log and snapshot format and the FSM
// validates them on every apply, so they are converted from these types in
// one place, raftstore/fsm/refs.go.
package fedref

// FRS names a FederatedReplicaSet in the hub.
type FRS struct {
	Namespace, Name string
	// UID, when set, tells a recreated FederatedReplicaSet from an earlier
	// one of the same name.
	UID string
}

// String renders the reference as namespace/name.
func (f FRS) String() string { return f.Namespace + "/" + f.Name }

// MemberObject names one FederatedReplicaSet's share of one member cluster:
// its MemberReplicaSet there and the pods that one owns.
type MemberObject struct {
	// Cluster is the member cluster name.
	Cluster string
	// Namespace and Name are the FederatedReplicaSet's, which are also the
	// namespace and name of its MemberReplicaSet in the member.
	Namespace string
	Name      string
}

// String renders the reference as cluster/namespace/name for logs.
func (o MemberObject) String() string { return o.Cluster + "/" + o.Namespace + "/" + o.Name }
