package fakekit

import (
	"math/rand/v2"
	"sync"
)

// Rand is a random source safe for concurrent use, seeded for
// reproducible ids when a seed is given.
type Rand struct {
	mu  sync.Mutex
	rng *rand.Rand
}

// NewRand returns a PCG source seeded from *seed, or randomly when seed is
// nil. The same seed always yields the same sequence.
func NewRand(seed *uint64) *Rand {
	var src rand.Source
	if seed != nil {
		src = rand.NewPCG(*seed, *seed^0x9e3779b97f4a7c15)
	} else {
		src = rand.NewPCG(rand.Uint64(), rand.Uint64())
	}
	return &Rand{rng: rand.New(src)}
}

// String returns n random characters of alphabet (one IntN draw each).
func (r *Rand) String(alphabet string, n int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.rng.IntN(len(alphabet))]
	}
	return string(b)
}

// Bytes returns n random bytes (one UintN(256) draw each).
func (r *Rand) Bytes(n int) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.rng.UintN(256))
	}
	return b
}

// IntN returns a random int in [0, n).
func (r *Rand) IntN(n int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rng.IntN(n)
}
