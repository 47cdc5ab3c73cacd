package pricing

import (
	"math"

	"github.com/cortexbuild/cortexbuild/provider"
)

// Image formulas: neutral shapes of how providers bill an image by its
// pixels. Each adapter picks one per model, with its vendor's documented
// numbers (see docs/pricing.md), and the estimate bounds every image with
// it ([BoundRequestTokens]). Every formula is an upper bound of its shape:
// scaling an image down, as providers do with large ones, never raises it.

// PatchImages bills an image by the Patch×Patch pixel squares that cover
// it, at most MaxPatches (larger images are scaled down to fit), times
// Multiplier (nil: 1): ⌈Multiplier × min(MaxPatches, ⌈w/Patch⌉·⌈h/Patch⌉)⌉,
// w×h first scaled down to a long edge of MaxEdge (0: no limit).
type PatchImages struct {
	Patch, MaxEdge int
	MaxPatches     int64
	Multiplier     *Factor
}

// Tokens implements [provider.ImageTokens].
func (p PatchImages) Tokens(w, h int) int64 {
	w, h = fitEdge(w, h, p.MaxEdge)
	return p.Multiplier.Scale(min(p.MaxPatches, ceilDiv(w, p.Patch)*ceilDiv(h, p.Patch)))
}

// Max implements [provider.ImageTokens].
func (p PatchImages) Max() int64 { return p.Multiplier.Scale(p.MaxPatches) }

// AreaImages bills an image by its area, one token per PixelsPerToken
// pixels, at most MaxTokens (larger images are scaled down to fit):
// min(MaxTokens, ⌈w·h/PixelsPerToken⌉), w×h first scaled down to a long
// edge of MaxEdge (0: no limit).
type AreaImages struct {
	MaxEdge                   int
	PixelsPerToken, MaxTokens int64
}

// Tokens implements [provider.ImageTokens].
func (a AreaImages) Tokens(w, h int) int64 {
	w, h = fitEdge(w, h, a.MaxEdge)
	return min(a.MaxTokens, (int64(w)*int64(h)+a.PixelsPerToken-1)/a.PixelsPerToken)
}

// Max implements [provider.ImageTokens].
func (a AreaImages) Max() int64 { return a.MaxTokens }

// TileImages bills an image by the Tile×Tile squares that cover it after
// scaling: first down to fit a Fit×Fit square (0: no fitting), then down
// so that its shorter side is at most Short (0: none). It costs Base plus
// PerTile per tile; an image of at most Small pixels on both sides is one
// tile. Scaled sides are rounded up, so the count never falls short.
type TileImages struct {
	Fit, Short, Tile, Small int
	Base, PerTile           int64
}

// Tokens implements [provider.ImageTokens].
func (t TileImages) Tokens(w, h int) int64 {
	if w <= t.Small && h <= t.Small {
		return t.Base + t.PerTile
	}
	fw, fh := float64(w), float64(h)
	if f := float64(t.Fit); t.Fit > 0 && max(fw, fh) > f {
		s := f / max(fw, fh)
		fw, fh = fw*s, fh*s
	}
	if s := float64(t.Short); t.Short > 0 && min(fw, fh) > s {
		r := s / min(fw, fh)
		fw, fh = fw*r, fh*r
	}
	tiles := ceilDiv(int(math.Ceil(fw)), t.Tile) * ceilDiv(int(math.Ceil(fh)), t.Tile)
	return t.Base + t.PerTile*tiles
}

// Max implements [provider.ImageTokens]: the tiles of a Fit×Short image,
// or 0 (no maximum) without a Fit.
func (t TileImages) Max() int64 {
	if t.Fit == 0 {
		return 0
	}
	short := t.Fit
	if t.Short > 0 {
		short = min(t.Short, t.Fit)
	}
	return t.Base + t.PerTile*ceilDiv(t.Fit, t.Tile)*ceilDiv(short, t.Tile)
}

// FixedImages bills every image the same number of tokens at most.
type FixedImages int64

// Tokens implements [provider.ImageTokens].
func (f FixedImages) Tokens(int, int) int64 { return int64(f) }

// Max implements [provider.ImageTokens].
func (f FixedImages) Max() int64 { return int64(f) }

// MaxImages bounds an image by the largest of several formulas: for a
// provider whose documents give more than one rule, or a model whose rule
// is not documented.
type MaxImages []provider.ImageTokens

// Tokens implements [provider.ImageTokens].
func (m MaxImages) Tokens(w, h int) int64 {
	var n int64
	for _, f := range m {
		n = max(n, f.Tokens(w, h))
	}
	return n
}

// Max implements [provider.ImageTokens]: 0 when any formula has no maximum.
func (m MaxImages) Max() int64 {
	var n int64
	for _, f := range m {
		x := f.Max()
		if x == 0 {
			return 0
		}
		n = max(n, x)
	}
	return n
}

func ceilDiv(n, d int) int64 { return int64((n + d - 1) / d) }

// fitEdge scales w×h down, keeping its aspect ratio, to a long edge of at
// most edge (0: no limit), rounding the sides up.
func fitEdge(w, h, edge int) (int, int) {
	long := max(w, h)
	if edge <= 0 || long <= edge {
		return w, h
	}
	s := float64(edge) / float64(long)
	return int(math.Ceil(float64(w) * s)), int(math.Ceil(float64(h) * s))
}

// imageTokens bounds one image with images (nil: [ImageTokens] each):
// by its size read from the header of its bytes, else by the formula's
// maximum. ok is false when neither is known.
func imageTokens(im *provider.Image, images provider.ImageTokens) (n int64, ok bool) {
	if images == nil {
		return ImageTokens, true
	}
	if w, h, err := im.Size(); err == nil {
		return images.Tokens(w, h), true
	}
	n = images.Max()
	return n, n > 0
}
