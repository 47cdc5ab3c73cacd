package anthropicfake

import (
	"math"
	"slices"
	"strings"

	"github.com/cortexbuild/cortexbuild/provider/providertest/fakekit"
)

// imageBill bills an image block as Anthropic's vision guide documents
// (https://platform.claude.com/docs/en/build-with-claude/vision, read
// 2026-12-04): an image beyond the model's native resolution is scaled
// down, keeping its aspect ratio, until its long edge and its tokens fit
// (1,568 px and about 1,600 tokens before Claude Opus 4.7; 2,576 px and
// 4,784 tokens from Opus 4.7 on), then billed ⌈w/28⌉·⌈h/28⌉ tokens (28×28
// pixel patches) or, as earlier editions of the guide say, about w·h/750:
// the fake bills the larger, never less than either. An image the fake
// cannot see (by URL, or whose header does not read) is billed the most an
// image can be.
func imageBill(model string) fakekit.ImageBill {
	edge, most := 2576, 4784
	if m := undated(model); strings.HasPrefix(m, "claude-3-") || slices.Contains(legacyVision, m) {
		edge, most = 1568, 1600
	}
	return func(obj map[string]any) (int, bool) {
		if obj["type"] != "image" {
			return 0, false
		}
		src, _ := obj["source"].(map[string]any)
		data, _ := src["data"].(string)
		w, h, err := fakekit.ImageSize(data)
		if src["type"] != "base64" || err != nil {
			return most, true
		}
		if long := max(w, h); long > edge {
			w, h = fakekit.ScaleDown(w, h, float64(edge)/float64(long))
		}
		for t := claudeImage(w, h); t > most; t = claudeImage(w, h) {
			w, h = fakekit.ScaleDown(w, h, math.Sqrt(float64(most)/float64(t)))
		}
		return claudeImage(w, h), true
	}
}

func claudeImage(w, h int) int { return max((w*h+749)/750, ((w+27)/28)*((h+27)/28)) }

// legacyVision are the Claude 4 models of the 1,568 px native resolution
// (every Claude 3 model is).
var legacyVision = []string{
	"claude-opus-4", "claude-sonnet-4", "claude-opus-4-0", "claude-sonnet-4-0", "claude-opus-4-1",
	"claude-opus-4-5", "claude-opus-4-6", "claude-sonnet-4-5", "claude-sonnet-4-6", "claude-haiku-4-5",
}

// undated strips a -YYYYMMDD snapshot suffix.
func undated(model string) string {
	if i := strings.LastIndexByte(model, '-'); i > 0 && len(model)-i == 9 && strings.Trim(model[i+1:], "0123456789") == "" {
		return model[:i]
	}
	return model
}
