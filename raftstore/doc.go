// Package raftstore holds replicafed's replicated state: the per-member
// targets of every FederatedReplicaSet, member health, and the member
// engines' expectations, kept by 3 or 5 replicas through hashicorp/raft.
//
// Subpackages:
//
//   - fsm: the pure state machine and its command codec (type byte, version
//     byte, JSON body), snapshots and request-ID deduplication.
//   - transport: the raft stream layer (TCP, optional mutual TLS) that
//     advertises a DNS name and multiplexes replicafed's own RPCs.
//   - node: one raft server: stores (raft-boltdb/v2 behind a 512-entry log
//     cache, file snapshots retaining 2), leadership and the member-write
//     gate, forwarding of follower writes, bootstrap/join, membership admin.
//   - expectations: the controller/expectations.Store the member engine uses.
//
// # Why raft, and what it does not do by itself
//
// When the leader dies mid-scale, the next leader must know which pod
// creates and deletes were in flight, so that it neither creates them a
// second time nor waits five minutes for expectations to expire. Raft makes
// that state durable and shared. It does not stop a deposed leader from
// writing to member clusters, so member writes are made bounded and
// idempotent as well.
//
// # The protocol
//
//  1. Leadership. A node opens a leader context only after raft elected it
//     and a Barrier applied every earlier entry to its FSM; it records the
//     term. The context is cancelled at once when raft steps down, and also
//     when the node has not heard back from a quorum of voters within
//     LeaderLeaseTimeout (the Gate, see node.Allowed). Followers refuse
//     votes until HeartbeatTimeout has passed without the leader, and
//     LeaderLeaseTimeout < HeartbeatTimeout, so a permitted write of the old
//     leader never overlaps the first write of the next one; in-flight
//     requests are cut by cancelling the context.
//  2. Reserved names. Before creating pods for a (member, FRS) the leader
//     commits one Reserve entry. The FSM grants at most
//     min(caller target, committed target) - active - outstanding
//     reservations, and returns deterministic names: the prefix plus ten
//     base32 characters of SHA-256(cluster ID, member, namespace, name,
//     sequence). The sequence is global and never reused, the cluster ID is
//     persisted with each replica's data, so a name is never handed out
//     twice. Pods are created with exactly those names, so a retry, a
//     deposed leader or a new leader repeating a create gets AlreadyExists,
//     which counts as success. This is the deliberate difference from the
//     upstream ReplicaSet controller, which creates pods with a random
//     generateName suffix and so cannot make a create idempotent.
//  3. Deletes are committed as a set (ExpectDeletes) before the calls and are
//     sent with a UID precondition.
//  4. Every command carries a request ID. The FSM remembers the last 8,192
//     and answers a repeat with the first result, because an Apply that
//     fails with ErrLeadershipLost may still have committed.
//  5. Observations (pod seen, create failed, pod gone) settle reservations
//     and deletes. They apply to the store's local view at once and are
//     committed in batches (ObservationBatchSize / ObservationFlushInterval);
//     a Reserve also carries the key's unflushed observations so they are
//     not counted twice. Scaling a member from 0 to 1,000 pods uses about a
//     dozen raft entries. Reservations and deletes expire after the
//     expectations TTL (5 minutes), measured on the leader's clock carried
//     in each command: Apply never reads a clock.
//  6. A new leader, after its Barrier, lists the pods of every key returned
//     by Store.KeysToReconcile with a quorum read (not from an informer
//     cache) and calls Store.ReconcileReservations: reservations of earlier
//     terms whose pod exists are complete, the others are released, and
//     earlier-term deletes are dropped. The key is then workable without
//     waiting for the TTL. Until then Satisfied reports false for it.
//
// # Membership
//
// A replica's raft server ID is its pod name plus a UUID kept in
// <dataDir>/identity.json together with the cluster ID; a data dir of
// another cluster or replica is refused at start. A replica without state
// asks every peer for its configuration: only if all answer that they have
// none does the first peer bootstrap (alone); the others, and any replica
// missing from the leader's configuration, ask the leader to add them. A
// replica that lost its disk comes back with a new UUID and replaces its
// old entry. Voters are added and removed through the authenticated admin
// handler (node.AdminHandler); the leader can remove voters that missed
// heartbeats for DeadServerTimeout while MinVoters remain. Shutdown
// transfers leadership first.
package raftstore
