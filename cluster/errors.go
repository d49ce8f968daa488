package cluster

import "github.com/agentlibos/libos/liberr"

const layer = "cluster"

// Error codes of this package.
const (
	// CodeLeaseLost: this host does not hold (or no longer holds) the lease of the
	// process, or another host appended to its log since this host's last write. The
	// write was refused, nothing of it was acknowledged, and this host stops serving
	// the process.
	CodeLeaseLost liberr.Code = "lease_lost"
	// CodeBatchTooLarge: the write batch is over the bound of one message of the
	// stream; it was refused before anything was acknowledged.
	CodeBatchTooLarge liberr.Code = "batch_too_large"
	// CodeCrossProcessBatch: the write batch writes two processes that both exist
	// already. A batch is one message on one process's subject, whose compare-and-set
	// covers that process's log only; the other's could fork, so the batch is refused
	// before anything is acknowledged. (A fork's batch writes one existing process and
	// a new one, whose lease it takes: that one travels.)
	CodeCrossProcessBatch liberr.Code = "cross_process_batch"
	// CodeReplicationFailed: the stream did not acknowledge the batch (unreachable,
	// no quorum, timeout). Nothing was acknowledged to the caller; the batch may still
	// appear in the log later, as a whole, like an unacknowledged write after a crash.
	CodeReplicationFailed liberr.Code = "replication_failed"
	// CodeInvalidBatch: a message on the process subjects is not a batch of the
	// process its subject names (headers missing or malformed, another process's
	// identity, a chain position that is not its subject's previous message, writes
	// the store cannot read, a subject of no process). Every host refuses it alike and
	// logs it: nothing of it is applied, its process's position moves past it, and
	// the applier goes on with the next message.
	CodeInvalidBatch liberr.Code = "invalid_batch"
	// CodeInvalidConfig: the cluster configuration is unusable.
	CodeInvalidConfig liberr.Code = "invalid_config"
)

// Sentinels for errors.Is.
var (
	ErrLeaseLost         = liberr.New(layer, CodeLeaseLost, "lease lost")
	ErrBatchTooLarge     = liberr.New(layer, CodeBatchTooLarge, "batch too large")
	ErrReplicationFailed = liberr.New(layer, CodeReplicationFailed, "replication failed")
	ErrCrossProcessBatch = liberr.New(layer, CodeCrossProcessBatch, "one batch writes two existing processes")
	ErrInvalidConfig     = liberr.New(layer, CodeInvalidConfig, "invalid cluster configuration")
	ErrInvalidBatch      = liberr.New(layer, CodeInvalidBatch, "a message of the stream is not a batch")
)

func errorf(code liberr.Code, cause error, format string, args ...any) *liberr.Error {
	return liberr.Wrap(layer, code, cause, format, args...)
}
