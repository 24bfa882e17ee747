package config

import (
	"testing"

	"github.com/replicafed/replicafed/raftstore/fsm"
)

func TestMaxBurstReplicasMatchesFSM(t *testing.T) {
	if MaxBurstReplicas != fsm.MaxItems {
		t.Fatalf("MaxBurstReplicas %d, FSM per-command limit %d", MaxBurstReplicas, fsm.MaxItems)
	}
}
