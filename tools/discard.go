package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/store"
)

// StateDiscarded: the operator discarded the candidate. It keeps its record and its
// history; it can no longer be validated or registered.
const StateDiscarded = "discarded"

// EventJITDiscarded records a discard in the owning process's log, with who did it and
// why, in the same batch as the state change.
const EventJITDiscarded = "jit_discarded"

// CodeCandidateDiscarded: validate_jit_tool or register_jit_tool on a candidate the
// operator discarded.
const CodeCandidateDiscarded Code = "candidate_discarded"

// ErrCandidateDiscarded matches (errors.Is) the refusal of a discarded candidate.
var ErrCandidateDiscarded = sentinel(CodeCandidateDiscarded)

// discarded is the refusal of any lifecycle step on discarded candidate c.
func discarded(c store.Candidate) *Error {
	return &Error{Layer: layer, Code: CodeCandidateDiscarded, Err: &CandidateRef{ID: c.ID},
		Message: fmt.Sprintf("candidate %s (%s) was discarded by the operator: it cannot be validated or registered; propose a new candidate", c.ID, c.Name)}
}

// Discard is the operator's cleanup of a candidate of process pid that was never
// registered: its state becomes discarded, with a jit_discarded event naming by and
// reason in pid's log, in one batch. From then on validate_jit_tool and
// register_jit_tool refuse it with candidate_discarded, including a validation that
// was running when it was discarded. A registered candidate is refused
// (already_registered: its tool is removed with the kernel's RevokeBinding, and the
// candidate stays as the record of what ran); so is one already discarded
// (candidate_discarded). The process may be live or killed.
func (j *JIT) Discard(ctx context.Context, pid, id, by, reason string) error {
	if by == "" {
		by = "operator"
	}
	if _, err := j.st.Process(pid); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return errorf(CodeNotFound, "no process %q", liberr.Clip(pid, 80))
		}
		return storageErr("read process "+pid, err)
	}
	var refusal *Error
	err := j.st.Update(ctx, func(tx *store.Tx) error {
		c, err := j.candidate(tx, pid, id)
		if err != nil {
			return err
		}
		switch c.State {
		case StateDiscarded:
			refusal = discarded(c)
		case StateRegistered:
			refusal = &Error{Layer: layer, Code: CodeAlreadyRegistered, Err: &CandidateRef{ID: id},
				Message: fmt.Sprintf("candidate %s is registered as %s: a registered candidate is not discarded; revoke its tool instead (libos revoke-tool %s %s)", id, c.Name, pid, c.Name)}
		}
		if refusal != nil {
			return refusal
		}
		from := c.State
		c.State = StateDiscarded
		if err := tx.PutCandidate(c); err != nil {
			return err
		}
		data, _ := json.Marshal(map[string]any{"candidate_id": id, "name": c.Name, "from_state": from, "by": by, "reason": reason})
		_, err = tx.Append(pid, EventJITDiscarded, data)
		return err
	})
	if refusal != nil {
		return refusal
	}
	if te, ok := own(err); ok {
		return te
	}
	if err != nil {
		return storageErr("discard "+id, err)
	}
	return nil
}
