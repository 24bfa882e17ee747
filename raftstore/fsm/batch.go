package fsm

import (
	"encoding/json"
	"fmt"
)

// TypeBatch marks a raft entry that carries several encoded commands. It is
// not a Command: it has no meta of its own, and each command inside keeps its
// own request ID and proposer term. A replica that does not know this type
// cannot apply such entries, so every replica must run a version that does
// before a leader proposes one; the leader checks (raftstore/doc.go, item 13).
const TypeBatch Type = 9

// MaxBatchCommands is the most commands one batch entry may carry.
const MaxBatchCommands = 256

type batchBody struct {
	Cmds [][]byte `json:"cmds"`
}

// EncodeBatch renders already encoded commands as one batch entry. Batches
// do not nest.
func EncodeBatch(cmds [][]byte) ([]byte, error) {
	if err := validateBatch(cmds); err != nil {
		return nil, fmt.Errorf("encoding batch: %w", err)
	}
	out, err := frame(TypeBatch, batchBody{Cmds: cmds})
	if err != nil {
		return nil, fmt.Errorf("encoding batch: %w", err)
	}
	return out, nil
}

func validateBatch(cmds [][]byte) error {
	if len(cmds) == 0 || len(cmds) > MaxBatchCommands {
		return fmt.Errorf("%d commands, want 1 to %d", len(cmds), MaxBatchCommands)
	}
	for i, c := range cmds {
		if len(c) < 2 || Type(c[0]) == TypeBatch {
			return fmt.Errorf("command %d is not a single encoded command", i)
		}
	}
	return nil
}

func isBatch(b []byte) bool { return len(b) >= 1 && Type(b[0]) == TypeBatch }

// BatchResult is what Apply returns for a batch entry: one result per
// command, in order.
type BatchResult struct {
	Results []Result
}

// applyBatch applies each command of a batch entry in order, as if each had
// its own entry of the same term: fencing, deduplication and validation are
// per command, and one command's refusal does not affect the others. A batch
// that cannot be decoded changes nothing.
func (f *FSM) applyBatch(b []byte, logTerm, index uint64) *BatchResult {
	if len(b) < 2 || b[1] != Version1 {
		return &BatchResult{}
	}
	var body batchBody
	if err := json.Unmarshal(b[2:], &body); err != nil || validateBatch(body.Cmds) != nil {
		return &BatchResult{}
	}
	out := &BatchResult{Results: make([]Result, len(body.Cmds))}
	for i, c := range body.Cmds {
		out.Results[i] = f.applyEntry(c, logTerm, index)
	}
	return out
}
