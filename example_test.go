package fi_test

import (
	"errors"
	"fmt"
	"log"

	"github.com/gofi-dev/fi"
)

// The README's example: discover, then open a fabric and a domain.
func Example() {
	hints := fi.AllocInfo()
	hints.Caps = fi.Msg | fi.Tagged
	hints.EpAttr.Type = fi.EpRDM
	infos, err := fi.GetInfo(fi.Version(2, 0), "", "", 0, hints) // best first: shm, then tcp
	if err != nil {
		log.Fatal(err) // errors.Is(err, fi.ErrNoData) when nothing matches
	}
	fab, err := fi.OpenFabric(infos[0].FabricAttr)
	if err != nil {
		log.Fatal(err)
	}
	defer fab.Close()
	dom, err := fab.OpenDomain(infos[0])
	if err != nil {
		log.Fatal(err)
	}
	defer dom.Close()
	fmt.Println(infos[0].FabricAttr.ProvName, infos[0].Caps)
	// Output: shm FI_MSG | FI_TAGGED | FI_RECV | FI_SEND | FI_MULTI_RECV | FI_LOCAL_COMM
}

func ExampleGetInfo_noMatch() {
	hints := fi.AllocInfo()
	hints.EpAttr.Type = fi.EpMsg // gofi provides reliable-datagram endpoints only
	infos, err := fi.GetInfo(fi.Version(2, 0), "", "", 0, hints)
	fmt.Println(infos == nil, errors.Is(err, fi.ErrNoData))
	// Output: true true
}

func ExampleParseAddrStr() {
	a, err := fi.ParseAddrStr("fi_sockaddr_in6://[fe80::6:12]:7471?qos=3")
	if err != nil {
		log.Fatal(err)
	}
	qos, _ := a.Param("qos")
	fmt.Println(a.AddrFormat(), a.Node, a.Service, qos)
	// Output: FI_SOCKADDR_IN6 fe80::6:12 7471 3
}
