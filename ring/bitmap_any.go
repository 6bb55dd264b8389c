package ring

// Any reports whether any bit is set, without clearing: a sleeping
// consumer's wake-up condition. It loads every word once.
func (b *Bitmap) Any() bool {
	for i := range b.w {
		if b.w[i].Load() != 0 {
			return true
		}
	}
	return false
}
