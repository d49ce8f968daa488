package liberr

// Codes that more than one layer emits, declared once. A package names them through its
// own constants (engine.CodeLimitExceeded = liberr.CodeLimitExceeded), so that a code has
// one spelling in the module; the registry says which layers emit each.
const (
	CodeLimitExceeded   Code = "limit_exceeded"
	CodeCanceled        Code = "canceled"
	CodeStorage         Code = "storage_failed"
	CodeNotFound        Code = "not_found"
	CodeInvalidConfig   Code = "invalid_config"
	CodeUnknownSyscall  Code = "unknown_syscall"
	CodeToolFailed      Code = "tool_failed"
	CodeSyntaxError     Code = "syntax_error"
	CodeInvalidImage    Code = "invalid_image"
	CodeInvalidSkill    Code = "invalid_skill"
	CodeBudgetExceeded  Code = "budget_exceeded"
	CodeApprovalDenied  Code = "approval_denied"
	CodeApprovalTimeout Code = "approval_timeout"
	CodeCacheUnusable   Code = "cache_unusable"
)
