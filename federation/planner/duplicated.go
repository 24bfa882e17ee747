package planner

// duplicate gives every member that can run replicas the whole of replicas,
// up to its maxReplicas (placement mode Duplicated). Weights, minimums,
// capacity and the strategy do not apply; capacity only shows as
// OverCapacity. A held member keeps at most its previous target, a cordoned
// one at most the pods it runs; failed-over, evicted and excluded members get
// 0. Replicas that no member takes at all are Unplaced.
func (p *planner) duplicate(replicas int64) {
	r := sat32(replicas)
	placed := false
	for i := range p.slots {
		s := &p.slots[i]
		switch s.state {
		case StateActive:
			s.seats = min(r, s.maxReplicas)
		case StateHeld:
			s.seats = min(r, s.maxReplicas, s.previous)
		case StateCordoned:
			s.seats = min(r, s.maxReplicas, s.keepAll)
		default:
			s.seats = 0
		}
		placed = placed || s.seats > 0
	}
	p.remaining = 0
	if !placed {
		p.remaining = replicas
	}
}
