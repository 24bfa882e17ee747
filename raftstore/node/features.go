package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/replicafed/replicafed/raftstore/fsm"
)

// Features a replica lists in its status answer. A leader uses a feature
// that changes what goes into the log only while every server of the
// configuration lists it: an entry is applied alike by every replica, so
// during a rolling upgrade a replica of an older version never receives
// one it would apply differently (or not at all).
const (
	// FeatureBatch: the FSM applies batch entries (fsm.TypeBatch); the
	// leader then combines commands into one entry.
	FeatureBatch = "batch"
	// FeatureHoldReissued: the FSM applies fsm.Meta.HoldReissued; the
	// expectations store then marks its Reserve and Settle commands.
	FeatureHoldReissued = "hold-reissued"
	// FeatureOwnership: the FSM applies member ownership
	// (fsm.TypeAssignOwners, fsm.TypeRenewOwnership) and owner fences;
	// a node proposes neither before every server lists it.
	FeatureOwnership = "ownership"
	// FeatureGrantOnTargets: the FSM applies fsm.SetTargets.Grant (the
	// first names of a new key are granted in the SetTargets apply); the
	// expectations store then marks the SetTargets it shares.
	FeatureGrantOnTargets = "grant-on-targets"
	// FeatureOwnerRelease: the FSM applies fsm.TypeReleaseOwnership (a
	// previous owner ends a handover wait early); a node proposes it only
	// while every server lists it, else the wait runs out as before.
	FeatureOwnerRelease = "owner-release"
	// FeatureMemberUsage: the FSM applies fsm.TypeSetMemberUsage (a
	// member owner's capacity usage); a node proposes it only while every
	// server lists it (OwnerLease.PublishUsage returns ErrFeatureMissing).
	FeatureMemberUsage = "member-usage"
	// FeatureContact: the replica answers contact rounds (contact.go),
	// which bound the leader's member write lease. It changes nothing in
	// the log; a leader counts an older voter as before (see askContact).
	FeatureContact = "contact"
)

// ownFeatures are the features of this version.
var ownFeatures = []string{FeatureBatch, FeatureHoldReissued, FeatureOwnership, FeatureGrantOnTargets, FeatureOwnerRelease,
	FeatureMemberUsage, FeatureContact}

// ErrFeatureMissing is returned for a command that needs a feature some
// server of the configuration does not list yet.
var ErrFeatureMissing = errors.New("raftstore: a server of the configuration lacks the feature")

// needsFeature refuses cmd when it needs a feature not every server lists:
// an older replica would apply it differently (or not at all).
func (n *Node) needsFeature(cmd fsm.Command) error {
	if fsm.UsesOwnership(cmd) && !n.AllServersHave(FeatureOwnership) {
		return fmt.Errorf("proposing command type %s: %w %q", cmd.Type(), ErrFeatureMissing, FeatureOwnership)
	}
	if _, release := cmd.(*fsm.ReleaseOwnership); release && !n.AllServersHave(FeatureOwnerRelease) {
		return fmt.Errorf("proposing command type %s: %w %q", cmd.Type(), ErrFeatureMissing, FeatureOwnerRelease)
	}
	if _, usage := cmd.(*fsm.SetMemberUsage); usage && !n.AllServersHave(FeatureMemberUsage) {
		return fmt.Errorf("proposing command type %s: %w %q", cmd.Type(), ErrFeatureMissing, FeatureMemberUsage)
	}
	return nil
}

// featureRecheck is how often every node asks the servers of the
// configuration for their features: a server that restarted with a newer
// version is counted with its new answer within this long.
const featureRecheck = 10 * time.Second

// featureRetry is how often every node looks for a server of the
// configuration that has never answered (a cluster forming, a server
// added) and asks it at once.
const featureRetry = time.Second

// featureGate holds what each server of the configuration last said about
// its features. Every node keeps it current, followers too, so a newly
// elected leader knows the answer at once.
type featureGate struct {
	checkMu sync.Mutex // one check at a time

	mu sync.Mutex
	// known is the features each server listed in its last answer. A
	// server that does not answer now (down, partitioned: a leader that
	// just failed) counts with its last answer: a version only moves
	// forward during an upgrade, and after a downgrade the log already
	// holds entries the older version cannot apply alike.
	known map[raft.ServerID][]string
}

// AllServersHave reports whether every server of the latest configuration
// (committed or not) has listed feature, this one included. It never
// waits: a server that has not answered yet (one just added) counts as
// lacking every feature until the next check asks it.
func (n *Node) AllServersHave(feature string) bool {
	if !slices.Contains(n.localFeatures(), feature) {
		return false
	}
	f := n.raft.GetConfiguration()
	if f.Error() != nil || len(f.Configuration().Servers) == 0 {
		return false
	}
	g := &n.features
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range f.Configuration().Servers {
		if s.ID != n.serverID && !slices.Contains(g.known[s.ID], feature) {
			return false
		}
	}
	return true
}

// CombinesCommands reports whether this node, as leader, would now combine
// commands into one entry (every server has said it applies batch
// entries).
func (n *Node) CombinesCommands() bool { return n.AllServersHave(FeatureBatch) }

// localFeatures lists this replica's features, less those a test hid.
func (n *Node) localFeatures() []string {
	out := make([]string, 0, len(ownFeatures))
	for _, f := range ownFeatures {
		if _, hidden := n.hiddenFeatures.Load(f); !hidden {
			out = append(out, f)
		}
	}
	return out
}

// featureLoop keeps the feature gate current until the node stops.
func (n *Node) featureLoop() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-n.stopCh:
			cancel()
		case <-ctx.Done():
		}
	}()
	var last time.Time
	for {
		if last.IsZero() || n.clock.Since(last) >= featureRecheck || n.unknownServer() {
			if n.checkFeatures(ctx) {
				last = n.clock.Now()
			} else {
				last = time.Time{}
			}
		}
		if !n.sleep(ctx, featureRetry) {
			return
		}
	}
}

// unknownServer reports whether a server of the latest configuration has
// not told this node its features yet.
func (n *Node) unknownServer() bool {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return true
	}
	g := &n.features
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range f.Configuration().Servers {
		if _, ok := g.known[s.ID]; !ok && s.ID != n.serverID {
			return true
		}
	}
	return false
}

// checkFeatures asks every other server of the configuration for its
// features and records the answers; servers that left the configuration
// are forgotten. It reports whether every server's features are known
// (now or from an earlier answer).
func (n *Node) checkFeatures(ctx context.Context) bool {
	g := &n.features
	g.checkMu.Lock()
	defer g.checkMu.Unlock()
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	servers := f.Configuration().Servers
	answers := make(map[raft.ServerID][]string, len(servers))
	for _, s := range servers {
		if s.ID == n.serverID {
			continue
		}
		resp, err := n.peerStatus(ctx, string(s.Address), serverName(string(s.ID)))
		switch {
		case err != nil:
			n.log.V(4).Info("A server did not tell its features; its last answer counts", "server", s.ID, "reason", err.Error())
		case resp.Err != "":
			n.log.V(4).Info("A server did not tell its features; its last answer counts", "server", s.ID, "reason", resp.Err)
		default:
			answers[s.ID] = resp.Features
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	known := make(map[raft.ServerID][]string, len(servers))
	complete := len(servers) > 0
	for _, s := range servers {
		if s.ID == n.serverID {
			continue
		}
		fs, ok := answers[s.ID]
		if last, had := g.known[s.ID]; ok && (!had || !slices.Equal(fs, last)) {
			n.log.V(1).Info("A server's features changed", "server", s.ID, "features", fs)
		}
		if !ok {
			fs, ok = g.known[s.ID]
		}
		if ok {
			known[s.ID] = fs
		}
		complete = complete && ok
	}
	g.known = known
	return complete
}
