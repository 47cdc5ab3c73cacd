package providertest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/color/palette"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/cortexbuild/cortexbuild/provider"
)

// ImageSizes are the sizes the image checks send: tiny, each side of the
// providers' thresholds (Gemini's 384 and 768, OpenAI's 512, 768 and 2048,
// Claude's 1,092, 1,568 and 2,576), huge, and extreme aspect ratios.
var ImageSizes = [][2]int{
	{1, 1}, {28, 28}, {32, 33}, {200, 200}, {384, 384}, {385, 384}, {512, 512}, {513, 512},
	{768, 768}, {769, 768}, {1000, 1000}, {1092, 1092}, {1568, 1568}, {1569, 882},
	{2048, 2048}, {2049, 1024}, {2576, 1449}, {4000, 3000}, {8000, 8000},
	{1, 8000}, {8000, 1}, {40, 6000}, {6000, 40}, {16383, 16383},
}

// smallestHeaderOnly is the pixel count from which [TestImage] encodes a
// small image and writes the size into its header: the providers and the
// estimate read only the header, and encoding a huge image takes seconds.
const smallestHeaderOnly = 1 << 21

// TestImage returns an image file of mediaType (one of
// [provider.ImageMediaTypes]) whose header says w×h pixels. PNG, JPEG and
// GIF are written by the standard library's encoders (above 2 megapixels,
// a 1×1 image with the header's size set to w×h: the pixels are never
// read); WebP, which the standard library cannot write, is a lossless
// (VP8L) header alone. Images are cached.
func TestImage(mediaType string, w, h int) []byte {
	key := fmt.Sprintf("%s %dx%d", mediaType, w, h)
	testImages.Lock()
	defer testImages.Unlock()
	if b, ok := testImages.m[key]; ok {
		return b
	}
	b := encodeTestImage(mediaType, w, h)
	if testImages.m == nil {
		testImages.m = map[string][]byte{}
	}
	testImages.m[key] = b
	return b
}

var testImages struct {
	sync.Mutex
	m map[string][]byte
}

func encodeTestImage(mediaType string, w, h int) []byte {
	if mediaType == "image/webp" {
		v := uint32(w-1) | uint32(h-1)<<14
		b := []byte("RIFF\x00\x00\x00\x00WEBPVP8L\x05\x00\x00\x00\x2f\x00\x00\x00\x00\x00")
		binary.LittleEndian.PutUint32(b[21:], v)
		binary.LittleEndian.PutUint32(b[4:], uint32(len(b)-8))
		return b
	}
	ew, eh := w, h
	if w*h >= smallestHeaderOnly {
		ew, eh = 1, 1
	}
	var buf bytes.Buffer
	var err error
	switch mediaType {
	case "image/png":
		err = png.Encode(&buf, image.NewGray(image.Rect(0, 0, ew, eh)))
	case "image/jpeg":
		err = jpeg.Encode(&buf, image.NewGray(image.Rect(0, 0, ew, eh)), nil)
	case "image/gif":
		err = gif.Encode(&buf, image.NewPaletted(image.Rect(0, 0, ew, eh), palette.Plan9), nil)
	default:
		panic("no test image of type " + mediaType)
	}
	if err != nil {
		panic(err)
	}
	b := buf.Bytes()
	if ew != w || eh != h {
		setHeaderSize(mediaType, b, w, h)
	}
	return b
}

// setHeaderSize writes w×h into an encoded image's header.
func setHeaderSize(mediaType string, b []byte, w, h int) {
	switch mediaType {
	case "image/png": // IHDR data at 16, its CRC over type and data at 29
		binary.BigEndian.PutUint32(b[16:], uint32(w))
		binary.BigEndian.PutUint32(b[20:], uint32(h))
		binary.BigEndian.PutUint32(b[29:], crc32.ChecksumIEEE(b[12:29]))
	case "image/gif": // logical screen, then the image descriptor
		binary.LittleEndian.PutUint16(b[6:], uint16(w))
		binary.LittleEndian.PutUint16(b[8:], uint16(h))
	case "image/jpeg": // the SOF0 segment's height and width
		i := bytes.Index(b, []byte{0xff, 0xc0})
		binary.BigEndian.PutUint16(b[i+5:], uint16(h))
		binary.BigEndian.PutUint16(b[i+7:], uint16(w))
	}
}

// NoisePNG returns a w×h PNG of random pixels (seeded), which PNG cannot
// compress: about 4·w·h bytes, the kind of image whose base64 is hundreds
// of kilobytes for a few thousand pixels' tokens.
func NoisePNG(w, h int) []byte {
	rnd := rand.New(rand.NewPCG(uint64(w), uint64(h)))
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = byte(rnd.UintN(256))
	}
	img.Set(0, 0, color.NRGBA{A: 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// imageRequest is a user turn of a short question and one inline image.
func imageRequest(model string, im provider.Image, maxTokens int) *provider.Request {
	parts := []provider.Part{{Type: provider.PartText, Text: "What is in this image?"}}
	if im.Data != nil || im.URL != "" {
		parts = append(parts, provider.Part{Type: provider.PartImage, Image: &im})
	}
	return &provider.Request{Model: model, MaxTokens: maxTokens, Messages: []provider.Message{{Role: provider.RoleUser, Parts: parts}}}
}

// visionModels are the adapter's tier models that take images.
func visionModels(e *Env) []string {
	var out []string
	seen := map[string]bool{}
	models := []string{e.Model}
	if tm, ok := e.Adapter.(provider.TierMapper); ok {
		for _, t := range provider.Tiers {
			models = append(models, tm.ModelFor(t))
		}
	}
	for _, m := range models {
		if m != "" && !seen[m] && modelCapabilities(e.Adapter, m).Has(provider.CapVision) {
			seen[m] = true
			out = append(out, m)
		}
	}
	return out
}

// estimateBoundImages: for every tier model that takes images, every size
// of [ImageSizes] in every inline format, what the fake bills (by the
// provider's documented formula, from the image's real size) is at most
// the estimate, and the estimate's share for the image is at most twice
// the image's share of the bill (an image is no longer reserved as the
// text of its base64).
func estimateBoundImages(t *testing.T, e *Env) {
	models := visionModels(e)
	if e.Pricer == nil || len(models) == 0 {
		t.Skip("no priced model that takes images")
	}
	for _, model := range models {
		base := callCost(t, e, imageRequest(model, provider.Image{}, 16))
		for _, size := range ImageSizes {
			for _, mt := range provider.ImageMediaTypes {
				im := provider.Image{Data: TestImage(mt, size[0], size[1]), MediaType: mt}
				c := callCost(t, e, imageRequest(model, im, 16))
				what := fmt.Sprintf("%s, %s %d×%d", model, mt, size[0], size[1])
				if c.billed > c.estimate {
					t.Errorf("%s: billed $%s (usage %+v) above the estimate $%s", what, c.billed, c.usage, c.estimate)
				}
				if img, reserved := c.billed-base.billed, c.estimate-base.estimate; reserved > 2*img {
					t.Errorf("%s: the image reserves $%s for $%s billed (more than twice)", what, reserved, img)
				}
			}
		}
	}
}

// estimateBoundLargeImage: a photo-like image of about 300 KB (600 KB of
// base64 on the wire) costs what its pixels cost, not what its base64
// would as text, and the estimate bounds it.
func estimateBoundLargeImage(t *testing.T, e *Env) {
	models := visionModels(e)
	if e.Pricer == nil || len(models) == 0 {
		t.Skip("no priced model that takes images")
	}
	data := NoisePNG(280, 280)
	for _, model := range models {
		base := callCost(t, e, imageRequest(model, provider.Image{}, 300))
		c := callCost(t, e, imageRequest(model, provider.Image{Data: data, MediaType: "image/png"}, 300))
		t.Logf("%s: a %d KB PNG (280×280): estimate $%s, billed $%s (%d input tokens); without the image $%s, $%s",
			model, len(data)>>10, c.estimate, c.billed, c.usage.InputTokens, base.estimate, base.billed)
		if c.billed > c.estimate {
			t.Errorf("%s: billed $%s (usage %+v) above the estimate $%s", model, c.billed, c.usage, c.estimate)
		}
		// Billed as the text of its base64 the image alone would be some
		// 100,000 tokens; by its pixels it is a few hundred.
		if c.usage.InputTokens-base.usage.InputTokens > 2000 {
			t.Errorf("%s: the image billed %d input tokens: billed as text, not by its 280×280 pixels", model, c.usage.InputTokens-base.usage.InputTokens)
		}
	}
}

type costs struct {
	estimate, billed provider.Money
	usage            provider.Usage
}

// callCost estimates req, invokes it with a derived-usage reply and
// returns both costs.
func callCost(t *testing.T, e *Env, req *provider.Request) costs {
	t.Helper()
	est, err := e.Adapter.EstimateCost(req)
	if err != nil {
		t.Fatalf("estimate of %s: %v", req.Model, err)
	}
	e.Fake.Script(Reply{Text: "A grey square."})
	res, err := e.Adapter.Invoke(ctx(t), req)
	if err != nil {
		t.Fatalf("invoke %s: %v", req.Model, err)
	}
	return costs{est, res.Cost, res.Usage}
}
