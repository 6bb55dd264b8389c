package launch

// kvs is what a launcher gives a Job: a key-value space shared by the
// job's ranks with a collective fence, a barrier, abort and finalize. Keys
// and values arrive here already shaped for the launcher (value.go): keys
// within limits().keyMax bytes, values within limits().valMax bytes and,
// when limits().text, drawn from a character set every PMI server carries.
// Calls come one at a time (Job serializes them).
type kvs interface {
	name() string // "pmi1", "pmi2", "env" or "singleton"
	limits() limits
	// put stores val under key; other ranks see it after the next fence.
	put(key string, val []byte) error
	// fence waits until every rank has fenced; puts made before it are
	// then visible to get on every rank.
	fence() error
	// get returns the value under key, or ok == false when there is none.
	get(key string) (val []byte, ok bool, err error)
	barrier() error
	// abort asks the launcher to end the whole job; it may return before
	// the job ends (the caller then exits).
	abort(code int, msg string) error
	finalize() error
}

// limits describes a launcher's key-value space.
type limits struct {
	keyMax int  // longest key
	valMax int  // longest value
	text   bool // values must be text from the safe alphabet (value.go)
}

// shape is what Init learns about the job.
type shape struct {
	rank, size           int
	localRank, localSize int    // set by the kvs, or from mapping
	mapping              string // PMI_process_mapping, when the launcher gave one
}

// maxRanks bounds the job size Init accepts from a launcher (a corrupt
// size must not make gofi allocate without bound).
const maxRanks = 1 << 22
