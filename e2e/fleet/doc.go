// Package fleet starts a whole replicafed installation for end-to-end tests
// and the demo: a hub and member clusters (local control planes from
// internal/test/testcluster, or kind clusters when REPLICAFED_E2E_PROVIDER=kind),
// the replicafed CRDs and admission policy in the hub, and replicafed replicas
// as separate processes forming one raft cluster on loopback.
//
// Replicas are real processes of the replicafed binary so that tests can kill
// one with SIGKILL, exactly like a crashed pod, and restart it from its data
// directory.
package fleet
