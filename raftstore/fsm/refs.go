package fsm

import "github.com/replicafed/replicafed/internal/fedref"

// The only conversions between the in-process references (package fedref)
// and their wire forms here. Key and FRSRef stay separate types because their
// JSON tags are the raft log and snapshot format, which must not change when
// the in-process types do, and because the FSM validates them on every apply.

// KeyOf returns the wire form of o.
func KeyOf(o fedref.MemberObject) Key {
	return Key{Cluster: o.Cluster, Namespace: o.Namespace, Name: o.Name}
}

// Object returns the member object k names.
func (k Key) Object() fedref.MemberObject {
	return fedref.MemberObject{Cluster: k.Cluster, Namespace: k.Namespace, Name: k.Name}
}

// FRSRefOf returns the wire form of f.
func FRSRefOf(f fedref.FRS) FRSRef {
	return FRSRef{Namespace: f.Namespace, Name: f.Name, UID: f.UID}
}
