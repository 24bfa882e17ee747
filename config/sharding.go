package config

import "time"

// Sharding configures how the replicas share out the member clusters
// (docs/scale-model.md, "member workers sharded across replicas"): each
// member is owned by one replica, recorded in raft, and only its owner
// writes its pods, fenced by the owner's lease instead of the raft
// leadership. Off by default while the sharded path is being built.
type Sharding struct {
	// Enabled shares the members out among the replicas. Every replica
	// must set the same value: a replica running without it cannot write
	// to a member an owner holds (the raft store refuses it), so a mixed
	// configuration stalls those members rather than writing twice.
	Enabled bool `mapstructure:"enabled"`
	// Lease is how long an owner may write to its members after it sent a
	// renewal that committed; owners renew every lease/3.
	Lease time.Duration `mapstructure:"lease"`
	// Margin is the clock-rate allowance the leader adds to Lease before
	// it moves a member away from an owner that stopped renewing.
	Margin time.Duration `mapstructure:"margin"`
	// OwnedPodsOnly makes a replica cache the pods of the members it owns
	// and of no other (phase 2, step 2): memory per replica falls as
	// replicas are added. The leader then plans a member it does not own
	// from the capacity usage the member's owner publishes through raft
	// every UsageInterval. Only with Enabled.
	OwnedPodsOnly bool `mapstructure:"ownedPodsOnly"`
	// UsageInterval is how often an owner publishes the capacity usage of
	// each owned member whose usage changed (one raft command per member).
	UsageInterval time.Duration `mapstructure:"usageInterval"`
}

// minShardingLease keeps renewals, which go through raft, well inside the
// lease on a loaded machine.
const minShardingLease = 3 * time.Second

func init() {
	settings = append(settings,
		setting{key: "sharding.enabled", def: false, usage: "share the member clusters out among the replicas: each member's pods are written by the replica that owns it (experimental; every replica must set the same value)"},
		setting{key: "sharding.lease", def: 5 * time.Second, usage: "how long a member's owner may write after a renewal it sent committed (>= 3s; renewed every lease/3)"},
		setting{key: "sharding.ownedPodsOnly", def: true, usage: "with sharding.enabled, cache the pods of the owned members only; the leader plans the other members from the usage their owners publish"},
		setting{key: "sharding.usageInterval", def: 2 * time.Second, usage: "how often an owner publishes the capacity usage of its members that changed (>= 500ms, <= 1m)"},
		setting{key: "sharding.margin", def: time.Second, usage: "clock-rate allowance the leader adds to sharding.lease before moving a member from an owner that stopped renewing (>= 100ms, <= sharding.lease)"},
	)
}

func (c *Config) validateSharding(p *problems) {
	s := c.Sharding
	p.atLeast("sharding.lease", s.Lease, minShardingLease)
	if s.Lease > 0 && s.Lease <= c.Controller.MemberWriteTimeout {
		p.add("sharding.lease", "must be above controller.memberWriteTimeout (%s), got %q: a write must fit inside the owner's lease", c.Controller.MemberWriteTimeout, s.Lease.String())
	}
	p.atLeast("sharding.margin", s.Margin, 100*time.Millisecond)
	if s.Lease > 0 && s.Margin > s.Lease {
		p.add("sharding.margin", "must be at most sharding.lease (%s), got %q", s.Lease, s.Margin.String())
	}
	p.atLeast("sharding.usageInterval", s.UsageInterval, 500*time.Millisecond)
	if s.UsageInterval > time.Minute {
		p.add("sharding.usageInterval", "must be at most 1m, got %q: the leader plans the members it does not own from this usage", s.UsageInterval.String())
	}
}
