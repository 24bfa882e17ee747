package fsm

import "strconv"

// typeNames are the names String gives the command types, as metrics label
// them.
var typeNames = map[Type]string{
	TypeReserve:          "reserve",
	TypeSettle:           "settle",
	TypeExpectDeletes:    "expect-deletes",
	TypeReconcile:        "reconcile",
	TypeSetTargets:       "set-targets",
	TypeDeleteTargets:    "delete-targets",
	TypeSetHealth:        "set-health",
	TypePruneMembers:     "prune-members",
	TypeBatch:            "batch",
	TypeSetRollout:       "set-rollout",
	TypeDeleteRollout:    "delete-rollout",
	TypeAssignOwners:     "assign-owners",
	TypeRenewOwnership:   "renew-ownership",
	TypeReleaseOwnership: "release-ownership",
	TypeSetMemberUsage:   "set-member-usage",
}

// String names the type ("reserve", "set-targets", ...); an unknown type
// is "type-N".
func (t Type) String() string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return "type-" + strconv.Itoa(int(t))
}

// TypeOf is the type of an encoded command or batch entry (its first
// byte); an empty one is "type-0".
func TypeOf(encoded []byte) Type {
	if len(encoded) == 0 {
		return 0
	}
	return Type(encoded[0])
}
