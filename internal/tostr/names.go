package tostr

import (
	"fmt"
	"strconv"
	"strings"
)

// Bit names one bit of a bit set.
type Bit struct {
	Bit  uint64
	Name string
}

// Caps: fi_tostr's FI_TYPE_CAPS order, then the capability bits libfabric
// 1.x leaves out of it, then the operation and GetInfo flags. OpFlags:
// FI_TYPE_OP_FLAGS order (bit 59 is FI_CLAIM, 58 FI_DISCARD there).
var Caps = []Bit{
	{1 << 1, "FI_MSG"}, {1 << 2, "FI_RMA"}, {1 << 3, "FI_TAGGED"},
	{1 << 4, "FI_ATOMIC"}, {1 << 5, "FI_MULTICAST"}, {1 << 6, "FI_COLLECTIVE"},
	{1 << 8, "FI_READ"}, {1 << 9, "FI_WRITE"}, {1 << 10, "FI_RECV"},
	{1 << 11, "FI_SEND"}, {1 << 12, "FI_REMOTE_READ"}, {1 << 13, "FI_REMOTE_WRITE"},
	{1 << 16, "FI_MULTI_RECV"}, {1 << 17, "FI_REMOTE_CQ_DATA"}, {1 << 20, "FI_TRIGGER"},
	{1 << 21, "FI_FENCE"}, {1 << 48, "FI_VARIABLE_MSG"}, {1 << 49, "FI_RMA_PMEM"},
	{1 << 50, "FI_SOURCE_ERR"}, {1 << 51, "FI_LOCAL_COMM"}, {1 << 52, "FI_REMOTE_COMM"},
	{1 << 53, "FI_SHARED_AV"}, {1 << 56, "FI_RMA_EVENT"}, {1 << 57, "FI_SOURCE"},
	{1 << 58, "FI_NAMED_RX_CTX"}, {1 << 59, "FI_DIRECTED_RECV"}, {1 << 47, "FI_HMEM"},
	{1 << 41, "FI_AV_USER_ID"}, {1 << 44, "FI_XPU"}, {1 << 18, "FI_MORE"},
	{1 << 19, "FI_PEEK"}, {1 << 22, "FI_PRIORITY"}, {1 << 24, "FI_COMPLETION"},
	{1 << 25, "FI_INJECT"}, {1 << 26, "FI_INJECT_COMPLETE"}, {1 << 27, "FI_TRANSMIT_COMPLETE"},
	{1 << 28, "FI_DELIVERY_COMPLETE"}, {1 << 30, "FI_COMMIT_COMPLETE"}, {1 << 31, "FI_MATCH_COMPLETE"},
	{1 << 29, "FI_AFFINITY"}, {1 << 54, "FI_PROV_ATTR_ONLY"}, {1 << 55, "FI_NUMERICHOST"},
}
var OpFlags = []Bit{
	{1 << 5, "FI_MULTICAST"}, {1 << 16, "FI_MULTI_RECV"}, {1 << 17, "FI_REMOTE_CQ_DATA"},
	{1 << 18, "FI_MORE"}, {1 << 19, "FI_PEEK"}, {1 << 20, "FI_TRIGGER"},
	{1 << 21, "FI_FENCE"}, {1 << 24, "FI_COMPLETION"}, {1 << 25, "FI_INJECT"},
	{1 << 26, "FI_INJECT_COMPLETE"}, {1 << 27, "FI_TRANSMIT_COMPLETE"}, {1 << 28, "FI_DELIVERY_COMPLETE"},
	{1 << 31, "FI_MATCH_COMPLETE"}, {1 << 29, "FI_AFFINITY"}, {1 << 59, "FI_CLAIM"},
	{1 << 58, "FI_DISCARD"},
}
var Modes = []Bit{
	{1 << 59, "FI_CONTEXT"}, {1 << 58, "FI_MSG_PREFIX"}, {1 << 57, "FI_ASYNC_IOV"},
	{1 << 56, "FI_RX_CQ_DATA"}, {1 << 55, "FI_LOCAL_MR"}, {1 << 54, "FI_NOTIFY_FLAGS_ONLY"},
	{1 << 53, "FI_RESTRICTED_COMP"}, {1 << 52, "FI_CONTEXT2"}, {1 << 51, "FI_BUFFERED_RECV"},
}
var Orders = []Bit{
	{1 << 0, "FI_ORDER_RAR"}, {1 << 1, "FI_ORDER_RAW"}, {1 << 2, "FI_ORDER_RAS"},
	{1 << 3, "FI_ORDER_WAR"}, {1 << 4, "FI_ORDER_WAW"}, {1 << 5, "FI_ORDER_WAS"},
	{1 << 6, "FI_ORDER_SAR"}, {1 << 7, "FI_ORDER_SAW"}, {1 << 8, "FI_ORDER_SAS"},
	{1 << 16, "FI_ORDER_DATA"}, {1 << 32, "FI_ORDER_RMA_RAR"}, {1 << 33, "FI_ORDER_RMA_RAW"},
	{1 << 34, "FI_ORDER_RMA_WAR"}, {1 << 35, "FI_ORDER_RMA_WAW"}, {1 << 36, "FI_ORDER_ATOMIC_RAR"},
	{1 << 37, "FI_ORDER_ATOMIC_RAW"}, {1 << 38, "FI_ORDER_ATOMIC_WAR"}, {1 << 39, "FI_ORDER_ATOMIC_WAW"},
}
var MRModes = []Bit{
	{1 << 0, "FI_MR_BASIC"}, {1 << 1, "FI_MR_SCALABLE"}, {1 << 2, "FI_MR_LOCAL"},
	{1 << 3, "FI_MR_RAW"}, {1 << 4, "FI_MR_VIRT_ADDR"}, {1 << 5, "FI_MR_ALLOCATED"},
	{1 << 6, "FI_MR_PROV_KEY"}, {1 << 7, "FI_MR_MMU_NOTIFY"}, {1 << 8, "FI_MR_RMA_EVENT"},
	{1 << 9, "FI_MR_ENDPOINT"}, {1 << 10, "FI_MR_HMEM"}, {1 << 11, "FI_MR_COLLECTIVE"},
}

// FlagAliases are the other spellings ParseFlags accepts.
var FlagAliases = map[string]uint64{
	"FI_ATOMICS": 1 << 4, "FI_TRANSMIT": 1 << 11, "FI_EVENT": 1 << 24,
	"FI_SELECTIVE_COMPLETION": 1 << 59, "FI_SYMMETRIC": 1 << 59, "FI_SYNC_ERR": 1 << 58,
	"FI_UNIVERSE": 1 << 57, "FI_XPU_TRIGGER": 1 << 44,
}

// Bits lists the names of v's bits in table order, then any bit the table
// does not name in hex, so nothing is lost.
func Bits(v uint64, table []Bit) []string {
	var out []string
	rest := v
	for _, b := range table {
		if v&b.Bit != 0 && rest&b.Bit != 0 {
			out = append(out, b.Name)
			rest &^= b.Bit
		}
	}
	for rest != 0 {
		low := rest & -rest
		out = append(out, "0x"+strconv.FormatUint(low, 16))
		rest &^= low
	}
	return out
}

// Join spells a bit set like fi_tostr: "FI_MSG | FI_TAGGED"; "" for none.
func Join(v uint64, table []Bit) string { return strings.Join(Bits(v, table), " | ") }

// Completion orders (fi_endpoint(3) comp_order).
const (
	compOrderStrict = 0x1ff
	compOrderData   = 1 << 16
)

// CompOrder names a completion order: FI_ORDER_NONE, FI_ORDER_STRICT,
// FI_ORDER_DATA, then any other ordering bit.
func CompOrder(c uint64) []string {
	if c == 0 {
		return []string{"FI_ORDER_NONE"}
	}
	var out []string
	rest := c
	if c&compOrderStrict == compOrderStrict {
		out = append(out, "FI_ORDER_STRICT")
		rest &^= compOrderStrict
	}
	if c&compOrderData != 0 {
		out = append(out, "FI_ORDER_DATA")
		rest &^= compOrderData
	}
	return append(out, Bits(rest, Orders)...)
}

// Enum names value v of an enumeration; "Unknown" outside it, as fi_tostr
// says.
func Enum(v int64, names []string) string {
	if v >= 0 && v < int64(len(names)) && names[v] != "" {
		return names[v]
	}
	return "Unknown"
}

// Enumerations of fi_getinfo(3) and fi_domain(3), indexed by value.
var (
	AddrFormats = []string{
		"FI_FORMAT_UNSPEC", "FI_SOCKADDR", "FI_SOCKADDR_IN", "FI_SOCKADDR_IN6", "FI_SOCKADDR_IB",
		"FI_ADDR_PSMX", "FI_ADDR_GNI", "FI_ADDR_BGQ", "FI_ADDR_MLX", "FI_ADDR_STR", "FI_ADDR_PSMX2",
		"FI_ADDR_IB_UD", "FI_ADDR_EFA", "FI_ADDR_PSMX3", "FI_ADDR_OPX", "FI_ADDR_CXI",
	}
	EpTypes   = []string{"FI_EP_UNSPEC", "FI_EP_MSG", "FI_EP_DGRAM", "FI_EP_RDM", "FI_EP_SOCK_STREAM", "FI_EP_SOCK_DGRAM"}
	Protocols = []string{
		"FI_PROTO_UNSPEC", "FI_PROTO_RDMA_CM_IB_RC", "FI_PROTO_IWARP", "FI_PROTO_IB_UD", "FI_PROTO_PSMX",
		"FI_PROTO_UDP", "FI_PROTO_SOCK_TCP", "FI_PROTO_MXM", "FI_PROTO_IWARP_RDM", "FI_PROTO_IB_RDM",
		"FI_PROTO_GNI", "FI_PROTO_RXM", "FI_PROTO_RXD", "FI_PROTO_MLX", "FI_PROTO_NETWORKDIRECT",
		"FI_PROTO_PSMX2", "FI_PROTO_SHM", "FI_PROTO_MRAIL", "FI_PROTO_RSTREAM", "FI_PROTO_RDMA_CM_IB_XRC",
		"FI_PROTO_EFA", "FI_PROTO_PSMX3", "FI_PROTO_RXM_TCP", "FI_PROTO_OPX", "FI_PROTO_CXI", "FI_PROTO_XNET",
	}
	Threadings = []string{"FI_THREAD_UNSPEC", "FI_THREAD_SAFE", "FI_THREAD_FID", "FI_THREAD_DOMAIN",
		"FI_THREAD_COMPLETION", "FI_THREAD_ENDPOINT"}
	Progresses    = []string{"FI_PROGRESS_UNSPEC", "FI_PROGRESS_AUTO", "FI_PROGRESS_MANUAL"}
	ResourceMgmts = []string{"FI_RM_UNSPEC", "FI_RM_DISABLED", "FI_RM_ENABLED"}
	AVTypes       = []string{"FI_AV_UNSPEC", "FI_AV_MAP", "FI_AV_TABLE"}
	BusTypes      = []string{"FI_BUS_UNSPEC", "FI_BUS_PCI"}
	LinkStates    = []string{"FI_LINK_UNKNOWN", "FI_LINK_DOWN", "FI_LINK_UP"}
)

// TrafficClass names a traffic class: FI_TC_UNSPEC, FI_TC_BEST_EFFORT,
// ..., a DSCP value as FI_TC_DSCP(n), anything else in hex.
func TrafficClass(t uint32) string {
	const dscp, label = 0x100, 0x200
	switch t {
	case 0:
		return "FI_TC_UNSPEC"
	case label:
		return "FI_TC_BEST_EFFORT"
	case label + 1:
		return "FI_TC_LOW_LATENCY"
	case label + 2:
		return "FI_TC_DEDICATED_ACCESS"
	case label + 3:
		return "FI_TC_BULK_DATA"
	case label + 4:
		return "FI_TC_SCAVENGER"
	case label + 5:
		return "FI_TC_NETWORK_CTRL"
	}
	if t&^0xff == dscp {
		return fmt.Sprintf("FI_TC_DSCP(%d)", uint8(t))
	}
	return fmt.Sprintf("0x%x", t)
}

// ErrnoText is libfabric's fi_strerror text of each error number it knows.
var ErrnoText = map[int]string{
	1:   "Operation not permitted",
	2:   "No such file or directory",
	4:   "Interrupted system call",
	5:   "Input/output error",
	7:   "Argument list too long",
	9:   "Bad file descriptor",
	11:  "Resource temporarily unavailable",
	12:  "Cannot allocate memory",
	13:  "Permission denied",
	14:  "Bad address",
	16:  "Device or resource busy",
	17:  "File exists",
	19:  "No such device",
	22:  "Invalid argument",
	24:  "Too many open files",
	28:  "No space left on device",
	38:  "Function not implemented",
	42:  "No message of desired type",
	61:  "No data available",
	75:  "Value too large for defined data type",
	90:  "Message too long",
	92:  "Protocol not available",
	95:  "Operation not supported",
	98:  "Address already in use",
	99:  "Cannot assign requested address",
	100: "Network is down",
	101: "Network is unreachable",
	103: "Software caused connection abort",
	104: "Connection reset by peer",
	105: "No buffer space available",
	106: "Transport endpoint is already connected",
	107: "Transport endpoint is not connected",
	108: "Cannot send after transport endpoint shutdown",
	110: "Connection timed out",
	111: "Connection refused",
	112: "Host is down",
	113: "No route to host",
	114: "Operation already in progress",
	115: "Operation now in progress",
	121: "Remote I/O error",
	125: "Operation canceled",
	129: "Key was rejected by service",
	256: "Unspecified error",
	257: "Provided buffer is too small",
	258: "Operation not permitted in current state",
	259: "Error available",
	260: "Flags not supported",
	261: "Missing or unavailable event queue",
	262: "Invalid resource domain",
	263: "Missing or unavailable completion queue",
	264: "CRC error",
	265: "Truncation error",
	266: "Required key not available",
	267: "Missing or unavailable address vector",
	268: "Queue has been overrun",
	269: "Receiver not ready, no receive buffers available",
}

// Strerror returns the text of error number n (positive or negated),
// like fi_strerror(3): "Success" for 0, "Unknown error N" for a number
// without text.
func Strerror(n int) string {
	if n < 0 {
		n = -n
	}
	if n == 0 {
		return "Success"
	}
	if s, ok := ErrnoText[n]; ok {
		return s
	}
	return "Unknown error " + strconv.Itoa(n)
}
