// Package rollout holds the pure core of a FederatedReplicaSet's rolling
// update (spec.updateStrategy type Rolling): no clients, no clock.
//
//   - Revisions: TemplateHash and Identify name a template's revision (a
//     hash of the template with a collision count, as Deployments do) and
//     find it again after a restart by comparing templates.
//
//   - Stages: Resolve turns the API's stages into member sets, and Shares
//     says how many of each member's planned target the current stage puts
//     on the new revision (all, a canary part, or none yet).
//
//   - Split: Step takes the fleet-wide target, each member's planned target
//     (from federation/planner), the pods each member runs per revision and
//     the budget, and returns per member and per revision targets for one
//     step that keep the budget (see Step for the invariants).
//
//   - Progress: Advance is the rollout's state machine (stages, bake time,
//     manual promotion, progress deadline, onFailure); time and the health
//     verdict are inputs.
//
//   - Record and Pass: what the raft store keeps per object, and one hub
//     pass over it (identify, start, split, advance, retire revisions).
//
// The hub's reconciler (federation/hub/rollout.go) calls Pass; the kubectl
// plugin does not exist yet. docs/rollout.md says what is wired.
package rollout
