package expectations

// RoundsRunning reports whether a round of reservations is lingering or
// being committed. For the flush tests.
func (s *Store) RoundsRunning() bool { return s.roundsRunning() }

// LingerFor is lingerFor, for its table test.
var LingerFor = lingerFor
