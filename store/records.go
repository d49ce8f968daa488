package store

import (
	"encoding/json"
	"time"
)

// Records are stored as JSON. Fields whose meaning belongs to package engine (image,
// limits, snapshot, diagnostics) are kept as raw JSON: the store keeps them whole and
// does not interpret them.

// Process is one agent process.
type Process struct {
	PID          string          `json:"pid"`
	Image        json.RawMessage `json:"image,omitempty"`        // the image the process was created from
	Capabilities []string        `json:"capabilities,omitempty"` // granted capabilities
	Projection   string          `json:"projection,omitempty"`   // "direct" | "multiplexed"
	Limits       json.RawMessage `json:"limits,omitempty"`       // budgets and size limits of the image
	State        string          `json:"state,omitempty"`        // engine-defined lifecycle state
	Parent       string          `json:"parent,omitempty"`       // PID this process was forked from
	Checkpoint   string          `json:"checkpoint,omitempty"`   // checkpoint it was forked from
	Created      time.Time       `json:"created"`
	Updated      time.Time       `json:"updated"`
}

// Checkpoint is a snapshot of a process at one point of its event log.
type Checkpoint struct {
	ID       string          `json:"id"`
	PID      string          `json:"pid"`
	EventSeq uint64          `json:"event_seq"` // last event included in the snapshot
	Snapshot json.RawMessage `json:"snapshot"`  // engine-defined process state
	Created  time.Time       `json:"created"`
}

// Candidate is a proposed JIT tool with every validation attempt made on it.
type Candidate struct {
	ID           string              `json:"id"`
	PID          string              `json:"pid"` // owner; lookups by any other PID fail with not_found
	Name         string              `json:"name"`
	Description  string              `json:"description"`
	SourceCode   string              `json:"source_code"`
	InputSchema  json.RawMessage     `json:"input_schema,omitempty"`
	OutputSchema json.RawMessage     `json:"output_schema,omitempty"`
	Tests        json.RawMessage     `json:"tests,omitempty"`
	State        string              `json:"state"` // proposed | validated | rejected | registered
	Validations  []ValidationAttempt `json:"validations,omitempty"`
	Created      time.Time           `json:"created"`
	Updated      time.Time           `json:"updated"`
}

// ValidationAttempt is the evidence of one validation run.
type ValidationAttempt struct {
	OK       bool            `json:"ok"`
	Errors   json.RawMessage `json:"errors,omitempty"`   // [{code,message,line,column}]
	Warnings json.RawMessage `json:"warnings,omitempty"` // same shape
	Logs     json.RawMessage `json:"logs,omitempty"`
	Tests    json.RawMessage `json:"tests,omitempty"` // per-test results
	Started  time.Time       `json:"started"`
	Finished time.Time       `json:"finished"`
}

// Binding registers a JIT tool name in a process. Names are unique per process.
type Binding struct {
	PID         string `json:"pid"`
	Name        string `json:"name"`
	ToolID      string `json:"tool_id"`
	CandidateID string `json:"candidate_id"`
	// CandidatePID owns the candidate when it is not PID: a binding re-created in a
	// fork of a checkpoint keeps pointing at the original process's candidate, which
	// stays owned by that process. Empty means PID.
	CandidatePID string    `json:"candidate_pid,omitempty"`
	Scope        string    `json:"scope"` // "ephemeral_process"
	Created      time.Time `json:"created"`
}

// ToolResult is the normalised result of one settled tool call.
type ToolResult struct {
	PID        string          `json:"pid"`
	CallID     string          `json:"call_id"`
	Tool       string          `json:"tool"`
	Structured json.RawMessage `json:"structured,omitempty"` // structuredContent
	Text       string          `json:"text"`                 // canonical JSON text content block
	IsError    bool            `json:"is_error,omitempty"`
	Created    time.Time       `json:"created"`
}

// Approval is a request for a human or host decision and its outcome.
type Approval struct {
	ID      string          `json:"id"`
	PID     string          `json:"pid"`
	Class   string          `json:"class"`   // approval class of the route or tool
	Subject string          `json:"subject"` // route or tool name
	Request json.RawMessage `json:"request,omitempty"`
	State   string          `json:"state"` // pending | approved | denied (engine-defined)
	Reason  string          `json:"reason,omitempty"`
	Created time.Time       `json:"created"`
	Decided time.Time       `json:"decided,omitzero"`
}

// Budget is one per-process counter. Limits are the caller's policy and are passed
// to Charge on every use; the store only makes check-and-increment atomic.
type Budget struct {
	PID     string    `json:"pid"`
	Name    string    `json:"name"`
	Used    int64     `json:"used"`
	Updated time.Time `json:"updated"`
}

// KVEntry is one entry of a process's key–value space.
type KVEntry struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
	// Labels are the value's data-flow labels. KVList leaves them empty; a checkpoint
	// reads them with KVLabels so a fork keeps them.
	Labels []string `json:"labels,omitempty"`
}
