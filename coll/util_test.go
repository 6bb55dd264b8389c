package coll_test

import (
	"encoding/binary"
	"math"
)

func putF32(b []byte, f float32) { binary.LittleEndian.PutUint32(b, math.Float32bits(f)) }
