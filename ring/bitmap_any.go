package ring

// Peek returns word w's bits without clearing them (0 for an index out of
// range): a sleeping consumer's wake-up condition.
func (b *Bitmap) Peek(w int) uint64 {
	if uint(w) >= uint(len(b.w)) {
		return 0
	}
	return b.w[w].Load()
}
