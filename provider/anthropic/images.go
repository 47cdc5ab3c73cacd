package anthropic

import (
	"slices"
	"strings"

	"github.com/cortexbuild/cortexbuild/pricing"
	"github.com/cortexbuild/cortexbuild/provider"
)

// Images bounds what Claude model bills for one image. Anthropic's vision
// guide (https://platform.claude.com/docs/en/build-with-claude/vision,
// read 2026-12-04) scales an image larger than the model's native
// resolution down, keeping its aspect ratio, and bills it by 28×28 pixel
// patches, ⌈w/28⌉·⌈h/28⌉; earlier editions of the same guide give about
// w·h/750 tokens. The bound is the larger of the two, capped at the
// native resolution's most: 1,600 tokens (long edge 1,568 px, about 1.15
// megapixels) for the models before Claude Opus 4.7, 4,784 (long edge
// 2,576 px) for Opus 4.7 and later, and for any model not named below.
func Images(model string) provider.ImageTokens {
	edge, most := 2576, int64(4784)
	if m := pricing.Undated(model); strings.HasPrefix(m, "claude-3-") || slices.Contains(legacyVision, m) {
		edge, most = 1568, 1600
	}
	return pricing.MaxImages{pricing.PatchImages{Patch: 28, MaxEdge: edge, MaxPatches: most}, pricing.AreaImages{MaxEdge: edge, PixelsPerToken: 750, MaxTokens: most}}
}

// legacyVision are the Claude 4 models whose native image resolution is
// 1,568 px on the long edge (Claude 3 models all are).
var legacyVision = []string{
	"claude-opus-4", "claude-sonnet-4", "claude-opus-4-0", "claude-sonnet-4-0", "claude-opus-4-1",
	"claude-opus-4-5", "claude-opus-4-6", "claude-sonnet-4-5", "claude-sonnet-4-6", "claude-haiku-4-5",
}
