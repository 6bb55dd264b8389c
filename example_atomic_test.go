package fi_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log"

	"github.com/gofi-dev/fi"
)

// A fetch-add on a peer's counter: the target registers a word, the
// initiator adds to it and gets the old value back. The target's
// application makes no call for it.
func ExampleEndpoint_FetchAtomic() {
	open := func() (*fi.Domain, *fi.Endpoint, *fi.AV, *fi.CQ) {
		hints := fi.AllocInfo()
		hints.Caps = fi.Msg | fi.Atomic
		hints.FabricAttr.ProvName = "tcp"
		infos, err := fi.GetInfo(fi.Version(2, 0), "127.0.0.1", "", 0, hints)
		if err != nil {
			log.Fatal(err)
		}
		fab, _ := fi.OpenFabric(infos[0].FabricAttr)
		dom, _ := fab.OpenDomain(infos[0])
		av, _ := dom.OpenAV(&fi.AVAttr{Type: fi.AVTable})
		cq, _ := dom.OpenCQ(nil)
		ep, err := dom.OpenEndpoint(infos[0])
		if err != nil {
			log.Fatal(err)
		}
		ep.BindAV(av)
		ep.BindCQ(cq, fi.Transmit|fi.Recv)
		if err := ep.Enable(); err != nil {
			log.Fatal(err)
		}
		return dom, ep, av, cq
	}
	tdom, tep, _, _ := open() // the target
	word := make([]byte, 8)
	binary.NativeEndian.PutUint64(word, 40)
	mr, err := tdom.RegMR(word, fi.RemoteRead|fi.RemoteWrite, 0, 1, 0)
	if err != nil {
		log.Fatal(err)
	}
	name, _ := tep.Name()

	_, ep, av, cq := open() // the initiator
	addrs, _ := av.Insert([][]byte{name}, 0)
	if n, err := ep.FetchAtomicValid(fi.Uint64, fi.OpSum); err == nil {
		fmt.Println("up to", n, "elements per call")
	}
	two, old := make([]byte, 8), make([]byte, 8)
	binary.NativeEndian.PutUint64(two, 2)
	if err := ep.FetchAtomic(two, 1, nil, old, nil, addrs[0], 0, mr.Key(), fi.Uint64, fi.OpSum, nil); err != nil {
		log.Fatal(err)
	}
	var e [1]fi.CQEntry
	for {
		if n, err := cq.Read(e[:]); n == 1 {
			break
		} else if !errors.Is(err, fi.ErrAgain) {
			log.Fatal(err)
		}
	}
	fmt.Println(e[0].Flags, binary.NativeEndian.Uint64(old), binary.NativeEndian.Uint64(mr.Bytes()))
	// Output:
	// up to 512 elements per call
	// FI_ATOMIC | FI_READ 40 42
}
