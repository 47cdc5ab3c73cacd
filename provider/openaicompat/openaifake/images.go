package openaifake

import (
	"math"
	"regexp"
	"strings"

	"github.com/cortexbuild/cortexbuild/provider/providertest/fakekit"
)

// imageBill bills an image_url part as OpenAI's vision guide documents
// (https://platform.openai.com/docs/guides/images-vision, "Calculating
// costs", read 2026-12-04), per model:
//
//   - patch models: the 32×32 patches covering the image; above 1,536 the
//     image is scaled down so that they fit (the guide's steps), then
//     patches × the model's multiplier, rounded up;
//   - tile models: detail low is the base; otherwise the image is scaled
//     to fit 2048×2048, then its shorter side down to 768 px, and billed
//     the base plus a tile price per 512×512 tile.
//
// A model the guide does not list is billed the larger of 85 + 170 a tile
// and 2.46 a patch of up to 2,500 patches. An image the fake cannot see
// (by URL, or whose header does not read) is billed the most an image can
// be under the model's rule.
func imageBill(model string) fakekit.ImageBill {
	r, ok := imageRules[undated(model)]
	if !ok {
		r = imageRule{base: 85, tile: 170, patches: 2500, percent: 246}
	}
	return func(obj map[string]any) (int, bool) {
		if obj["type"] != "image_url" {
			return 0, false
		}
		img, _ := obj["image_url"].(map[string]any)
		url, _ := img["url"].(string)
		w, h, err := fakekit.ImageSize(url)
		if !strings.HasPrefix(url, "data:") || err != nil {
			return r.most(), true
		}
		detail, _ := img["detail"].(string)
		return r.bill(w, h, detail), true
	}
}

// imageRule is one model's: patches (times percent/100) when patches > 0
// and base = 0, tiles when base > 0 and patches = 0, or the larger of both.
type imageRule struct {
	base, tile int
	patches    int
	percent    int
}

func (r imageRule) bill(w, h int, detail string) int {
	n := 0
	if r.patches > 0 {
		n = (patchCount(w, h, r.patches)*r.percent + 99) / 100
	}
	if r.base > 0 {
		n = max(n, tileTokens(w, h, detail, r.base, r.tile))
	}
	return n
}

func (r imageRule) most() int {
	n := (r.patches*r.percent + 99) / 100
	if r.base > 0 {
		n = max(n, r.base+r.tile*4*2) // a 2048×768 image: 4×2 tiles
	}
	return n
}

// patchCount follows the guide: ⌈w/32⌉·⌈h/32⌉; above limit, scale by
// √(32²·limit/(w·h)), then further so that whole patches fit the width
// and height, and count again.
func patchCount(w, h, limit int) int {
	n := ((w + 31) / 32) * ((h + 31) / 32)
	if n <= limit {
		return n
	}
	s := math.Sqrt(32 * 32 * float64(limit) / float64(w*h))
	fw, fh := float64(w)*s/32, float64(h)*s/32
	s *= min(math.Floor(fw)/fw, math.Floor(fh)/fh)
	w, h = max(1, int(float64(w)*s)), max(1, int(float64(h)*s))
	return min(limit, ((w+31)/32)*((h+31)/32))
}

func tileTokens(w, h int, detail string, base, tile int) int {
	if detail == "low" {
		return base
	}
	if long := max(w, h); long > 2048 {
		w, h = fakekit.ScaleDown(w, h, 2048/float64(long))
	}
	if short := min(w, h); short > 768 {
		w, h = fakekit.ScaleDown(w, h, 768/float64(short))
	}
	return base + tile*((w+511)/512)*((h+511)/512)
}

var imageRules = map[string]imageRule{
	"gpt-5-mini": {patches: 1536, percent: 162}, "gpt-4.1-mini": {patches: 1536, percent: 162},
	"gpt-5-nano": {patches: 1536, percent: 246}, "gpt-4.1-nano": {patches: 1536, percent: 246},
	"o4-mini": {patches: 1536, percent: 172},
	"gpt-5":   {base: 70, tile: 140}, "gpt-5-chat-latest": {base: 70, tile: 140},
	"gpt-4o": {base: 85, tile: 170}, "gpt-4.1": {base: 85, tile: 170}, "gpt-4.5-preview": {base: 85, tile: 170},
	"o1": {base: 75, tile: 150}, "o1-pro": {base: 75, tile: 150}, "o3": {base: 75, tile: 150},
	"gpt-4o-mini": {base: 2833, tile: 5667},
}

var dated = regexp.MustCompile(`-\d{4}-\d{2}-\d{2}$`)

func undated(model string) string { return dated.ReplaceAllString(model, "") }
