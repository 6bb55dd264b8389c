// Package match holds the posted-receive and unexpected-message queues of an
// endpoint and decides which posted receive an arriving message lands in
// (tag matching, fi_tagged(3) and fi_msg(3)).
//
// It is internal to gofi and carries no compatibility promise.
//
// One [Matcher] serves one kind of traffic on one endpoint: the engine keeps
// one for untagged messages (posting every receive with Tag 0, Ignore 0) and
// one for tagged messages. Nothing in it knows about transports: sources are
// opaque uint64 values (an fi_addr or an internal peer id), so one matcher can
// serve an endpoint that links several transports under one posted queue and
// one unexpected queue.
//
// # Matching rule
//
// A message with tag T from source S in peer group G matches a posted receive
// (tag t, ignore i, source s, group g) when
//
//	(T ^ t) &^ i == 0,
//	s == AnySource || s == S   (only with DirectedRecv; otherwise s is ignored),
//	g == G.
//
// Among the posted receives a message matches, the earliest posted wins.
// Among the unexpected messages a receive matches, the earliest arrived
// wins. Both hold across every internal index: entries carry sequence
// numbers and the searches compare them.
//
// # Data structures
//
// Posted receives with Ignore == 0 live in a hash table keyed by
// (tag, source, group), one FIFO per bucket; receives with Ignore != 0
// (wildcards) live in one list in post order. An arriving message looks up
// at most two buckets, (T, S, G) and (T, AnySource, G), and then walks the
// wildcard list only while its entries are older than the best exact
// candidate, so a wildcard posted before an exact receive still wins and
// exact-tag traffic costs O(1) expected time when wildcards are few or
// recent.
//
// Unexpected messages sit in three lists at once: all of them in arrival
// order, a hash bucket keyed by (tag, group), and (with DirectedRecv) one
// list per source. A receive searches the smallest list that must contain
// every message it could match, so the first hit is the earliest match.
//
// Entries live in slabs owned by the matcher and are recycled through free
// lists: in steady state no operation allocates.
package match
