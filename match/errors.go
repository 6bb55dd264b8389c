package match

import "errors"

// Errors returned by the matcher. The engine maps them to fi.Errno values
// (both are invalid-argument errors, fi.ErrInval).
var (
	// ErrMultiRecvSize: a multi-receive buffer was posted with a size below
	// the matcher's minimum free space (SetMinMultiRecv), so it could not
	// take even one message before being released.
	ErrMultiRecvSize = errors.New("match: multi-receive buffer smaller than the minimum free space")

	// ErrContext: a context used for Peek+Claim cannot be compared for
	// identity (for example a slice or a map), so the claimed message could
	// never be taken back.
	ErrContext = errors.New("match: context value is not comparable")

	// ErrMinMultiRecv: SetMinMultiRecv was given a value below 1.
	ErrMinMultiRecv = errors.New("match: minimum multi-receive free space must be at least 1")

	// ErrBuckets: the Buckets option was given a value below 1 or above 1<<24.
	ErrBuckets = errors.New("match: bucket count out of range [1, 1<<24]")
)
