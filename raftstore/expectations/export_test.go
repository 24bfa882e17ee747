package expectations

import "github.com/replicafed/replicafed/raftstore/fsm"

// RoundsRunning reports whether a round of reservations is lingering or
// being committed. For the flush tests.
func (s *Store) RoundsRunning() bool { return s.roundsRunning() }

// LingerFor is lingerFor, for its table test.
var LingerFor = lingerFor

// CrowdedRound is crowdedRound over a round of these commands, for its
// table test.
func CrowdedRound(cmds ...fsm.Command) bool {
	round := make([]*reserveCall, 0, len(cmds))
	for _, c := range cmds {
		round = append(round, &reserveCall{cmd: c})
	}
	return crowdedRound(round)
}
