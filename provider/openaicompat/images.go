package openaicompat

import (
	"github.com/cortexbuild/cortexbuild/pricing"
	"github.com/cortexbuild/cortexbuild/provider"
)

// Images bounds what model, priced in namespace ns, bills for one image.
// OpenAI's vision guide (https://platform.openai.com/docs/guides/images-vision,
// "Calculating costs", read 2026-12-04) has two rules, per model:
//
//   - patches: the 32×32 pixel patches that cover the image, at most 1,536
//     (a larger image is scaled down to fit), times the model's multiplier
//     (gpt-5-mini and gpt-4.1-mini 1.62, gpt-5-nano and gpt-4.1-nano 2.46,
//     o4-mini 1.72);
//   - tiles (detail high, what detail auto can choose; the adapter sends
//     no detail): scaled to fit 2048×2048, then its shorter side down to
//     768 px, 512×512 tiles at the model's tile price plus a base (gpt-5
//     70 + 140 a tile; gpt-4o, gpt-4.1 and gpt-4.5 85 + 170; o1 and o3
//     75 + 150; gpt-4o-mini 2,833 + 5,667).
//
// A model the guide does not list (gpt-5.1 and later) is bounded by the
// larger of 85 + 170 a tile and 2.46 a patch of up to 2,500 patches; a
// model of another namespace (a router's Claude or Gemini model, a
// catalog file's own namespace) also by Claude's rules (at most 4,784) and
// Gemini's tiles (258 each, no maximum). A local namespace prices at zero
// whatever the images.
func Images(ns, model string) provider.ImageTokens {
	if ns != "openai" {
		return routedImages
	}
	if f, ok := openAIImages[pricing.Undated(model)]; ok {
		return f
	}
	return unlistedImages
}

func patches(multiplier string) pricing.PatchImages {
	var f pricing.Factor
	if err := f.UnmarshalText([]byte(multiplier)); err != nil {
		panic(err)
	}
	return pricing.PatchImages{Patch: 32, MaxPatches: 1536, Multiplier: &f}
}

func tiles(base, perTile int64) pricing.TileImages {
	return pricing.TileImages{Fit: 2048, Short: 768, Tile: 512, Base: base, PerTile: perTile}
}

var openAIImages = map[string]provider.ImageTokens{
	"gpt-5-mini": patches("1.62"), "gpt-4.1-mini": patches("1.62"),
	"gpt-5-nano": patches("2.46"), "gpt-4.1-nano": patches("2.46"),
	"o4-mini": patches("1.72"),
	"gpt-5":   tiles(70, 140), "gpt-5-chat-latest": tiles(70, 140),
	"gpt-4o": tiles(85, 170), "gpt-4.1": tiles(85, 170), "gpt-4.5-preview": tiles(85, 170),
	"o1": tiles(75, 150), "o1-pro": tiles(75, 150), "o3": tiles(75, 150),
	"gpt-4o-mini": tiles(2833, 5667),
}

var (
	unlistedImages = pricing.MaxImages{tiles(85, 170), pricing.PatchImages{Patch: 32, MaxPatches: 2500, Multiplier: patches("2.46").Multiplier}}
	routedImages   = pricing.MaxImages{unlistedImages, pricing.AreaImages{MaxEdge: 2576, PixelsPerToken: 750, MaxTokens: 4784},
		pricing.PatchImages{Patch: 28, MaxEdge: 2576, MaxPatches: 4784}, pricing.TileImages{Tile: 768, Small: 384, PerTile: 258}}
)
