package fsm

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Type identifies the kind of a replicated command. It is the first byte of
// every encoded command; the second byte is the encoding version.
type Type uint8

// Command types. Values are part of the log format: never renumber them.
const (
	TypeReserve       Type = 1
	TypeSettle        Type = 2
	TypeExpectDeletes Type = 3
	TypeReconcile     Type = 4
	TypeSetTargets    Type = 5
	TypeDeleteTargets Type = 6
	TypeSetHealth     Type = 7
	TypePruneMembers  Type = 8
	// 9 is TypeBatch (batch.go).
	TypeSetRollout    Type = 10
	TypeDeleteRollout Type = 11
	// TypeAssignOwners and TypeRenewOwnership are the sharding commands
	// (owners.go); a leader proposes them only while every server lists
	// node.FeatureOwnership.
	TypeAssignOwners   Type = 12
	TypeRenewOwnership Type = 13
	// TypeReleaseOwnership ends a handover early (owners.go); proposed
	// only while every server lists node.FeatureOwnerRelease.
	TypeReleaseOwnership Type = 14
	// TypeSetMemberUsage carries a member owner's capacity usage
	// (usage.go); proposed only while every server lists
	// node.FeatureMemberUsage.
	TypeSetMemberUsage Type = 15
)

// Version1 is the only encoding version so far: the body is JSON.
const Version1 uint8 = 1

// MaxItems is the most pods, names or settlements one command may carry.
// controller.burstReplicas must not exceed it: one sync reserves or deletes
// at most that many pods in one command.
const MaxItems = 10000

// Limits that keep a single command (and so a single Apply) small.
const (
	maxItems    = MaxItems
	maxNameLen  = 253
	maxKeyField = 253
)

// ErrMalformed is returned for bytes that are not a valid command.
var ErrMalformed = errors.New("malformed command")

// Key identifies one FederatedReplicaSet in one member cluster.
type Key struct {
	Cluster   string `json:"c"`
	Namespace string `json:"ns"`
	Name      string `json:"n"`
}

// String renders the key as cluster/namespace/name.
func (k Key) String() string { return k.Cluster + "/" + k.Namespace + "/" + k.Name }

func (k Key) validate() error {
	if k.Cluster == "" || k.Namespace == "" || k.Name == "" {
		return fmt.Errorf("key %q: cluster, namespace and name are required", k.String())
	}
	if len(k.Cluster) > maxKeyField || len(k.Namespace) > maxKeyField || len(k.Name) > maxKeyField ||
		strings.Contains(k.Cluster, "/") || strings.Contains(k.Namespace, "/") || strings.Contains(k.Name, "/") {
		return fmt.Errorf("key %q: invalid field", k.String())
	}
	return nil
}

// FRSRef identifies a FederatedReplicaSet in the hub.
type FRSRef struct {
	Namespace string `json:"ns"`
	Name      string `json:"n"`
	UID       string `json:"uid,omitempty"`
}

// String renders the reference as namespace/name.
func (f FRSRef) String() string { return f.Namespace + "/" + f.Name }

// Meta is carried by every command.
type Meta struct {
	// ReqID deduplicates retried commands; empty disables deduplication.
	ReqID string `json:"id,omitempty"`
	// Now is the proposer's clock in Unix nanoseconds. Apply uses it instead
	// of reading a clock, so every replica computes the same state.
	Now int64 `json:"now"`
	// Term is the raft term the proposer believed it led in. Commands that
	// change expectations are refused unless it equals the term of the raft
	// entry that carries them (see the package doc, "fencing").
	Term uint64 `json:"term,omitempty"`
	// HoldReissued chooses the rule for reissued names (see
	// Reservation.Reissued): a Reserve carrying it marks the held names it
	// hands out again, and a SettleFailed it carries (in a Settle or in
	// Reserve.Settle) holds such a name again instead of releasing it.
	// Without it both apply as they did before the rule existed. An older
	// replica ignores the field, so a leader sets it only while every server
	// says it applies the rule (node.FeatureHoldReissued): replicas of
	// either version then apply every entry alike.
	HoldReissued bool `json:"holdReissued,omitempty"`
}

// Command is one decoded replicated command.
type Command interface {
	// Type is the command's type byte.
	Type() Type
	// Header returns the common fields.
	Header() Meta
	validate() error
}

// Reserve asks for up to Count deterministic pod names for Key.
type Reserve struct {
	Meta
	Key Key `json:"key"`
	// Target is the caller's view of the member target; the FSM uses the
	// smaller of this and the committed target.
	Target int32 `json:"target"`
	// Active is the number of active pods the caller counts in the member.
	Active int `json:"active"`
	// Count is how many names are wanted.
	Count  int    `json:"count"`
	Prefix string `json:"prefix"`
	// TTL is how long a reservation stays outstanding, in nanoseconds.
	TTL int64 `json:"ttl"`
	// Settle carries observations for Key that are applied before the
	// reservation is computed, so they are not counted twice.
	Settle []Settlement `json:"settle,omitempty"`
	// Fence, when set, replaces the term check: the command applies only
	// while Fence is the member's committed owner and epoch (owners.go).
	Fence *OwnerFence `json:"fence,omitempty"`
}

// SettleKind is what a Settlement does.
type SettleKind uint8

// Settlement kinds.
const (
	SettleCreated       SettleKind = 1 // the reserved pod was seen
	SettleFailed        SettleKind = 2 // the reserved pod will not be created
	SettleDeleted       SettleKind = 3 // the pod expected to be deleted is gone (or the delete failed)
	SettleForgetKey     SettleKind = 4 // drop everything for Key recorded before BeforeSeq
	SettleForgetCluster SettleKind = 5 // drop everything for Key.Cluster recorded before BeforeSeq
	// SettleHold marks a reservation whose create may or may not have
	// reached the member (timeout, cancelled call): the name stays reserved
	// and the next Reserve hands it out again instead of a new name.
	SettleHold SettleKind = 6
)

// leaderOnly reports whether a settlement kind releases or forgets
// reservations: it then applies only in the term it was decided in.
func (k SettleKind) leaderOnly() bool {
	return k == SettleFailed || k == SettleForgetKey || k == SettleForgetCluster
}

// Settlement is one observation or forget.
type Settlement struct {
	Kind SettleKind `json:"k"`
	Key  Key        `json:"key"`
	Name string     `json:"n,omitempty"`
	// BeforeSeq bounds forgets so that a late forget never removes a
	// reservation made after the caller asked to forget.
	BeforeSeq uint64 `json:"before,omitempty"`
	// Term is the leader term the settlement was decided in. SettleFailed
	// and the forgets apply only when it equals the term of the raft entry
	// carrying them; the other kinds are facts and apply in any term.
	Term uint64 `json:"term,omitempty"`
	// Fence, when set, replaces the term check of SettleFailed and the
	// forgets: they apply only while Fence is the committed owner and
	// epoch of Key.Cluster (owners.go).
	Fence *OwnerFence `json:"fence,omitempty"`
}

// Validate reports whether the settlement can be encoded.
func (s Settlement) Validate() error {
	switch s.Kind {
	case SettleCreated, SettleFailed, SettleDeleted, SettleHold:
		if err := s.Key.validate(); err != nil {
			return err
		}
		if s.Name == "" || len(s.Name) > maxNameLen {
			return fmt.Errorf("settlement for %s: invalid pod name", s.Key)
		}
	case SettleForgetKey:
		if err := s.Key.validate(); err != nil {
			return err
		}
	case SettleForgetCluster:
		if s.Key.Cluster == "" {
			return errors.New("forget cluster: cluster is required")
		}
	default:
		return fmt.Errorf("unknown settlement kind %d", s.Kind)
	}
	return s.Fence.validate()
}

// Settle applies a batch of observations.
type Settle struct {
	Meta
	Items []Settlement `json:"items"`
}

// PodRef is a pod name with its UID.
type PodRef struct {
	Name string `json:"n"`
	UID  string `json:"uid"`
}

// ExpectDeletes records pods about to be deleted, replacing any earlier set for Key.
type ExpectDeletes struct {
	Meta
	Key  Key      `json:"key"`
	Pods []PodRef `json:"pods"`
	TTL  int64    `json:"ttl"`
	// Fence, when set, replaces the term check (see Reserve.Fence).
	Fence *OwnerFence `json:"fence,omitempty"`
}

// Reconcile settles the expectations of Key against a fresh quorum list of
// the member's pods: a reservation whose pod exists is complete; one of an
// earlier term without its pod is held for the current term (its name is
// handed out again, never a new one), and with HoldOwn one of the current
// term too; a pending delete whose pod is gone,
// replaced or already terminating is settled. With HoldDeletes, a pending
// delete of an earlier term whose pod still runs is held for the current
// term (the new leader deletes exactly that pod, since the deposed leader's
// call may still land); without it (entries of older versions) it is dropped.
type Reconcile struct {
	Meta
	Key Key `json:"key"`
	// Live maps the names of the pods that exist to their UIDs.
	Live map[string]string `json:"live"`
	// Deleting names the listed pods that already carry a deletion timestamp.
	Deleting []string `json:"deleting,omitempty"`
	// HoldDeletes keeps earlier-term deletes of running pods for this term.
	HoldDeletes bool `json:"holdDel,omitempty"`
	// HoldOwn also holds this term's reservations without a pod (the
	// proposer has no create of the key in flight).
	HoldOwn bool `json:"holdOwn,omitempty"`
	// TTL renews held reservations and deletes, in nanoseconds; 0 keeps
	// their expiry.
	TTL int64 `json:"ttl,omitempty"`
	// Fence, when set, replaces the term check (see Reserve.Fence), and
	// "earlier" means reserved or expected under an older owner epoch
	// instead of an older term: a new owner's takeover reconcile.
	Fence *OwnerFence `json:"fence,omitempty"`
}

// PruneMembers drops the health records and expectations of every member
// cluster not in Members, and expired expectations of every key.
type PruneMembers struct {
	Meta
	Members []string `json:"members"`
}

// SetTargets commits the per-member targets of one FederatedReplicaSet.
type SetTargets struct {
	Meta
	FRS        FRSRef           `json:"frs"`
	Generation int64            `json:"gen"`
	Targets    map[string]int32 `json:"targets"`
	// Grant, when positive, marks the command for the grant-on-targets
	// rule (grant.go): a member whose target rises from zero (or appears)
	// and whose key holds no expectations gets its first min(target,
	// Grant) pod names reserved in the same apply, as granted names, so
	// its first sync creates pods without a Reserve entry. 0 applies the
	// command as versions without the rule do; a leader sets it only
	// while every server lists node.FeatureGrantOnTargets.
	Grant int32 `json:"grant,omitempty"`
	// GrantTTL is the granted names' TTL in nanoseconds (Reserve.TTL).
	GrantTTL int64 `json:"grantTTL,omitempty"`
}

// DeleteTargets removes the targets of one FederatedReplicaSet.
type DeleteTargets struct {
	Meta
	FRS FRSRef `json:"frs"`
}

// MaxRolloutBytes bounds one rollout record (its live revisions' pod
// templates make most of it).
const MaxRolloutBytes = 1 << 20

// SetRollout records the rollout state of one FederatedReplicaSet: an
// opaque JSON document (federation/rollout.Record), so the FSM does not
// depend on the rollout's types and every replica stores the same bytes.
type SetRollout struct {
	Meta
	FRS    FRSRef          `json:"frs"`
	Record json.RawMessage `json:"rec"`
}

// DeleteRollout removes the rollout state of one FederatedReplicaSet.
type DeleteRollout struct {
	Meta
	FRS FRSRef `json:"frs"`
}

// SetHealth records a member cluster's health.
type SetHealth struct {
	Meta
	Cluster string `json:"cluster"`
	Healthy bool   `json:"healthy"`
	// Since is Unix nanoseconds.
	Since int64 `json:"since"`
}

// Type implements Command.
func (*Reserve) Type() Type { return TypeReserve }

// Type implements Command.
func (*Settle) Type() Type { return TypeSettle }

// Type implements Command.
func (*ExpectDeletes) Type() Type { return TypeExpectDeletes }

// Type implements Command.
func (*Reconcile) Type() Type { return TypeReconcile }

// Type implements Command.
func (*SetTargets) Type() Type { return TypeSetTargets }

// Type implements Command.
func (*DeleteTargets) Type() Type { return TypeDeleteTargets }

// Type implements Command.
func (*SetRollout) Type() Type { return TypeSetRollout }

// Type implements Command.
func (*DeleteRollout) Type() Type { return TypeDeleteRollout }

// Type implements Command.
func (*SetHealth) Type() Type { return TypeSetHealth }

// Type implements Command.
func (*PruneMembers) Type() Type { return TypePruneMembers }

// Header implements Command.
func (m Meta) Header() Meta { return m }

func (c *Reserve) validate() error {
	if err := c.Key.validate(); err != nil {
		return err
	}
	if c.Count <= 0 || c.Count > maxItems || c.Active < 0 || c.Target < 0 || c.TTL <= 0 || len(c.Prefix) > maxNameLen {
		return fmt.Errorf("reserve for %s: invalid count, active, target, ttl or prefix", c.Key)
	}
	if err := c.Fence.validate(); err != nil {
		return fmt.Errorf("reserve for %s: %w", c.Key, err)
	}
	return validateSettlements(c.Settle, "reserve: too many settlements")
}

func (c *Settle) validate() error { return validateSettlements(c.Items, "settle: too many items") }

// validateSettlements checks a batch of settlements; tooMany is the error
// for a batch longer than maxItems.
func validateSettlements(items []Settlement, tooMany string) error {
	if len(items) > maxItems {
		return errors.New(tooMany)
	}
	for _, s := range items {
		if err := s.Validate(); err != nil {
			return err
		}
	}
	return nil
}

func (c *ExpectDeletes) validate() error {
	if err := c.Key.validate(); err != nil {
		return err
	}
	if len(c.Pods) > maxItems || c.TTL <= 0 {
		return fmt.Errorf("expect deletes for %s: too many pods or invalid ttl", c.Key)
	}
	if err := c.Fence.validate(); err != nil {
		return fmt.Errorf("expect deletes for %s: %w", c.Key, err)
	}
	for _, p := range c.Pods {
		if p.Name == "" || len(p.Name) > maxNameLen {
			return fmt.Errorf("expect deletes for %s: invalid pod name", c.Key)
		}
	}
	return nil
}

func (c *Reconcile) validate() error {
	if err := c.Key.validate(); err != nil {
		return err
	}
	if c.Term == 0 && c.Fence == nil {
		return errors.New("reconcile: term or owner fence is required")
	}
	if err := c.Fence.validate(); err != nil {
		return fmt.Errorf("reconcile for %s: %w", c.Key, err)
	}
	if len(c.Deleting) > len(c.Live) {
		return fmt.Errorf("reconcile for %s: more deleting pods than listed ones", c.Key)
	}
	return nil
}

func (f FRSRef) validate() error {
	if f.Namespace == "" || f.Name == "" {
		return errors.New("federated replica set namespace and name are required")
	}
	return nil
}

func (c *SetTargets) validate() error {
	if err := c.FRS.validate(); err != nil {
		return err
	}
	if len(c.Targets) > maxItems {
		return errors.New("set targets: too many members")
	}
	if c.Grant < 0 || c.Grant > maxItems || (c.Grant > 0 && c.GrantTTL <= 0) || c.GrantTTL < 0 {
		return fmt.Errorf("set targets for %s: invalid grant %d or grant ttl %d", c.FRS, c.Grant, c.GrantTTL)
	}
	for m, t := range c.Targets {
		if m == "" || t < 0 {
			return fmt.Errorf("set targets for %s: invalid target %d for member %q", c.FRS, t, m)
		}
	}
	return nil
}

func (c *DeleteTargets) validate() error { return c.FRS.validate() }

func (c *SetRollout) validate() error {
	if err := c.FRS.validate(); err != nil {
		return err
	}
	if len(c.Record) == 0 || len(c.Record) > MaxRolloutBytes || !json.Valid(c.Record) {
		return fmt.Errorf("set rollout for %s: record must be a JSON document of at most %d bytes", c.FRS, MaxRolloutBytes)
	}
	return nil
}

func (c *DeleteRollout) validate() error { return c.FRS.validate() }

func (c *PruneMembers) validate() error {
	if len(c.Members) > maxItems {
		return errors.New("prune members: too many members")
	}
	if c.Term == 0 {
		return errors.New("prune members: term is required")
	}
	return nil
}

func (c *SetHealth) validate() error {
	if c.Cluster == "" {
		return errors.New("set health: cluster is required")
	}
	return nil
}

// Encode renders cmd as type byte, version byte and JSON body.
func Encode(cmd Command) ([]byte, error) {
	if err := cmd.validate(); err != nil {
		return nil, fmt.Errorf("encoding command type %d: %w", cmd.Type(), err)
	}
	out, err := frame(cmd.Type(), cmd)
	if err != nil {
		return nil, fmt.Errorf("encoding command type %d: %w", cmd.Type(), err)
	}
	return out, nil
}

// frame renders one log entry: the type byte, the version byte, then body
// as JSON.
func frame(t Type, body any) ([]byte, error) {
	js, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(js)+2)
	out = append(out, byte(t), Version1)
	return append(out, js...), nil
}

// Decode parses bytes produced by Encode. Unknown types or versions and
// malformed or invalid bodies return an error wrapping ErrMalformed.
func Decode(b []byte) (Command, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: %d bytes", ErrMalformed, len(b))
	}
	if b[1] != Version1 {
		return nil, fmt.Errorf("%w: type %d has unknown version %d", ErrMalformed, b[0], b[1])
	}
	var cmd Command
	switch Type(b[0]) {
	case TypeReserve:
		cmd = &Reserve{}
	case TypeSettle:
		cmd = &Settle{}
	case TypeExpectDeletes:
		cmd = &ExpectDeletes{}
	case TypeReconcile:
		cmd = &Reconcile{}
	case TypeSetTargets:
		cmd = &SetTargets{}
	case TypeDeleteTargets:
		cmd = &DeleteTargets{}
	case TypeSetRollout:
		cmd = &SetRollout{}
	case TypeDeleteRollout:
		cmd = &DeleteRollout{}
	case TypeSetHealth:
		cmd = &SetHealth{}
	case TypePruneMembers:
		cmd = &PruneMembers{}
	case TypeAssignOwners:
		cmd = &AssignOwners{}
	case TypeRenewOwnership:
		cmd = &RenewOwnership{}
	case TypeReleaseOwnership:
		cmd = &ReleaseOwnership{}
	case TypeSetMemberUsage:
		cmd = &SetMemberUsage{}
	default:
		return nil, fmt.Errorf("%w: unknown type %d", ErrMalformed, b[0])
	}
	if err := json.Unmarshal(b[2:], cmd); err != nil {
		return nil, fmt.Errorf("%w: type %d: %v", ErrMalformed, b[0], err)
	}
	if err := cmd.validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return cmd, nil
}
