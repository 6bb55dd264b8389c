package getcpu

import "github.com/klauspost/cpuid/v2"

// fastReaders are the fast readers this CPU has.
func fastReaders() map[string]func() int {
	m := map[string]func() int{}
	if hasRDPID() {
		m["RDPID"] = viaRDPIDRead
	}
	if cpuid.CPU.Has(cpuid.RDTSCP) && tscAllowed() {
		m["RDTSCP"] = viaRDTSCPRead
	}
	return m
}
