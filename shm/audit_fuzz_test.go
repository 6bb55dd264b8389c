package shm

import "testing"

// FuzzSvcEntName: the channel name an initiator writes into a service
// segment's entry (peer-writable shared memory) is read by the target's
// executor with svc.entName: any bytes are refused or give a valid name,
// never a panic or a read past the entry (every entry of the segment is
// filled, the first and the last tried).
func FuzzSvcEntName(f *testing.F) {
	good := make([]byte, svcEntSize)
	name := NewName()
	ne.PutUint32(good[entLen:], uint32(len(name)))
	copy(good[entName:], name)
	f.Add(good)
	f.Add([]byte{})
	long := make([]byte, svcEntSize)
	ne.PutUint32(long[entLen:], 1<<31)
	f.Add(long)
	f.Fuzz(func(t *testing.T, ent []byte) {
		s := &svc{mem: make([]byte, svcSize())}
		for i := 0; i < SvcEntries; i++ {
			copy(s.mem[svcEntOff+i*svcEntSize:svcEntOff+(i+1)*svcEntSize], ent)
		}
		for _, i := range []int{0, SvcEntries - 1} {
			got, err := s.entName(i)
			if err != nil {
				continue
			}
			if len(got) == 0 || len(got) > MaxNameLen || ValidName(got) != nil {
				t.Fatalf("entry %d: accepted name %q", i, got)
			}
		}
	})
}
