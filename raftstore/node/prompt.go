package node

import (
	"slices"
	"time"

	"github.com/hashicorp/raft"
)

// A follower of hashicorp/raft checks its leader's last contact only when
// its heartbeat timer fires, HeartbeatTimeout to twice that after the
// previous check. After a leader dies, the first check that finds the
// contact HeartbeatTimeout old therefore comes one to three timeouts after
// the last contact (a median of about 2 s at the 1 s default, measured in
// the chaos rounds). electionPrompter makes the check at once when the
// contact is HeartbeatTimeout old (plus a stagger): raft's ReloadConfig
// with a shorter heartbeat timeout wakes the follower loop, which then
// applies the very condition its own timer would. The earliest election
// raft allows is unchanged, so is everything the fence counts on (a
// follower forgets its leader no earlier than HeartbeatTimeout after the
// last contact, which bounds the write lease: contact.go); only the wait
// for a timer that happens to fire late is gone.
//
// The stagger: a follower that still knows a leader refuses pre-votes, so
// of followers that started at once none would get one and all would wait
// an election timeout, and two that started within a round trip of each
// other would grant each other's pre-votes and split the vote. Each
// follower therefore waits promptStagger more per follower ranked before
// it (by server ID, the old leader left out); the later ones find the
// earlier ones without a leader and win at once.

// promptStagger is the extra wait per rank: well above the spread of the
// followers' last contacts (heartbeats go out every tenth of the timeout)
// plus a round trip.
func promptStagger(heartbeat time.Duration) time.Duration { return heartbeat / 4 }

// followerRank is how many voters other than leader and self sort before
// self: the order in which the followers prompt their checks.
func followerRank(self, leader raft.ServerID, voters []raft.ServerID) int {
	rank := 0
	for _, v := range voters {
		if v != self && v != leader && v < self {
			rank++
		}
	}
	return rank
}

// promptDue reports whether a follower whose leader was last heard at
// lastContact should check now: the contact is heartbeat plus its rank's
// stagger old.
func promptDue(now, lastContact time.Time, heartbeat time.Duration, rank int) bool {
	if lastContact.IsZero() {
		return false
	}
	return now.Sub(lastContact) >= heartbeat+time.Duration(rank)*promptStagger(heartbeat)
}

// electionPrompter runs for the node's life and prompts the follower
// loop's check once per lost contact (see above).
func (n *Node) electionPrompter() {
	heartbeat := n.cfg.HeartbeatTimeout
	t := time.NewTicker(max(heartbeat/20, 5*time.Millisecond))
	defer t.Stop()
	var prompted time.Time // the last contact a check was prompted for
	for {
		select {
		case <-n.stopCh:
			return
		case <-t.C:
		}
		if n.raft.State() != raft.Follower {
			continue
		}
		_, leader := n.raft.LeaderWithID()
		last := n.raft.LastContact()
		// The wall clock, not n.clock (which tests fake): raft stamps
		// LastContact with it.
		now := time.Now()
		// No leader known: raft's own check already ran (and cleared it),
		// or the node has not heard from one yet.
		if leader == "" || last.Equal(prompted) || !promptDue(now, last, heartbeat, 0) {
			continue
		}
		if !promptDue(now, last, heartbeat, followerRank(n.serverID, leader, n.voterIDs())) {
			continue
		}
		prompted = last
		n.promptCheck(leader, last)
	}
}

// voterIDs are the voters of the latest configuration.
func (n *Node) voterIDs() []raft.ServerID {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	var ids []raft.ServerID
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			ids = append(ids, s.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

// promptCheck wakes raft's follower loop for an immediate heartbeat check:
// ReloadConfig notifies the follower loop when the heartbeat timeout
// shrinks, so shrink it to just under the configured one, then set the
// configured one again (a growing timeout notifies nobody). Both are the
// configured timeout as far as the check goes: the contact is older.
func (n *Node) promptCheck(leader raft.ServerID, last time.Time) {
	rc := n.raft.ReloadableConfig()
	rc.HeartbeatTimeout = n.cfg.HeartbeatTimeout - time.Nanosecond
	if err := n.raft.ReloadConfig(rc); err != nil {
		n.log.Error(err, "Prompting raft's heartbeat check")
		return
	}
	rc.HeartbeatTimeout = n.cfg.HeartbeatTimeout
	if err := n.raft.ReloadConfig(rc); err != nil {
		n.log.Error(err, "Restoring raft's heartbeat timeout after prompting its check", "heartbeatTimeout", rc.HeartbeatTimeout)
	}
	n.prompts.Add(1)
	n.log.V(1).Info("Leader silent for a heartbeat timeout: prompted raft's check", "leader", string(leader), "lastContact", last)
}
