package fi_test

import (
	"fmt"
	"log"
	"time"

	"github.com/gofi-dev/fi"
)

// openDomain opens the first domain of provider prov.
func openDomain(prov string) (*fi.Fabric, *fi.Domain) {
	hints := fi.AllocInfo()
	hints.FabricAttr.ProvName = prov
	infos, err := fi.GetInfo(fi.Version(2, 0), "", "", 0, hints)
	if err != nil {
		log.Fatal(err)
	}
	fab, err := fi.OpenFabric(infos[0].FabricAttr)
	if err != nil {
		log.Fatal(err)
	}
	dom, err := fab.OpenDomain(infos[0])
	if err != nil {
		log.Fatal(err)
	}
	return fab, dom
}

// Register a buffer for peers to write into: they name it by key, and
// address it from the registration's offset.
func ExampleDomain_RegMR() {
	fab, dom := openDomain("tcp")
	defer fab.Close()
	defer dom.Close()
	buf := make([]byte, 4096)
	mr, err := dom.RegMR(buf, fi.RemoteWrite|fi.RemoteRead, 0, 42, 0)
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	fmt.Println(mr.Key(), len(mr.Bytes()))
	// Output: 42 4096
}

// Allocate memory that local peers map: over shm their writes are plain
// memory copies and their atomics the processor's own.
func ExampleDomain_AllocMR() {
	fab, dom := openDomain("shm")
	defer fab.Close()
	defer dom.Close()
	mr, err := dom.AllocMR(1<<20, fi.RemoteWrite|fi.RemoteRead)
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	fmt.Println(len(mr.Bytes()))
	// Output: 1048576
}

// A counter counts completions; Wait blocks (without spinning) until it
// reaches a threshold.
func ExampleCntr() {
	fab, dom := openDomain("tcp")
	defer fab.Close()
	defer dom.Close()
	c, err := dom.OpenCntr(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	go func() {
		for range 3 {
			c.Add(1)
		}
	}()
	if err := c.Wait(3, 10*time.Second); err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.Read(), c.ReadErr())
	// Output: 3 0
}

// openEndpoint opens an enabled endpoint with RMA of provider prov, its
// CQ and AV.
func openEndpoint(prov string, dom *fi.Domain) (*fi.Endpoint, *fi.CQ, *fi.AV) {
	hints := fi.AllocInfo()
	hints.Caps = fi.RMA | fi.Msg
	hints.FabricAttr.ProvName = prov
	node := ""
	if prov == "tcp" {
		node = "127.0.0.1"
	}
	infos, err := fi.GetInfo(fi.Version(2, 0), node, "", 0, hints)
	if err != nil {
		log.Fatal(err)
	}
	cq, err := dom.OpenCQ(nil)
	if err != nil {
		log.Fatal(err)
	}
	av, err := dom.OpenAV(&fi.AVAttr{Type: fi.AVTable})
	if err != nil {
		log.Fatal(err)
	}
	ep, err := dom.OpenEndpoint(infos[0])
	if err != nil {
		log.Fatal(err)
	}
	if err := ep.BindAV(av); err != nil {
		log.Fatal(err)
	}
	if err := ep.BindCQ(cq, fi.Transmit|fi.Recv); err != nil {
		log.Fatal(err)
	}
	if err := ep.Enable(); err != nil {
		log.Fatal(err)
	}
	return ep, cq, av
}

// Write into a peer's registered memory and read it back: the peer's
// application does nothing (its transport executes the requests).
func ExampleEndpoint_Write() {
	fab, dom := openDomain("tcp")
	defer fab.Close()
	defer dom.Close()
	target, tcq, tav := openEndpoint("tcp", dom)
	initiator, cq, av := openEndpoint("tcp", dom)
	defer func() {
		initiator.Close()
		target.Close()
		cq.Close()
		tcq.Close()
		av.Close()
		tav.Close()
	}()
	window := make([]byte, 64)
	mr, err := dom.RegMR(window, fi.RemoteWrite|fi.RemoteRead, 0, 7, 0)
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	name, _ := target.Name()
	peer, err := av.Insert([][]byte{name}, 0)
	if err != nil {
		log.Fatal(err)
	}
	wait := func() {
		var e [1]fi.CQEntry
		if _, err := cq.Sread(e[:], 10*time.Second); err != nil {
			log.Fatal(err)
		}
	}
	if err := initiator.Write([]byte("hello, window"), nil, peer[0], 8, mr.Key(), nil); err != nil {
		log.Fatal(err)
	}
	wait() // delivery complete: the bytes are in place
	got := make([]byte, 13)
	if err := initiator.Read(got, nil, peer[0], 8, mr.Key(), nil); err != nil {
		log.Fatal(err)
	}
	wait()
	fmt.Println(string(mr.Bytes()[8:21]), string(got)) // Bytes orders this read after the peer's write
	// Output: hello, window hello, window
}
