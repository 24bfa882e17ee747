package rollout

import "k8s.io/utils/ptr"

// mb builds a Member for tests: mb("a", 4).share(4).pods("old", 4, 4, 4).
type mb struct{ m Member }

func member(name string, target int32) *mb {
	return &mb{m: Member{Name: name, Target: target, Reachable: true}}
}

func (b *mb) share(n int32) *mb { b.m.UpdateShare = n; return b }

// pods adds a revision with its committed target, pods and Available pods.
func (b *mb) pods(rev string, target, replicas, available int32) *mb {
	b.m.Revisions = append(b.m.Revisions, Pods{Revision: rev, Target: target, Replicas: replicas, Available: available})
	return b
}

func (b *mb) unreachable() *mb { b.m.Reachable = false; return b }

func (b *mb) room(n int32) *mb { b.m.Room = ptr.To(n); return b }

func (b *mb) obj() Member { return b.m }

func members(bs ...*mb) []Member {
	out := make([]Member, len(bs))
	for i, b := range bs {
		out[i] = b.obj()
	}
	return out
}

// targets is the expected result in short form: member -> revision -> target.
type targets map[string]map[string]int32

func targetsOf(o Output) targets {
	out := targets{}
	for _, m := range o.Members {
		out[m.Name] = map[string]int32{}
		for _, t := range m.Targets {
			out[m.Name][t.Revision] = t.Replicas
		}
	}
	return out
}
