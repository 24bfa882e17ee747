// Package raftstore holds replicafed's replicated state: the per-member
// targets of every FederatedReplicaSet, the rollout records of rolling
// ones, member health, and the member engines' expectations, kept by 3 or
// 5 replicas through hashicorp/raft.
//
// Subpackages:
//
//   - fsm: the pure state machine and its command codec (type byte, version
//     byte, JSON body), snapshots and request-ID deduplication.
//   - transport: the raft stream layer (mutual TLS unless explicitly
//     insecure, certificates reloaded when their files change) that
//     advertises a DNS name, multiplexes replicafed's own RPCs and admits
//     raft connections only from authorized peer identities.
//   - node: one raft server: stores (raft-boltdb/v2 behind a 512-entry log
//     cache, file snapshots retaining 2), leadership and the member-write
//     gate, forwarding of follower writes, bootstrap/join, membership admin.
//   - expectations: the controller/expectations.Store the member engine uses.
//   - ownership: which replica owns which member when member workers are
//     sharded (a pure assignment, and the leader's view of owner renewals).
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
//     term. Inside it sits the member-write gate: Node.Enter hands a member
//     writer a permit (a context, the term, and a done func) only while the
//     node leads, the gate is open and a quorum of voters answered within
//     LeaderLeaseTimeout. The context is cancelled at once when raft steps
//     down or quorum contact is lost for a lease. Followers refuse votes
//     until HeartbeatTimeout has passed without the leader, and config
//     refuses LeaderLeaseTimeout >= HeartbeatTimeout.
//  2. Member-write deadline. Every mutating request to a member carries a
//     deadline (controller.memberWriteTimeout, counted when the request
//     leaves the client). Right before a pod write leaves, it needs the
//     write lease (Node.WriteLease) to last until the deadline ends. Every
//     quarter LeaderLeaseTimeout the leader runs VerifyLeader and then a
//     contact round (contact.go): each other voter answers whom it
//     follows, in which term, and how long ago it last heard from it; a
//     quorum of "you, in your term" bounds the lease at the round's start
//     plus a heartbeat timeout, less the oldest contact among them and a
//     margin. VerifyLeader alone is not enough: raft counts answers to
//     AppendEntries sent before it was asked. A leader resumed after
//     SIGSTOP or a long GC finds by its monotonic clock that the lease
//     lapsed, so the creates and deletes it prepared before the pause are
//     not sent. A write still unanswered at its deadline is cut there
//     unless the lease, asked again without waiting (Node.LeaseCovers),
//     covers another deadline from then: it then runs on one deadline at a
//     time, up to controller.memberWriteMaxDuration (writefence.Renewal),
//     so at every instant it is in flight the lease was seen to cover it.
//  3. Handover. A planned handover (Node.TransferLeadership, the admin
//     endpoint) and a graceful stop (Node.StepDown, called by the server on
//     SIGTERM before anything else stops) close the gate first, which
//     cancels every permit's context, wait until every permit is done
//     (bounded by ApplyTimeout), run the BeforeTransfer hooks (the
//     expectations store commits its last observations) and only then call
//     raft's LeadershipTransfer, once. A failed planned transfer reopens the
//     gate; StepDown keeps it closed for good.
//  4. Term fencing. Reserve, ExpectDeletes, Reconcile, PruneMembers and
//     SetRollout (a rolling FederatedReplicaSet's rollout record) carry
//     the term they were decided in, and the FSM refuses them (CodeStale)
//     unless it equals the term of the raft entry that carries them: a
//     command of a deposed or paused leader that reaches the log later, or
//     a follower's (term 0), changes nothing. Settlements that free a name
//     or forget expectations (SettleFailed, the forgets) are fenced the same
//     way, per item; facts (a pod seen, a pod gone, a create held) apply in
//     any term. Only a leader records and commits observations; a
//     follower's or a stopping worker's Store.Delete and Store.DeleteCluster
//     never touch replicated state.
//  5. Reserved names. Before creating pods for a (member, FRS) the leader
//     commits one Reserve entry. The FSM grants at most
//     min(caller target, committed target) - active - outstanding
//     reservations, and returns deterministic names: the prefix plus ten
//     base32 characters of SHA-256(cluster ID, member, namespace, name,
//     sequence). The sequence is global and never reused, the cluster ID is
//     persisted with each replica's data, so a name is never handed out
//     twice for different slots. Pods are created with exactly those names,
//     so a retry, a deposed leader or a new leader repeating a create gets
//     AlreadyExists, which counts as success. First names ride in the
//     targets (grant-on-targets, issue 27): a SetTargets marked Grant
//     (fsm/grant.go), committed in the term it carries, reserves for each
//     member it raises from zero, whose key holds nothing, that has no
//     owner and whose FRS has no rollout record, min(target, Grant) names as a
//     Reserve of that term would (same naming, sequence, TTL), marked
//     Granted. A granted name does not hold up a sync; a Reserve hands it
//     out before any fresh name (as a held name, marked reissued when
//     marked), a Reconcile completes it when its pod exists and holds it
//     otherwise, settlements treat it as reserved. The leader of the
//     granting term, and only it, may hand granted names to a sync
//     without a Reserve entry (expectations.Store claims them while the
//     key holds nothing else, bounded like a Reserve by target - active,
//     and counts them as outstanding until settled); any other case falls
//     back to a Reserve, which reissues them, so a later leader never
//     names a fresh pod beside a granted name. The store marks the
//     SetTargets it shares while every server lists "grant-on-targets"
//     (step 14).
//  6. Names are the fence. A create refused by the API server (a 4xx other
//     than a timeout) releases its name (SettleFailed); a create whose
//     outcome is unknown (timeout, 5xx, cancelled, transport error) holds
//     it (SettleHold): a held reservation does not hold up the key, and the
//     next Reserve hands held names out before new ones. So a request that
//     still lands late (a paused process sending what it built before the
//     pause) collides with the retry of its own name instead of adding a
//     second pod for the slot. A held name's pod can appear at any time,
//     also between the engine's pod list and its next Reserve, which then
//     carries (or follows a flush of) the observation while its Active
//     leaves the pod out: so a seen held name is kept (Seen), and the next
//     Reserve counts it against the target once and then drops it (at worst
//     that sync creates too few, never a fresh name for the slot). A held
//     name once handed out again stays reissued (Reissued): if that create
//     is refused or never sent, SettleFailed holds the name again instead
//     of releasing it, as whoever held it before may still create it. This
//     rule came after the others, so it is chosen by the log entry, not by
//     the replica's version: only a Reserve marked HoldReissued marks the
//     names it reissues, and only a SettleFailed in a marked command holds
//     one again; an unmarked entry applies as before (release). The
//     expectations store marks its commands while every server lists the
//     "hold-reissued" feature (step 14).
//  7. Deletes are committed as a set (ExpectDeletes) before the calls and are
//     sent with a UID precondition.
//  8. Every command carries a request ID. The FSM remembers the last 8,192
//     (at most 8 MiB of results) and answers a repeat with the first
//     result, because an Apply that fails with ErrLeadershipLost may still
//     have committed.
//  9. Observations (pod seen, create failed or unknown, pod gone) settle
//     reservations and deletes. They apply to the store's local view at
//     once and are committed in batches (ObservationBatchSize /
//     ObservationFlushInterval); a Reserve also carries the key's
//     unflushed observations so they are not counted twice. Scaling a member
//     from 0 to 1,000 pods uses about a dozen raft entries. Uncommitted
//     observations are bounded (16 batches, at least 10,000): over the
//     bound they are dropped and Store.Epoch changes, which makes the engine
//     re-verify every key from a quorum list (step 10). Reservations and
//     deletes expire after the expectations TTL (5 minutes), measured on
//     the leader's clock carried in each command: Apply never reads a clock.
//  10. Takeover, per key. Before its first write for a key in a term (and
//     after an epoch change, and when a key stayed unsatisfied for
//     controller's UnsatisfiedRequeue), the member engine lists the key's
//     pods with a quorum read and calls Store.ReconcileReservations in that
//     term: reserved names whose pod exists are complete; earlier-term
//     reservations without their pod are held for the current term (step
//     6), never released, and so are this term's own reservations without
//     a pod (the reconcile runs at the start of a sync, when none of the
//     key's creates is in flight, so such a name lost its settlement, for
//     example a release sent while the write lease had lapsed for a moment;
//     left alone it held the key up until the TTL); pending deletes whose
//     pod is gone, replaced or
//     already terminating are settled; a delete of a pod that still runs,
//     of an earlier term or of this one (a call whose outcome was unknown),
//     is kept for this term and the engine deletes exactly that pod (by UID)
//     before anything else: the deposed leader's call may still land, and
//     choosing other victims would remove both sets (seen as 8 pods below
//     target after a SIGKILL, and 2 after a SIGTERM, during a scale-down). Then it
//     writes nothing until its informer
//     cache has caught up with that list: the pod store's resource version
//     is at least the list's, or every listed pod that counts is cached
//     (with its deletion) and every cached one is listed or newer than the
//     list. A failure retries through the workqueue; the server's takeover
//     also re-enqueues every key holding earlier-term expectations each
//     second until none is left, so members engaged after the election are
//     covered. An unsatisfied key requeues itself well before the TTL.
//     A key for which that reconcile would settle nothing (Store.Quiet:
//     no expectations, or only names granted in this term and handed to
//     no one) needs no list of its own: one quorum read of the whole
//     member per term (a list of one pod's metadata) stands in for it once
//     the pod store's resource version has reached that read's, since no
//     earlier write for the key can still land and the cache then holds
//     every pod written before the term. A burst of new workloads costs a
//     member one read instead of one per MemberReplicaSet.
//  11. Excess. A pod that no reservation accounts for (for example a name
//     released by an older version and created late) is counted like any
//     other and deleted by the normal reconcile, by UID, when the member
//     has more pods than its target.
//  12. Bounded state. Node.PruneMembers (leader only, fenced) drops the
//     health records and expectations of members no longer registered and
//     expired expectations of every key; snapshots larger than
//     fsm.MaxSnapshotBytes are refused on restore; one command carries at
//     most fsm.MaxItems pods, which bounds controller.burstReplicas.
//  13. Group commit. Commands that reach the leader while an entry is being
//     committed (reservations of many keys, targets of many FRS, forwarded
//     writes) go into the next entry together, at most
//     fsm.MaxBatchCommands and 1 MiB (fsm.TypeBatch); a command arriving
//     while nothing is in flight goes alone, at once. The FSM applies a
//     batch command by command as if each had its own entry of that term:
//     fencing compares each command's term with the entry's, request IDs
//     deduplicate each, and one refusal does not touch the others. The
//     leader combines only while every server of the configuration lists
//     the "batch" feature (step 14), so during a rolling upgrade a replica
//     that cannot apply batches never receives one. The expectations
//     store also gathers reservations into rounds: the first of a round
//     waits NodeConfig.ReservationLinger for company (the longer
//     CrowdedReservationLinger while several keys of a member reserve or
//     the SetTargets of several FRS come), the pending observations ride
//     along last, and the hub's SetTargets join the same rounds
//     (expectations.Store.Share), so while pods are being created targets
//     and observations take no entries of their own. After a crowded round
//     the periodic flush leaves the observations to the next round, and
//     for ten crowded lingers it goes at most every two; a periodic flush
//     never queues behind a lingering round (it gives way, see
//     expectations' flushGate), so a reservation that comes meanwhile
//     joins the round instead of waiting for its end. Crowded rounds begin
//     at multiples of the crowded linger since the Unix epoch, and the
//     leader holds such a round (node.OnTick) as it holds background work
//     below, so with sharding the member owners' rounds of one tick share
//     an entry. With sharding
//     every owner sends periodic work of its own, so it is aligned across
//     replicas (node/align.go): observation flushes tick, and periodic
//     owner renewals fall due, at multiples of their interval since the
//     Unix epoch (the wall clock only picks the tick; every wait and
//     every lease is measured on the monotonic clock from the send), and
//     the leader holds an entry that would carry only background commands
//     (renewals, usages, observations) 20 ms for company. A member's
//     capacity usage (OwnerLease.PublishUsage) takes no entry of its own:
//     it rides the owner's next renewal, periodic or riding a round.
//     replicafed_raft_commands_per_entry and
//     replicafed_raft_entries_proposed_total show the effect.
//  14. Features. Every replica applies every entry alike, whatever its
//     version: a change in how an entry applies is chosen by data in the
//     entry (a new type, a mark), which the leader writes only while every
//     server of the latest configuration lists the matching feature in its
//     status answer ("batch", "hold-reissued", "ownership",
//     "grant-on-targets"). Every node, follower or
//     leader, asks the servers every 10 s, and at once (each second) about
//     a server that never answered, so a server just added counts as
//     lacking every feature until it answers and a newly elected leader
//     knows the answer from its time as a follower. A server that does not
//     answer (down, partitioned: the leader that just failed) counts with
//     its last answer, so a failover keeps the features on; versions only
//     move forward during an upgrade. A downgrade is not safe once a
//     feature was used: the log then holds entries the older version
//     cannot apply alike.
//  15. Member ownership (sharding, issue 27; built in raftstore, being
//     wired into the member workers). The leader assigns each member to one
//     replica (fsm.AssignOwners, term-fenced like step 4; planned by
//     ownership.Assign in Node.RunAssigner); every change of owner takes
//     the next epoch of one counter, so epochs never repeat. An owner
//     commits fsm.RenewOwnership for its (member, epoch) pairs every
//     lease/3 (node.OwnerLease, forwarded to the leader like any follower
//     write) and may write to a member only while the committed table
//     gives it the member at that epoch and a renewal it sent less than a
//     lease ago, by its monotonic clock, accepted that epoch
//     (OwnerLease.Permitted); after a move away from a still-renewing
//     owner (marked Handover) it also waits lease plus margin from when it
//     saw the assignment. The leader moves a member away from an owner
//     only after lease plus margin on its own monotonic clock since it saw
//     that owner's latest renewal committed, and a new leader counts from
//     its election (ownership.Watch), so the old owner has stopped before
//     the new one starts. Owner fence: Reserve, ExpectDeletes, Reconcile
//     and the releasing settlements (SettleFailed, the forgets) may carry
//     {Owner, Epoch}; the FSM then refuses them (CodeStale) unless that is
//     the member's committed owner and epoch, instead of step 4's term
//     check, which applies unchanged to commands without a fence; a
//     fenced Reconcile (a new owner's takeover, step 10) holds what
//     earlier epochs reserved or chose to delete, as an unfenced one
//     holds what earlier terms did. Names
//     across a handover: the AssignOwners entry that changes a member's
//     owner holds every outstanding reservation of the member, so the new
//     owner's Reserve reissues exactly those names before any fresh one
//     and the old owner (its fence stale) can release none; a name
//     reissued under a fence is marked Reissued and a fenced SettleFailed
//     always applies step 6's hold-reissued rule, so a name reserved under
//     epoch E never goes to a different pod under a later epoch. The
//     expectations store sends the fence of a sync whose context carries
//     one (controller/expectations.WithFence) in its Reserve (also in
//     shared rounds), ExpectDeletes and Reconcile, remembers per name the
//     fence it was reserved under for its release (SettleFailed) and uses
//     the member's latest fence for a key's forget; a stale fence comes
//     back as fsm.ErrStale, as a stale term does. An owner that is a
//     follower records and commits its own observations (forwarded to the
//     leader), and reads its own writes: a forwarded Apply or ApplyAll
//     returns only once this replica's FSM has applied the leader's applied
//     index of its answer (fsm.WaitApplied), or its next sync would miss
//     the deletes it just recorded as pending and delete again. Replicas that disagree on sharding fail safe: an UNFENCED
//     member write (Reserve, ExpectDeletes, Reconcile, SettleFailed, the
//     forgets) for a member that has a committed owner is refused, so a
//     replica running without sharding never writes where an owner holds
//     the lease; the way back is Node.RunUnsharded, a leader without
//     sharding that drops a member from the table (holding its outstanding
//     reservations, as a move does) once lease plus margin has passed
//     since it saw the owner's latest renewal (counted from its election).
//     An owner asks OwnerLease.PermittedFor(member, deadline) before a
//     write (the lease must hold until the write's deadline), and waits on
//     OwnerLease.Changed to cancel in-flight work when it loses a member;
//     Node.OnApply tells every replica's workers of applied targets,
//     rollouts and owners. No node proposes these commands or a fence
//     before every server lists the "ownership" feature (step 14).
//
// # Authentication
//
// Every connection to the raft port is mutual TLS against the raft CA
// (plain TCP only with raft.tls.insecure, warned about at every start). A
// peer's identity is its certificate: it stands for a raft peer when a first
// DNS label of its common name or DNS names is the peer's name, or when it
// is valid for the DNS name in the peer's address. Raft itself, status and
// apply accept only identities that are servers of the raft configuration or
// configured peers; join accepts a peer only under its own name, and with the
// admin token when one is set (else only configured peers); addvoter and
// remove need a known peer and the token when set; status answers a stranger
// with the token (it is about to join). Strangers' frames are capped at
// 64 KiB, peers' at 16 MiB. The admin endpoint (node.AdminHandler, served
// with Node.AdminTLSConfig) reads with the token or a known peer's
// certificate and mutates with the token or a current voter's certificate.
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
// handler (node.AdminHandler, see Authentication); the leader can remove voters that missed
// heartbeats for DeadServerTimeout while MinVoters remain. Shutdown steps
// down first (step 3).
package raftstore
