package engine

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"time"

	"github.com/agentlibos/libos/store"
)

// The operator API: what the Host of the project's Skills can see and clean up. It reads the
// store through the kernel, for live and killed processes alike.

// Candidates returns the JIT tool candidates pid proposed, each with every
// validation attempt recorded on it (ok, errors, warnings, logs, per-test results,
// timestamps), ordered by ID.
func (k *Kernel) Candidates(pid string) ([]store.Candidate, error) {
	cs, err := k.st.Candidates(pid)
	if err != nil {
		return nil, storageErr("list candidates", err)
	}
	return cs, nil
}

// Bindings returns the committed JIT bindings of pid, ordered by name. A binding
// made by Fork names the process that owns its candidate in CandidatePID.
func (k *Kernel) Bindings(pid string) ([]store.Binding, error) {
	bs, err := k.st.Bindings(pid)
	if err != nil {
		return nil, storageErr("list bindings", err)
	}
	return bs, nil
}

// Events returns up to limit events of pid's log after sequence number after (limit
// <= 0: the store's page size).
func (k *Kernel) Events(pid string, after uint64, limit int) ([]store.Event, error) {
	evs, err := k.st.Events(pid, after, limit)
	if err != nil {
		return nil, storageErr("read events", err)
	}
	return evs, nil
}

// VerifyLog checks the hash chain of pid's event log. A broken chain is a store
// corrupt error whose cause, a *store.VerifyError, names the first bad sequence
// number, wrapped in an *Error with code storage_failed.
func (k *Kernel) VerifyLog(pid string) error {
	if err := k.st.Verify(pid); err != nil {
		return storageErr("event log of "+pid+" does not verify", err)
	}
	return nil
}

// exportedEvent is one line of ExportEvents.
type exportedEvent struct {
	PID      string          `json:"pid"`
	Seq      uint64          `json:"seq"`
	Type     string          `json:"type"`
	Time     time.Time       `json:"time"`
	CallID   string          `json:"call_id,omitempty"`
	Data     json.RawMessage `json:"data"`
	PrevHash string          `json:"prev_hash"`
	Hash     string          `json:"hash"`
}

// ExportEvents writes pid's whole event log to w as JSON lines, one event per line
// in sequence order, with hex hashes, so the chain can be checked outside the
// libOS. It verifies the chain first; a log that does not verify is still written
// (it is the evidence) and the verification error is returned after it.
func (k *Kernel) ExportEvents(pid string, w io.Writer) error {
	verr := k.VerifyLog(pid)
	if errors.Is(verr, store.ErrNotFound) {
		return verr
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	var after uint64
	for {
		evs, err := k.st.Events(pid, after, 0)
		if err != nil {
			return storageErr("export events", err)
		}
		if len(evs) == 0 {
			break
		}
		for _, e := range evs {
			if err := enc.Encode(exportedEvent{PID: e.PID, Seq: e.Seq, Type: e.Type, Time: e.Time.UTC(), CallID: e.CallID,
				Data: e.Data, PrevHash: hex.EncodeToString(e.PrevHash), Hash: hex.EncodeToString(e.Hash)}); err != nil {
				return err
			}
			after = e.Seq
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return verr
}
