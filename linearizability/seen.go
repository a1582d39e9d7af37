package linearizability

import "slices"

// linearizedSet is the set of operations a search has linearized, with
// its hash kept as it changes: the XOR of a fixed word per operation
// (Zobrist hashing), so that looking a pair up costs no pass over the set.
type linearizedSet struct {
	words []uint64
	h     uint64
}

func newLinearizedSet(n int) *linearizedSet {
	return &linearizedSet{words: make([]uint64, (n+63)/64)}
}

func (l *linearizedSet) set(i int) {
	l.words[i/64] |= 1 << (i % 64)
	l.h ^= opKey(i)
}

func (l *linearizedSet) clear(i int) {
	l.words[i/64] &^= 1 << (i % 64)
	l.h ^= opKey(i)
}

// opKey is operation i's word in the hash: splitmix64 of i, the same in
// every run.
func opKey(i int) uint64 {
	z := uint64(i+1) * 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// seenPairs is every pair of operations linearized and set of states a
// search reached. Searches that run long reach millions, so the pairs are
// kept where the garbage collector has nothing to scan: an open-addressing
// table of indexes into columns of hashes, set ids and the linearized
// sets' words, these in chunks so that growing copies none of them. A slot
// holds the pair's index + 1 in its low half and the top half of the
// pair's hash in its high half, so that a probe reads a pair's columns
// only when the halves agree.
type seenPairs struct {
	words  int      // per pair
	table  []uint64 // by slot: 0 empty, else index + 1 | hash's top half
	shift  uint     // 64 - log2(len(table))
	hashes []uint64 // by pair
	sets   []uint32 // by pair: pset.id
	chunks [][]uint64
	n      int
}

// tagMask is the part of a slot that holds the top half of a hash.
const tagMask = 0xffffffff00000000

// chunkPairs is how many pairs' words a chunk holds.
const chunkPairs = 1 << 14

func newSeenPairs(ops int) *seenPairs {
	const slots = 1 << 10
	return &seenPairs{words: (ops + 63) / 64, table: make([]uint64, slots), shift: 64 - 10}
}

// len returns how many pairs are kept.
func (p *seenPairs) len() int { return p.n }

// add keeps the pair of l and s and reports whether it was kept already.
func (p *seenPairs) add(l *linearizedSet, s *pset) bool {
	h := l.h ^ s.h*0xff51afd7ed558ccd
	mask := uint64(len(p.table) - 1)
	for slot := (h * 0x9e3779b97f4a7c15) >> p.shift; ; slot = (slot + 1) & mask {
		e := p.table[slot]
		if e == 0 {
			p.table[slot] = uint64(p.push(h, l, s)) | h&tagMask
			if 2*p.n > len(p.table) {
				p.grow()
			}
			return false
		}
		if e&tagMask != h&tagMask {
			continue
		}
		if i := int(uint32(e)) - 1; p.hashes[i] == h && p.sets[i] == s.id && slices.Equal(p.pairWords(i), l.words) {
			return true
		}
	}
}

// push appends a pair and returns its index + 1.
func (p *seenPairs) push(h uint64, l *linearizedSet, s *pset) uint32 {
	if p.n%chunkPairs == 0 {
		p.chunks = append(p.chunks, make([]uint64, 0, chunkPairs*p.words))
	}
	last := len(p.chunks) - 1
	p.chunks[last] = append(p.chunks[last], l.words...)
	p.hashes = append(p.hashes, h)
	p.sets = append(p.sets, s.id)
	p.n++
	return uint32(p.n)
}

func (p *seenPairs) pairWords(i int) []uint64 {
	at := (i % chunkPairs) * p.words
	return p.chunks[i/chunkPairs][at : at+p.words]
}

// grow doubles the table and places every pair again.
func (p *seenPairs) grow() {
	p.table = make([]uint64, 2*len(p.table))
	p.shift--
	mask := uint64(len(p.table) - 1)
	for i, h := range p.hashes {
		slot := (h * 0x9e3779b97f4a7c15) >> p.shift
		for p.table[slot] != 0 {
			slot = (slot + 1) & mask
		}
		p.table[slot] = uint64(i+1) | h&tagMask
	}
}
