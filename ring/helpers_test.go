package ring_test

import (
	"fmt"
	"runtime"
)

func spin() { runtime.Gosched() }

func errSeq(got, want uint64) error { return fmt.Errorf("sequence %d, want %d", got, want) }
