package pipeline

// partAcks tracks the records of one partition from the moment they are
// fetched until they are finished, in fetch (offset) order, and says how far
// the partition may be committed: up to the first record still in flight,
// never past it (the checkpointing rule of Benthos and Redpanda Connect).
// Records finish in any order; the commit position moves only over a
// contiguous prefix of finished ones. Not safe for concurrent use: the
// keyed loop owns it.
type partAcks struct {
	offs  []int64 // offsets of the tracked records, increasing
	done  []bool  // done[i]: offs[i] finished
	head  int     // offs[:head] are finished and behind the commit position
	seq0  int64   // sequence number of offs[0]
	next  int64   // next offset to commit; -1 until a prefix finished
	epoch int32   // leader epoch of the last record in the prefix
	eps   []int32 // leader epoch per tracked record
}

func newPartAcks() *partAcks { return &partAcks{next: -1} }

// add tracks a fetched record and returns its sequence number for ack.
// Offsets must increase from one add to the next.
func (p *partAcks) add(offset int64, epoch int32) int64 {
	p.offs = append(p.offs, offset)
	p.done = append(p.done, false)
	p.eps = append(p.eps, epoch)
	return p.seq0 + int64(len(p.offs)-1)
}

// last returns the offset of the last record added, or -1.
func (p *partAcks) last() int64 {
	if len(p.offs) == 0 {
		return p.next - 1
	}
	return p.offs[len(p.offs)-1]
}

// ack marks the record with sequence number seq finished and reports
// whether the commit position moved.
func (p *partAcks) ack(seq int64) bool {
	i := int(seq - p.seq0)
	if i < 0 || i >= len(p.offs) || p.done[i] {
		return false
	}
	p.done[i] = true
	moved := false
	for p.head < len(p.offs) && p.done[p.head] {
		p.next = p.offs[p.head] + 1
		p.epoch = p.eps[p.head]
		p.head++
		moved = true
	}
	// Drop the committed prefix once it is most of the slice, so memory
	// follows what is in flight, not what was ever fetched.
	if p.head > 0 && p.head >= len(p.offs)/2 {
		n := copy(p.offs, p.offs[p.head:])
		copy(p.done, p.done[p.head:])
		copy(p.eps, p.eps[p.head:])
		p.offs, p.done, p.eps = p.offs[:n], p.done[:n], p.eps[:n]
		p.seq0 += int64(p.head)
		p.head = 0
	}
	return moved
}

// committable returns the next offset to commit (the offset after the
// contiguous finished prefix) and its leader epoch; ok is false when no
// record has finished at the start of the partition's tracked range.
func (p *partAcks) committable() (next int64, epoch int32, ok bool) {
	return p.next, p.epoch, p.next >= 0
}

// pending returns how many tracked records are not behind the commit
// position (in flight, or finished behind one in flight).
func (p *partAcks) pending() int { return len(p.offs) - p.head }
