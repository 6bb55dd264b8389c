package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/gofi-dev/fi"
)

// runInfo implements "perftest info", modelled on libfabric's fi_info:
// without -v one short block per info, with -v the full fi_info -v layout,
// with -l the providers and their versions. Exit status: 0 on success, 2
// for bad command-line syntax, 22 (EINVAL) for a value it cannot parse,
// and the fabric errno of a failed GetInfo (61, ENODATA, when nothing
// matches), as fi_info does.
func runInfo(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("perftest info", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		node    = fs.String("n", "", "destination `node` name or address (an FI_ADDR_STR such as fi_sockaddr_in://10.0.0.1:7471 too)")
		service = fs.String("s", "", "`service` or port number (fi_info spells the port -P; its -s, a source address, is -source here)")
		port    = fs.String("P", "", "port number, as fi_info spells it (same as -s)")
		source  = fs.Bool("source", false, "node and service name the local address (FI_SOURCE)")
		numeric = fs.Bool("numeric", false, "node is a numeric address: no name resolution (FI_NUMERICHOST)")
		caps    = fs.String("c", "", "capabilities, such as `FI_MSG|FI_TAGGED`")
		mode    = fs.String("m", "", "modes the application supports, such as `FI_CONTEXT`; default all modes")
		epType  = fs.String("t", "", "endpoint `type`, such as FI_EP_RDM")
		domain  = fs.String("d", "", "`domain` name, such as lo")
		fabric  = fs.String("f", "", "`fabric` name, such as 127.0.0.1/32")
		format  = fs.String("a", "", "address `format`, such as FI_SOCKADDR_IN")
		prov    = fs.String("p", "", "`provider` name, such as tcp, shm or shm+tcp (layered names like ofi_rxm;tcp accepted)")
		list    = fs.Bool("l", false, "list the available providers")
		verbose = fs.Bool("v", false, "verbose: print every attribute, as fi_info -v")
		version = fs.Bool("version", false, "print the library version and exit")
	)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "perftest info: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	if *version {
		fmt.Fprintf(stdout, "perftest: %s\ngofi api: %d.%d\n", fi.VersionString(), fi.MajorVersion, fi.MinorVersion)
		return 0
	}
	if *port != "" {
		if *service != "" && *service != *port {
			fmt.Fprintf(stderr, "perftest info: -s %q and -P %q disagree\n", *service, *port)
			return 2
		}
		*service = *port
	}
	hints := fi.AllocInfo()
	hints.Mode = ^fi.Mode(0) // like fi_info: the tool supports every mode unless told
	var err error
	if *caps != "" {
		if hints.Caps, err = fi.ParseFlags(*caps); err != nil {
			return invalid(stderr, "capability", *caps)
		}
	}
	if *mode != "" {
		if hints.Mode, err = fi.ParseMode(*mode); err != nil {
			return invalid(stderr, "mode", *mode)
		}
	}
	if *epType != "" {
		if hints.EpAttr.Type, err = fi.ParseEpType(*epType); err != nil {
			return invalid(stderr, "endpoint type", *epType)
		}
	}
	if *format != "" {
		if hints.AddrFormat, err = fi.ParseAddrFormat(*format); err != nil {
			return invalid(stderr, "address format", *format)
		}
	}
	hints.DomainAttr.Name = *domain
	hints.FabricAttr.Name = *fabric
	hints.FabricAttr.ProvName = *prov

	var flags fi.Flags
	if *source {
		flags |= fi.Source
	}
	if *numeric {
		flags |= fi.NumericHost
	}
	if *list {
		flags |= fi.ProvAttrOnly
	}
	infos, err := fi.GetInfo(fi.Version(fi.MajorVersion, fi.MinorVersion), *node, *service, flags, hints)
	if err != nil {
		fmt.Fprintf(stderr, "perftest info: %v\n", err)
		if e := fi.ErrnoOf(err); e > 0 && e < 256 {
			return int(e)
		}
		return 1
	}
	switch {
	case *list:
		for _, i := range infos {
			fmt.Fprintf(stdout, "%s:\n    version: %d.%d\n", i.FabricAttr.ProvName,
				fi.Major(i.FabricAttr.ProvVersion), fi.Minor(i.FabricAttr.ProvVersion))
		}
	case *verbose:
		for _, i := range infos {
			fmt.Fprintf(stdout, "---\n%s", i)
		}
	default:
		for _, i := range infos {
			fmt.Fprintf(stdout, "provider: %s\n    fabric: %s\n    domain: %s\n    version: %d.%d\n    type: %s\n    protocol: %s\n",
				i.FabricAttr.ProvName, i.FabricAttr.Name, i.DomainAttr.Name,
				fi.Major(i.FabricAttr.ProvVersion), fi.Minor(i.FabricAttr.ProvVersion),
				i.EpAttr.Type, i.EpAttr.Protocol)
		}
	}
	return 0
}

// invalid reports a value fi_info would not recognise and returns EINVAL's
// number, as fi_info exits.
func invalid(stderr io.Writer, what, v string) int {
	fmt.Fprintf(stderr, "perftest info: error: unrecognized %s: %s\n", what, v)
	return int(fi.ErrInval)
}
