package launch

// How Job values of any bytes travel through a launcher's key-value
// space.
//
// Keys: a Job key (1-32 bytes of [A-Za-z0-9_.-], not starting with the
// "PMI_" that Hydra reserves, nor with "gofi.", which Connect uses) put by
// rank r is stored as "key:r"; the
// ':' cannot occur in a Job key, so two Job keys never meet.
//
// Values, for PMI (limits().text): the bytes are encoded with base64's
// URL alphabet without padding ([A-Za-z0-9_-], which neither PMI-1's
// spaces and '=' nor PMI-2's ';' can break), then cut into chunks of at
// most limits().valMax characters. The first chunk, under "key:r", starts
// with the chunk count in decimal and a '.'; chunk i (i >= 1) is under
// "key:r:i". A value that fits one chunk is thus "1.<base64>".
//
// Values for the env rendezvous (binary) are stored as they are.

import (
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/gofi-dev/fi"
)

const (
	maxKey    = 32   // longest Job key
	maxChunks = 4096 // most chunks one value may take (4 MiB under PMI's 1 KiB values)
)

var b64 = base64.RawURLEncoding

// checkKey validates a Job key.
func checkKey(op, key string) error {
	if key == "" || len(key) > maxKey {
		return lerr(op, fi.ErrInval, "key %q: keys are 1 to %d bytes", key, maxKey)
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return lerr(op, fi.ErrInval, "key %q: byte %q is not one of [A-Za-z0-9_.-]", key, c)
		}
	}
	if strings.HasPrefix(key, "PMI_") {
		return lerr(op, fi.ErrInval, "key %q: the PMI_ prefix is reserved for the launcher", key)
	}
	return nil
}

// checkUserKey validates a key passed to Put or Get: a Job key outside
// gofi's own "gofi." space (Connect's names live there).
func checkUserKey(op, key string) error {
	if strings.HasPrefix(key, "gofi.") {
		return lerr(op, fi.ErrInval, "key %q: the gofi. prefix is reserved for launch itself", key)
	}
	return checkKey(op, key)
}

// storeKey is the launcher key of chunk i of key put by rank.
func storeKey(key string, rank, chunk int) string {
	s := key + ":" + strconv.Itoa(rank)
	if chunk > 0 {
		s += ":" + strconv.Itoa(chunk)
	}
	return s
}

// chunks encodes val for a text launcher: the values to store under
// storeKey(key, rank, i) for i = 0, 1, ...
func chunks(val []byte, valMax int) ([]string, error) {
	elen := b64.EncodedLen(len(val))
	if elen > maxChunks*valMax-5 { // 5: the longest header, "4096."
		return nil, lerr("Put", fi.ErrMsgSize, "value of %d bytes needs more than %d launcher values of %d bytes",
			len(val), maxChunks, valMax)
	}
	enc := b64.EncodeToString(val)
	// n chunks hold valMax*n characters less the header "n.": the least n
	// is at most a digit's worth above the estimate.
	n := max(1, (elen+2)/valMax)
	for elen+len(strconv.Itoa(n))+1 > n*valMax {
		n++
	}
	if n > maxChunks {
		return nil, lerr("Put", fi.ErrMsgSize, "value of %d bytes needs more than %d launcher values of %d bytes",
			len(val), maxChunks, valMax)
	}
	out := make([]string, 0, n)
	first := strconv.Itoa(n) + "."
	take := min(valMax-len(first), len(enc))
	out = append(out, first+enc[:take])
	enc = enc[take:]
	for len(enc) > 0 {
		take = min(valMax, len(enc))
		out = append(out, enc[:take])
		enc = enc[take:]
	}
	// n is the least count that fits, so every chunk after the first holds
	// at least one character (PMI refuses empty values) and len(out) == n.
	return out, nil
}

// chunkCount reads the header of a first chunk: the count and the data
// after it.
func chunkCount(first []byte) (int, []byte, error) {
	i := 0
	for i < len(first) && i < 5 && first[i] >= '0' && first[i] <= '9' {
		i++
	}
	if i == 0 || i >= len(first) || first[i] != '.' {
		return 0, nil, syntax("value header %.20q is not <count>.", first)
	}
	n, _ := strconv.Atoi(string(first[:i]))
	if n < 1 || n > maxChunks {
		return 0, nil, syntax("value header says %d chunks", n)
	}
	return n, first[i+1:], nil
}
