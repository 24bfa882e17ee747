package fsm

import "slices"

// OnApply registers fn to be called after each command that changes an
// FRS's targets or rollout, the ownership table or a member's usage, has
// been applied with CodeOK (SetTargets, DeleteTargets, SetRollout,
// DeleteRollout, AssignOwners, SetMemberUsage; also inside batch entries, once per command; not for a
// repeated request ID, which changes nothing), and with a nil command
// after a snapshot was restored (anything may have changed: read again).
//
// fn runs on raft's apply path (every replica, leader or follower), after
// the FSM's lock is released, so it may read the FSM; it must not block
// or apply commands: raft applies nothing else meanwhile. Hooks cannot be
// removed.
func (f *FSM) OnApply(fn func(cmd Command)) {
	for {
		old := f.hooks.Load()
		var hs []func(Command)
		if old != nil {
			hs = slices.Clone(*old)
		}
		hs = append(hs, fn)
		if f.hooks.CompareAndSwap(old, &hs) {
			return
		}
	}
}

// notify calls the hooks for cmd when its type is one they hear of (nil:
// a restore).
func (f *FSM) notify(cmd Command) {
	hs := f.hooks.Load()
	if hs == nil || (cmd != nil && !notifies(cmd)) {
		return
	}
	for _, fn := range *hs {
		fn(cmd)
	}
}

// notifies reports whether OnApply hooks hear of cmd.
func notifies(cmd Command) bool {
	switch cmd.(type) {
	case *SetTargets, *DeleteTargets, *SetRollout, *DeleteRollout, *AssignOwners, *SetMemberUsage:
		return true
	}
	return false
}
