package geminifake

import (
	"strings"

	"github.com/cortexbuild/cortexbuild/provider/providertest/fakekit"
)

// imageBill bills an inlineData image part as Google documents, by model:
// up to Gemini 2.5 (https://ai.google.dev/gemini-api/docs/tokens, read
// 2026-12-04) an image of at most 384 px on both sides is 258 tokens, a
// larger one 258 for each 768×768 tile that covers it; from Gemini 3 on
// (https://ai.google.dev/gemini-api/docs/media-resolution, read
// 2026-12-04) an image takes at most 1,120 tokens at the default media
// resolution, which the fake bills whatever the image. A part whose header
// does not read is counted as text, as before (the adapter refuses to
// price one on a model with no maximum).
func imageBill(model string) fakekit.ImageBill {
	model = strings.TrimPrefix(model, "models/")
	return func(obj map[string]any) (int, bool) {
		blob, ok := obj["inlineData"].(map[string]any)
		if !ok {
			return 0, false
		}
		data, _ := blob["data"].(string)
		w, h, err := fakekit.ImageSize(data)
		switch {
		case err != nil:
			return 0, false
		case strings.HasPrefix(model, "gemini-3"):
			return 1120, true
		case w <= 384 && h <= 384:
			return 258, true
		}
		return 258 * ((w + 767) / 768) * ((h + 767) / 768), true
	}
}
