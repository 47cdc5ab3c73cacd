package pricing

import (
	"bytes"
	"image"
	"image/png"
	"strings"
	"testing"

	"github.com/cortexbuild/cortexbuild/provider"
)

func pngOf(t *testing.T, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func withImage(im provider.Image) *provider.Request {
	return &provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Parts: []provider.Part{
		{Type: provider.PartText, Text: "What is this?"},
		{Type: provider.PartImage, Image: &im},
	}}}}
}

// CountRequestTokens, which knows no provider, counts an image ImageTokens.
func TestImagesCountBeforeACall(t *testing.T) {
	text := provider.Request{Messages: []provider.Message{provider.UserText("What is this?")}}
	img := withImage(provider.Image{Data: []byte("\x89PNG"), MediaType: "image/png"})
	if got, want := CountRequestTokens(img)-CountRequestTokens(&text), int64(ImageTokens); got != want {
		t.Errorf("an image adds %d tokens, want %d", got, want)
	}
}

// The bound charges an image by the formula from its size read from its
// header, never scaled by the token factor; by the formula's maximum when
// the size is unknown (a URL, an unreadable header); and refuses when the
// formula has no maximum.
func TestImageBoundFollowsTheFormula(t *testing.T) {
	f := &Factor{nanos: 1_350_000_000}
	text := &provider.Request{Messages: []provider.Message{provider.UserText("What is this?")}}
	base, err := BoundRequestTokens(text, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	area := AreaImages{MaxEdge: 1568, PixelsPerToken: 750, MaxTokens: 1600}
	tiles := TileImages{Tile: 768, Small: 384, PerTile: 258}
	for _, c := range []struct {
		name   string
		im     provider.Image
		images provider.ImageTokens
		want   int64
	}{
		{"300×200 by area", provider.Image{Data: pngOf(t, 300, 200), MediaType: "image/png"}, area, 80},
		{"3136×100 scaled to a 1568 edge", provider.Image{Data: pngOf(t, 3136, 100), MediaType: "image/png"}, area, 105},
		{"by URL: the maximum", provider.Image{URL: "https://example.com/a.png"}, area, 1600},
		{"unreadable: the maximum", provider.Image{Data: []byte("\x89PNG"), MediaType: "image/png"}, area, 1600},
		{"800×400 in tiles", provider.Image{Data: pngOf(t, 800, 400), MediaType: "image/png"}, tiles, 2 * 258},
		{"mislabelled JPEG read as what it is", provider.Image{Data: pngOf(t, 100, 100), MediaType: "image/jpeg"}, tiles, 258},
	} {
		got, err := BoundRequestTokens(withImage(c.im), f, c.images)
		if err != nil || got-base != c.want {
			t.Errorf("%s: the image bounded at %d tokens (%v), want %d", c.name, got-base, err, c.want)
		}
	}
	_, err = BoundRequestTokens(withImage(provider.Image{Data: []byte("GIF8"), MediaType: "image/gif"}), f, tiles)
	if err == nil || !strings.Contains(err.Error(), "no maximum") {
		t.Errorf("an unreadable image on a formula with no maximum: %v, want a refusal", err)
	}
}

// Each formula's numbers at its thresholds.
func TestImageFormulas(t *testing.T) {
	var mult Factor
	if err := mult.UnmarshalText([]byte("1.62")); err != nil {
		t.Fatal(err)
	}
	openaiTiles := TileImages{Fit: 2048, Short: 768, Tile: 512, Base: 85, PerTile: 170}
	for _, c := range []struct {
		name string
		f    provider.ImageTokens
		w, h int
		want int64
	}{
		{"patches 1024×1024", PatchImages{Patch: 32, MaxPatches: 1536}, 1024, 1024, 1024},
		{"patches capped", PatchImages{Patch: 32, MaxPatches: 1536}, 1800, 2400, 1536},
		{"patches times 1.62", PatchImages{Patch: 32, MaxPatches: 1536, Multiplier: &mult}, 1000, 1000, 1659}, // ⌈1,024 × 1.62⌉
		{"tiles 1024×1024", openaiTiles, 1024, 1024, 765},
		{"tiles 2048×4096", openaiTiles, 2048, 4096, 1105},
		{"tiles 512×512", openaiTiles, 512, 512, 255},
		{"gemini small", TileImages{Tile: 768, Small: 384, PerTile: 258}, 384, 384, 258},
		{"gemini 385", TileImages{Tile: 768, Small: 384, PerTile: 258}, 385, 384, 258},
		{"gemini 769", TileImages{Tile: 768, Small: 384, PerTile: 258}, 769, 768, 516},
		{"area 1092²", AreaImages{PixelsPerToken: 750, MaxTokens: 1600}, 1092, 1092, 1590},
		{"largest of", MaxImages{FixedImages(258), AreaImages{PixelsPerToken: 750, MaxTokens: 1600}}, 10, 10, 258},
	} {
		if got := c.f.Tokens(c.w, c.h); got != c.want {
			t.Errorf("%s: %d tokens, want %d", c.name, got, c.want)
		}
	}
	if got := openaiTiles.Max(); got != 85+170*8 {
		t.Errorf("tiles' maximum %d, want %d", got, 85+170*8)
	}
	if got := (MaxImages{openaiTiles, TileImages{Tile: 768}}).Max(); got != 0 {
		t.Errorf("a maximum with an unbounded formula: %d, want 0", got)
	}
}
