package gemini

import (
	"strings"

	"github.com/cortexbuild/cortexbuild/pricing"
	"github.com/cortexbuild/cortexbuild/provider"
)

// Images bounds what Gemini model bills for one image. Google's token
// guide (https://ai.google.dev/gemini-api/docs/tokens, read 2026-12-04):
// an image of at most 384 px on both sides is 258 tokens; a larger one is
// cut into 768×768 tiles of 258 tokens each (no maximum). From Gemini 3 on,
// media_resolution sets the most an image may take, 1,120 tokens at the
// default for images (MEDIA_RESOLUTION_HIGH; the adapter sends none):
// https://ai.google.dev/gemini-api/docs/media-resolution (read
// 2026-12-04). A model of another generation is bounded by the larger of
// the tiles and 2,240 (MEDIA_RESOLUTION_ULTRA_HIGH).
func Images(model string) provider.ImageTokens {
	m := pricing.Undated(model)
	switch {
	case strings.HasPrefix(m, "gemini-3"):
		return pricing.FixedImages(1120)
	case strings.HasPrefix(m, "gemini-2"), strings.HasPrefix(m, "gemini-1"):
		return geminiTiles
	}
	return pricing.MaxImages{geminiTiles, pricing.FixedImages(2240)}
}

var geminiTiles = pricing.TileImages{Tile: 768, Small: 384, PerTile: 258}
