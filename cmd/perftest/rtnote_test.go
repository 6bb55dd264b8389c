package main

import (
	"strings"
	"testing"
)

func TestRTNoteFor(t *testing.T) {
	for _, tc := range []struct {
		policy int
		want   string // "" for no note, else a word the note must hold
	}{
		{0, ""},                        // SCHED_OTHER
		{3, ""},                        // SCHED_BATCH
		{5, ""},                        // SCHED_IDLE
		{6, ""},                        // SCHED_DEADLINE: not what chrt -f/-r set
		{1, "SCHED_FIFO"},              // chrt -f
		{2, "SCHED_RR"},                // chrt -r
		{1 | 0x40000000, "SCHED_FIFO"}, // with SCHED_RESET_ON_FORK
		{0x40000000, ""},               // SCHED_OTHER with SCHED_RESET_ON_FORK
	} {
		got := rtNoteFor(tc.policy)
		if tc.want == "" {
			if got != "" {
				t.Errorf("rtNoteFor(%#x) = %q; want no note", tc.policy, got)
			}
			continue
		}
		if !strings.Contains(got, tc.want) || !strings.Contains(got, "rtguard.sh") {
			t.Errorf("rtNoteFor(%#x) = %q; want a note naming %s and rtguard.sh", tc.policy, got, tc.want)
		}
	}
}

// A test process runs SCHED_OTHER (go test under chrt aside): no note.
func TestRTNote_NormalProcess(t *testing.T) {
	if got := rtNote(); got != "" && !strings.Contains(got, "SCHED_") {
		t.Errorf("rtNote() = %q", got)
	}
}
