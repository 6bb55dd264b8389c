package fi

// Versions. A version packs major and minor like libfabric's FI_VERSION:
// major in the high 16 bits, minor in the low 16.

// MajorVersion and MinorVersion are the library's API version. GetInfo
// refuses a requested version newer than Version(MajorVersion, MinorVersion)
// with ErrNoSys.
const (
	MajorVersion = 2
	MinorVersion = 0
	// RevisionVersion is the library's revision within the API version.
	RevisionVersion = 0
)

// Version packs a major and minor version number (FI_VERSION).
func Version(major, minor uint32) uint32 { return major<<16 | minor&0xffff }

// Major returns the major number of a packed version (FI_MAJOR).
func Major(v uint32) uint32 { return v >> 16 }

// Minor returns the minor number of a packed version (FI_MINOR).
func Minor(v uint32) uint32 { return v & 0xffff }

// Flags is libfabric's shared 64-bit space of capability bits and
// operation flags: Info.Caps, TxAttr.OpFlags, completion flags and every
// flags parameter (GetInfo, BindCQ, AV calls, SendMsg/RecvMsg) take a Flags.
// As in libfabric some bits carry two names in different contexts (bit 59
// is DirectedRecv as a capability, Claim on a tagged receive,
// SelectiveCompletion on BindCQ and Symmetric on AV insertion); String
// spells each bit by its capability name when it has one. Values are plain
// integers, safe for concurrent use.
type Flags uint64

// Capability bits (fi_getinfo(3)); values equal libfabric's.
const (
	Msg          Flags = 1 << 1  // FI_MSG: send/receive messages (primary)
	RMA          Flags = 1 << 2  // FI_RMA: remote memory access (primary)
	Tagged       Flags = 1 << 3  // FI_TAGGED: tagged messages (primary)
	Atomic       Flags = 1 << 4  // FI_ATOMIC: atomics (primary)
	Multicast    Flags = 1 << 5  // FI_MULTICAST (primary; not provided)
	Collective   Flags = 1 << 6  // FI_COLLECTIVE (primary)
	Read         Flags = 1 << 8  // FI_READ: modifier of RMA/atomic; AV open flag (read-only)
	Write        Flags = 1 << 9  // FI_WRITE: modifier of RMA/atomic
	Recv         Flags = 1 << 10 // FI_RECV: modifier: receive side; BindCQ flag
	Send         Flags = 1 << 11 // FI_SEND: modifier: send side
	Transmit     Flags = Send    // FI_TRANSMIT: BindCQ flag for the transmit side
	RemoteRead   Flags = 1 << 12 // FI_REMOTE_READ: modifier of RMA/atomic
	RemoteWrite  Flags = 1 << 13 // FI_REMOTE_WRITE: modifier of RMA/atomic
	MultiRecv    Flags = 1 << 16 // FI_MULTI_RECV: multi-receive buffers (secondary); op flag
	RemoteCQData Flags = 1 << 17 // FI_REMOTE_CQ_DATA: remote CQ data; op and completion flag
	Trigger      Flags = 1 << 20 // FI_TRIGGER: triggered operations (secondary; not provided)
	Fence        Flags = 1 << 21 // FI_FENCE (secondary; not provided)
	AVUserID     Flags = 1 << 41 // FI_AV_USER_ID: user ids in AV entries (primary); AV insert flag
	XPU          Flags = 1 << 44 // FI_XPU: device-triggered operations (primary; not provided)
	HMEM         Flags = 1 << 47 // FI_HMEM: device memory (primary; not provided)
	VariableMsg  Flags = 1 << 48 // FI_VARIABLE_MSG (primary; not provided)
	RMAPmem      Flags = 1 << 49 // FI_RMA_PMEM (secondary; not provided)
	SourceErr    Flags = 1 << 50 // FI_SOURCE_ERR (secondary; not provided)
	LocalComm    Flags = 1 << 51 // FI_LOCAL_COMM: same-host communication (secondary)
	RemoteComm   Flags = 1 << 52 // FI_REMOTE_COMM: across the fabric (secondary)
	SharedAV     Flags = 1 << 53 // FI_SHARED_AV (secondary; not provided)
	RMAEvent     Flags = 1 << 56 // FI_RMA_EVENT (secondary; not provided)
	Source       Flags = 1 << 57 // FI_SOURCE: source address in completions (secondary); GetInfo flag
	NamedRxCtx   Flags = 1 << 58 // FI_NAMED_RX_CTX (primary; not provided)
	DirectedRecv Flags = 1 << 59 // FI_DIRECTED_RECV: match receives on source (primary)
)

// Operation, GetInfo, AV and completion flags sharing the same bit space.
const (
	More                Flags = 1 << 18 // FI_MORE: more operations follow; AV insert batching
	Peek                Flags = 1 << 19 // FI_PEEK: tagged receive peeks for a match
	Priority            Flags = 1 << 22 // FI_PRIORITY
	Completion          Flags = 1 << 24 // FI_COMPLETION: generate a completion (selective mode)
	Inject              Flags = 1 << 25 // FI_INJECT: buffer reusable on return
	InjectComplete      Flags = 1 << 26 // FI_INJECT_COMPLETE
	TransmitComplete    Flags = 1 << 27 // FI_TRANSMIT_COMPLETE
	DeliveryComplete    Flags = 1 << 28 // FI_DELIVERY_COMPLETE
	Affinity            Flags = 1 << 29 // FI_AFFINITY
	CommitComplete      Flags = 1 << 30 // FI_COMMIT_COMPLETE
	MatchComplete       Flags = 1 << 31 // FI_MATCH_COMPLETE
	ProvAttrOnly        Flags = 1 << 54 // FI_PROV_ATTR_ONLY: GetInfo flag
	NumericHost         Flags = 1 << 55 // FI_NUMERICHOST: GetInfo flag: node is numeric
	Universe            Flags = 1 << 57 // FI_UNIVERSE: AV set flag
	SyncErr             Flags = 1 << 58 // FI_SYNC_ERR: AV insert returns per-address errors
	Discard             Flags = 1 << 58 // FI_DISCARD: tagged receive discards the match
	Claim               Flags = 1 << 59 // FI_CLAIM: tagged receive claims a peeked message
	SelectiveCompletion Flags = 1 << 59 // FI_SELECTIVE_COMPLETION: BindCQ flag
	Symmetric           Flags = 1 << 59 // FI_SYMMETRIC: AV flag: symmetric addressing
)

// Capability groups of fi_getinfo(3).
const (
	// PrimaryCaps must be asked for; a provider enables only those asked.
	PrimaryCaps = Msg | RMA | Tagged | Atomic | Multicast | NamedRxCtx |
		DirectedRecv | HMEM | Collective | XPU | AVUserID | VariableMsg
	// PrimaryModifiers narrow a primary capability (send-only, ...).
	PrimaryModifiers = Read | Write | Recv | Send | RemoteRead | RemoteWrite
	// SecondaryCaps may be asked for; a provider may report unasked ones
	// only when harmless.
	SecondaryCaps = MultiRecv | Source | RMAEvent | SharedAV | Trigger |
		Fence | LocalComm | RemoteComm | SourceErr | RMAPmem
)

// Mode is the set of libfabric mode bits: requirements a provider places on
// the application (fi_getinfo(3) MODE). In hints it lists the modes the
// application supports; the provider clears the ones it does not need.
// Values are plain integers, safe for concurrent use.
type Mode uint64

// Mode bits; values equal libfabric's.
const (
	BufferedRecv    Mode = 1 << 51 // FI_BUFFERED_RECV
	Context2        Mode = 1 << 52 // FI_CONTEXT2
	RestrictedComp  Mode = 1 << 53 // FI_RESTRICTED_COMP
	NotifyFlagsOnly Mode = 1 << 54 // FI_NOTIFY_FLAGS_ONLY
	LocalMR         Mode = 1 << 55 // FI_LOCAL_MR
	RxCQData        Mode = 1 << 56 // FI_RX_CQ_DATA
	AsyncIOV        Mode = 1 << 57 // FI_ASYNC_IOV
	MsgPrefix       Mode = 1 << 58 // FI_MSG_PREFIX
	Context         Mode = 1 << 59 // FI_CONTEXT
)

// AddrFormat is the format of addresses (fi_getinfo(3) ADDRESSING FORMATS).
// Like every enumeration and bit set here, a plain value, safe for
// concurrent use.
type AddrFormat uint32

// Address formats; values equal libfabric's enum.
const (
	FormatUnspec AddrFormat = iota // FI_FORMAT_UNSPEC
	Sockaddr                       // FI_SOCKADDR
	SockaddrIn                     // FI_SOCKADDR_IN
	SockaddrIn6                    // FI_SOCKADDR_IN6
	SockaddrIB                     // FI_SOCKADDR_IB
	AddrPSMX                       // FI_ADDR_PSMX
	AddrGNI                        // FI_ADDR_GNI
	AddrBGQ                        // FI_ADDR_BGQ
	AddrMLX                        // FI_ADDR_MLX
	AddrStr                        // FI_ADDR_STR
	AddrPSMX2                      // FI_ADDR_PSMX2
	AddrIBUD                       // FI_ADDR_IB_UD
	AddrEFA                        // FI_ADDR_EFA
	AddrPSMX3                      // FI_ADDR_PSMX3
	AddrOPX                        // FI_ADDR_OPX
	AddrCXI                        // FI_ADDR_CXI
)

// EpType is an endpoint type (fi_endpoint(3)); a plain value, safe for
// concurrent use.
type EpType int

// Endpoint types; values equal libfabric's.
const (
	EpUnspec     EpType = iota // FI_EP_UNSPEC
	EpMsg                      // FI_EP_MSG: connected, reliable
	EpDgram                    // FI_EP_DGRAM: unreliable datagram
	EpRDM                      // FI_EP_RDM: reliable datagram (what gofi provides)
	EpSockStream               // FI_EP_SOCK_STREAM
	EpSockDgram                // FI_EP_SOCK_DGRAM
)

// Protocol is an endpoint protocol (fi_endpoint(3) protocol); a plain
// value, safe for concurrent use. gofi's providers report FI_PROTO_SHM and
// FI_PROTO_SOCK_TCP for their own wire formats, which do not interoperate
// with libfabric's.
type Protocol uint32

// Protocols; values equal libfabric's.
const (
	ProtoUnspec        Protocol = iota // FI_PROTO_UNSPEC
	ProtoRDMACMIBRC                    // FI_PROTO_RDMA_CM_IB_RC
	ProtoIWARP                         // FI_PROTO_IWARP
	ProtoIBUD                          // FI_PROTO_IB_UD
	ProtoPSMX                          // FI_PROTO_PSMX
	ProtoUDP                           // FI_PROTO_UDP
	ProtoSockTCP                       // FI_PROTO_SOCK_TCP
	ProtoMXM                           // FI_PROTO_MXM (deprecated)
	ProtoIWARPRDM                      // FI_PROTO_IWARP_RDM
	ProtoIBRDM                         // FI_PROTO_IB_RDM
	ProtoGNI                           // FI_PROTO_GNI
	ProtoRXM                           // FI_PROTO_RXM
	ProtoRXD                           // FI_PROTO_RXD
	ProtoMLX                           // FI_PROTO_MLX
	ProtoNetworkDirect                 // FI_PROTO_NETWORKDIRECT
	ProtoPSMX2                         // FI_PROTO_PSMX2
	ProtoShm                           // FI_PROTO_SHM
	ProtoMRail                         // FI_PROTO_MRAIL
	ProtoRStream                       // FI_PROTO_RSTREAM
	ProtoRDMACMIBXRC                   // FI_PROTO_RDMA_CM_IB_XRC
	ProtoEFA                           // FI_PROTO_EFA
	ProtoPSMX3                         // FI_PROTO_PSMX3
	ProtoRXMTCP                        // FI_PROTO_RXM_TCP
	ProtoOPX                           // FI_PROTO_OPX
	ProtoCXI                           // FI_PROTO_CXI
	ProtoXNet                          // FI_PROTO_XNET
)

// Threading is a domain threading model (fi_domain(3)). Lower non-zero
// values are stronger: a provider that supports ThreadSafe supports every
// other model. A plain value, safe for concurrent use.
type Threading int

// Threading models; values equal libfabric's.
const (
	ThreadUnspec     Threading = iota // FI_THREAD_UNSPEC
	ThreadSafe                        // FI_THREAD_SAFE: any call from any goroutine
	ThreadFID                         // FI_THREAD_FID
	ThreadDomain                      // FI_THREAD_DOMAIN: the app serializes per domain
	ThreadCompletion                  // FI_THREAD_COMPLETION
	ThreadEndpoint                    // FI_THREAD_ENDPOINT
)

// Progress is a progress model (fi_domain(3)); a plain value, safe for
// concurrent use.
type Progress int

// Progress models; values equal libfabric's.
const (
	ProgressUnspec Progress = iota // FI_PROGRESS_UNSPEC
	ProgressAuto                   // FI_PROGRESS_AUTO: the provider progresses by itself
	ProgressManual                 // FI_PROGRESS_MANUAL: progress happens in the app's calls
)

// ResourceMgmt is a domain resource-management mode (fi_domain(3)); a plain
// value, safe for concurrent use.
type ResourceMgmt int

// Resource management modes; values equal libfabric's.
const (
	RMUnspec   ResourceMgmt = iota // FI_RM_UNSPEC
	RMDisabled                     // FI_RM_DISABLED
	RMEnabled                      // FI_RM_ENABLED: queues are protected from overrun
)

// AVType is an address-vector type (fi_av(3)); a plain value, safe for
// concurrent use.
type AVType int

// AV types; values equal libfabric's.
const (
	AVUnspec AVType = iota // FI_AV_UNSPEC
	AVMap                  // FI_AV_MAP
	AVTable                // FI_AV_TABLE
)

// MRMode is the set of memory-registration mode bits (fi_domain(3)
// mr_mode). In hints it lists what the application can work with; gofi's
// providers need none of the bits (regions are addressed by offset, keys
// are any 64-bit value the application picks, local buffers need no
// registration) and use MRProvKey when offered (the provider then picks
// keys). MRBasic (virtual addressing) is not supported. A plain value,
// safe for concurrent use.
type MRMode int

// MR mode bits; values equal libfabric's.
const (
	MRUnspec     MRMode = 0       // FI_MR_UNSPEC
	MRBasic      MRMode = 1 << 0  // FI_MR_BASIC
	MRScalable   MRMode = 1 << 1  // FI_MR_SCALABLE
	MRLocal      MRMode = 1 << 2  // FI_MR_LOCAL
	MRRaw        MRMode = 1 << 3  // FI_MR_RAW
	MRVirtAddr   MRMode = 1 << 4  // FI_MR_VIRT_ADDR
	MRAllocated  MRMode = 1 << 5  // FI_MR_ALLOCATED
	MRProvKey    MRMode = 1 << 6  // FI_MR_PROV_KEY
	MRMMUNotify  MRMode = 1 << 7  // FI_MR_MMU_NOTIFY
	MRRMAEvent   MRMode = 1 << 8  // FI_MR_RMA_EVENT
	MREndpoint   MRMode = 1 << 9  // FI_MR_ENDPOINT
	MRHMEM       MRMode = 1 << 10 // FI_MR_HMEM
	MRCollective MRMode = 1 << 11 // FI_MR_COLLECTIVE
)

// MsgOrder is the set of message-ordering bits (fi_endpoint(3) msg_order);
// a plain value, safe for concurrent use.
type MsgOrder uint64

// Ordering bits; values equal libfabric's.
const (
	OrderNone      MsgOrder = 0       // FI_ORDER_NONE
	OrderRAR       MsgOrder = 1 << 0  // FI_ORDER_RAR
	OrderRAW       MsgOrder = 1 << 1  // FI_ORDER_RAW
	OrderRAS       MsgOrder = 1 << 2  // FI_ORDER_RAS
	OrderWAR       MsgOrder = 1 << 3  // FI_ORDER_WAR
	OrderWAW       MsgOrder = 1 << 4  // FI_ORDER_WAW
	OrderWAS       MsgOrder = 1 << 5  // FI_ORDER_WAS
	OrderSAR       MsgOrder = 1 << 6  // FI_ORDER_SAR
	OrderSAW       MsgOrder = 1 << 7  // FI_ORDER_SAW
	OrderSAS       MsgOrder = 1 << 8  // FI_ORDER_SAS: sends arrive in the order sent
	OrderStrict    MsgOrder = 0x1ff   // FI_ORDER_STRICT
	OrderData      MsgOrder = 1 << 16 // FI_ORDER_DATA
	OrderRMARAR    MsgOrder = 1 << 32 // FI_ORDER_RMA_RAR
	OrderRMARAW    MsgOrder = 1 << 33 // FI_ORDER_RMA_RAW
	OrderRMAWAR    MsgOrder = 1 << 34 // FI_ORDER_RMA_WAR
	OrderRMAWAW    MsgOrder = 1 << 35 // FI_ORDER_RMA_WAW
	OrderAtomicRAR MsgOrder = 1 << 36 // FI_ORDER_ATOMIC_RAR
	OrderAtomicRAW MsgOrder = 1 << 37 // FI_ORDER_ATOMIC_RAW
	OrderAtomicWAR MsgOrder = 1 << 38 // FI_ORDER_ATOMIC_WAR
	OrderAtomicWAW MsgOrder = 1 << 39 // FI_ORDER_ATOMIC_WAW
)

// CompOrder is the completion-ordering value (fi_endpoint(3) comp_order):
// FI_ORDER_NONE, FI_ORDER_STRICT or FI_ORDER_DATA. A plain value, safe for
// concurrent use.
type CompOrder uint64

// Completion orderings; values equal libfabric's.
const (
	CompOrderNone   CompOrder = 0     // FI_ORDER_NONE
	CompOrderStrict CompOrder = 0x1ff // FI_ORDER_STRICT
	CompOrderData   CompOrder = 1 << 16
)

// TrafficClass is a traffic class (tclass); zero is FI_TC_UNSPEC. A plain
// value, safe for concurrent use.
type TrafficClass uint32

// Traffic classes; values equal libfabric's.
const (
	TCUnspec          TrafficClass = 0
	TCDSCP            TrafficClass = 0x100
	TCLabel           TrafficClass = 0x200
	TCBestEffort      TrafficClass = TCLabel
	TCLowLatency      TrafficClass = TCLabel + 1
	TCDedicatedAccess TrafficClass = TCLabel + 2
	TCBulkData        TrafficClass = TCLabel + 3
	TCScavenger       TrafficClass = TCLabel + 4
	TCNetworkCtrl     TrafficClass = TCLabel + 5
)

// SharedContext is the context count meaning "shared context"
// (FI_SHARED_CONTEXT) in TxCtxCnt/RxCtxCnt.
const SharedContext = -1

// Info describes one way to reach the fabric: a provider, fabric, domain
// and endpoint configuration (struct fi_info). GetInfo returns a slice of
// them, best first; as hints, zero fields are wildcards (except Mode).
// An Info is plain data: not safe for concurrent mutation; duplicate it
// with Dup to hand a copy to another goroutine.
type Info struct {
	Caps       Flags      // capabilities
	Mode       Mode       // modes the app supports (hints) / the provider needs (output)
	AddrFormat AddrFormat // format of SrcAddr and DestAddr
	SrcAddr    []byte     // local address, in AddrFormat
	DestAddr   []byte     // destination address, in AddrFormat
	Handle     any        // provider context handle; not copied by Dup
	TxAttr     *TxAttr
	RxAttr     *RxAttr
	EpAttr     *EpAttr
	DomainAttr *DomainAttr
	FabricAttr *FabricAttr
	Nic        *Nic
}

// TxAttr holds transmit context attributes (struct fi_tx_attr). Plain
// data: not safe for concurrent mutation.
type TxAttr struct {
	Caps        Flags
	Mode        Mode
	OpFlags     Flags // default operation flags
	MsgOrder    MsgOrder
	CompOrder   CompOrder
	InjectSize  int // largest message Inject / the Inject flag accepts
	Size        int // transmit queue depth
	IOVLimit    int // most buffers in one vectored send
	RMAIOVLimit int
	TClass      TrafficClass
}

// RxAttr holds receive context attributes (struct fi_rx_attr). Plain
// data: not safe for concurrent mutation.
type RxAttr struct {
	Caps              Flags
	Mode              Mode
	OpFlags           Flags
	MsgOrder          MsgOrder
	CompOrder         CompOrder
	TotalBufferedRecv int
	Size              int // receive queue depth
	IOVLimit          int
}

// EpAttr holds endpoint attributes (struct fi_ep_attr). Plain data: not
// safe for concurrent mutation.
type EpAttr struct {
	Type            EpType
	Protocol        Protocol
	ProtocolVersion uint32
	MaxMsgSize      int
	MsgPrefixSize   int
	MaxOrderRAWSize int
	MaxOrderWARSize int
	MaxOrderWAWSize int
	MemTagFormat    uint64
	TxCtxCnt        int
	RxCtxCnt        int
	AuthKeySize     int
	AuthKey         []byte
}

// DomainAttr holds domain attributes (struct fi_domain_attr). Plain data:
// not safe for concurrent mutation.
type DomainAttr struct {
	Domain          *Domain // in hints: restrict to this open domain
	Name            string
	Threading       Threading
	ControlProgress Progress
	DataProgress    Progress
	ResourceMgmt    ResourceMgmt
	AVType          AVType
	MRMode          MRMode
	MRKeySize       int
	CQDataSize      int // bytes of remote CQ data carried (8)
	CQCnt           int
	EpCnt           int
	TxCtxCnt        int
	RxCtxCnt        int
	MaxEpTxCtx      int
	MaxEpRxCtx      int
	MaxEpStxCtx     int
	MaxEpSrxCtx     int
	CntrCnt         int
	MRIOVLimit      int
	Caps            Flags
	Mode            Mode
	AuthKeySize     int
	AuthKey         []byte
	MaxErrData      int
	MRCnt           int
	TClass          TrafficClass
}

// FabricAttr holds fabric attributes (struct fi_fabric_attr). Plain data:
// not safe for concurrent mutation.
type FabricAttr struct {
	Fabric      *Fabric // in hints: restrict to this open fabric
	Name        string  // fabric name, such as "shm" or "127.0.0.1/32"
	ProvName    string  // provider name; hints accept layered names ("ofi_rxm;tcp")
	ProvVersion uint32  // provider version, packed like Version
	APIVersion  uint32  // API version the info was produced for
}

// Nic describes the network interface behind an info (struct fid_nic).
// gofi's providers leave Info.Nic nil. Plain data: not safe for concurrent
// mutation (nor are DeviceAttr, BusAttr, PCIAttr and LinkAttr).
type Nic struct {
	DeviceAttr *DeviceAttr
	BusAttr    *BusAttr
	LinkAttr   *LinkAttr
	ProvAttr   any
}

// DeviceAttr describes a NIC device (struct fi_device_attr). Plain data.
type DeviceAttr struct {
	Name          string
	DeviceID      string
	DeviceVersion string
	VendorID      string
	Driver        string
	Firmware      string
}

// BusType is a NIC bus type; a plain value, safe for concurrent use.
type BusType int

// Bus types; values equal libfabric's.
const (
	BusUnspec BusType = iota // FI_BUS_UNSPEC
	BusPCI                   // FI_BUS_PCI
)

// BusAttr describes a NIC's bus (struct fi_bus_attr). Plain data.
type BusAttr struct {
	BusType BusType
	PCI     PCIAttr
}

// PCIAttr is a PCI address (struct fi_pci_attr). Plain data.
type PCIAttr struct {
	DomainID   uint16
	BusID      uint8
	DeviceID   uint8
	FunctionID uint8
}

// LinkState is a NIC link state; a plain value, safe for concurrent use.
type LinkState int

// Link states; values equal libfabric's.
const (
	LinkUnknown LinkState = iota // FI_LINK_UNKNOWN
	LinkDown                     // FI_LINK_DOWN
	LinkUp                       // FI_LINK_UP
)

// LinkAttr describes a NIC's link (struct fi_link_attr). Plain data.
type LinkAttr struct {
	Address     string
	MTU         int
	Speed       int
	State       LinkState
	NetworkType string
}

// AllocInfo returns an Info with every attribute struct allocated and
// zeroed except Nic, ready to fill in as hints (fi_allocinfo).
func AllocInfo() *Info {
	return &Info{
		TxAttr:     &TxAttr{},
		RxAttr:     &RxAttr{},
		EpAttr:     &EpAttr{},
		DomainAttr: &DomainAttr{},
		FabricAttr: &FabricAttr{},
	}
}

// Dup returns a deep copy of info (fi_dupinfo): addresses, keys and every
// attribute struct are copied; Handle is not. The Domain and Fabric
// references in the attributes are kept (they name open objects). Dup of
// nil is nil.
func (info *Info) Dup() *Info {
	if info == nil {
		return nil
	}
	d := *info
	d.Handle = nil
	d.SrcAddr = cloneBytes(info.SrcAddr)
	d.DestAddr = cloneBytes(info.DestAddr)
	if info.TxAttr != nil {
		t := *info.TxAttr
		d.TxAttr = &t
	}
	if info.RxAttr != nil {
		r := *info.RxAttr
		d.RxAttr = &r
	}
	if info.EpAttr != nil {
		e := *info.EpAttr
		e.AuthKey = cloneBytes(e.AuthKey)
		d.EpAttr = &e
	}
	if info.DomainAttr != nil {
		m := *info.DomainAttr
		m.AuthKey = cloneBytes(m.AuthKey)
		d.DomainAttr = &m
	}
	if info.FabricAttr != nil {
		f := *info.FabricAttr
		d.FabricAttr = &f
	}
	if info.Nic != nil {
		n := *info.Nic
		if n.DeviceAttr != nil {
			da := *n.DeviceAttr
			n.DeviceAttr = &da
		}
		if n.BusAttr != nil {
			ba := *n.BusAttr
			n.BusAttr = &ba
		}
		if n.LinkAttr != nil {
			la := *n.LinkAttr
			n.LinkAttr = &la
		}
		d.Nic = &n
	}
	return &d
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}
