package dependencies

import (
	"cmp"
	"slices"
)

// Want is one FederatedReplicaSet's part in a namespace's propagation.
type Want struct {
	// FRS is the FederatedReplicaSet's name.
	FRS string
	// Refs are the objects its template references (Of).
	Refs []Ref
	// Members are the members with a non-zero target.
	Members []string
	// Release is set while it is being deleted with orphan propagation: its
	// pods stay, so copies only it kept are left in place, unmarked,
	// instead of deleted.
	Release bool
}

// Desired returns, per member, the objects to keep there and for which
// FederatedReplicaSets (sorted): every referenced object, optional or not,
// in every member with replicas. Wants with Release set contribute nothing.
func Desired(wants []Want) map[string]map[Key][]string {
	out := map[string]map[Key][]string{}
	for _, w := range wants {
		if w.Release {
			continue
		}
		for _, m := range w.Members {
			if out[m] == nil {
				out[m] = map[Key][]string{}
			}
			for _, r := range w.Refs {
				k := r.Key()
				out[m][k] = append(out[m][k], w.FRS)
			}
		}
	}
	for _, objs := range out {
		for k, owners := range objs {
			objs[k] = normalize(owners)
		}
	}
	return out
}

// Action is what to do with one object in one member.
type Action int

// Actions.
const (
	// Keep: the object is a copy that stays (its content is checked with Merge).
	Keep Action = iota
	// Create: no object of that name exists; write a copy.
	Create
	// Conflict: an object of that name exists that replicafed did not
	// create; it is never changed.
	Conflict
	// Delete: a copy nobody needs any more.
	Delete
	// ReleaseCopy: a copy nobody needs any more whose last owners are being
	// deleted with orphan propagation: remove the marks, keep the object.
	ReleaseCopy
	// Ignore: an object replicafed neither needs nor made.
	Ignore
)

// Existing is what a member holds under one name.
type Existing struct {
	// Copy is true when the object carries the copy mark (IsCopy).
	Copy bool
	// Owners are the names in its AnnotationDependencyOf (Owners).
	Owners []string
}

// Step is one decision of Decide.
type Step struct {
	Key    Key
	Action Action
	// Owners is the owner list the copy must carry (Keep and Create).
	Owners []string
}

// Decide compares what one member should hold (desired, from Desired) with
// what it holds (existing: every object of a desired name, and every copy
// in the namespace; nil for a name that does not exist) and returns one
// step per name, sorted by kind and name. released names the
// FederatedReplicaSets being deleted with orphan propagation.
func Decide(desired map[Key][]string, existing map[Key]*Existing, released map[string]bool) []Step {
	var steps []Step
	for k, owners := range desired {
		switch ex := existing[k]; {
		case ex == nil:
			steps = append(steps, Step{Key: k, Action: Create, Owners: owners})
		case !ex.Copy:
			steps = append(steps, Step{Key: k, Action: Conflict})
		default:
			steps = append(steps, Step{Key: k, Action: Keep, Owners: owners})
		}
	}
	for k, ex := range existing {
		if _, ok := desired[k]; ok || ex == nil {
			continue
		}
		if !ex.Copy {
			steps = append(steps, Step{Key: k, Action: Ignore})
			continue
		}
		act := Delete
		for _, o := range ex.Owners {
			if released[o] {
				act = ReleaseCopy
			}
		}
		steps = append(steps, Step{Key: k, Action: act})
	}
	slices.SortFunc(steps, func(a, b Step) int {
		return cmp.Or(cmp.Compare(a.Key.Kind, b.Key.Kind), cmp.Compare(a.Key.Name, b.Key.Name))
	})
	return steps
}
