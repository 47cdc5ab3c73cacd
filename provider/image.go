package provider

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	_ "image/gif" // registers GIF headers for Image.Size
	_ "image/jpeg"
	_ "image/png"
)

// ImageTokens bounds the prompt tokens a provider bills for one image. An
// adapter selects one per model (the vendor's formula, with its numbers)
// and passes it to [Pricer.Estimate].
type ImageTokens interface {
	// Tokens is an upper bound of what one image of w×h pixels is billed.
	Tokens(w, h int) int64
	// Max is an upper bound of what any one image is billed (an image
	// given by URL, or whose size cannot be read); 0 when the provider
	// documents no maximum, and such an image cannot be priced.
	Max() int64
}

// Size returns an inline image's width and height in pixels, read from
// its header only (the pixels are never decoded): PNG, JPEG, GIF or WebP,
// whatever MediaType says. An image given by URL has no known size.
func (im *Image) Size() (width, height int, err error) {
	if len(im.Data) == 0 {
		return 0, 0, errors.New("the image is given by URL: its size is unknown before the provider fetches it")
	}
	if w, h, ok, err := webpSize(im.Data); ok {
		return w, h, err
	}
	c, _, err := image.DecodeConfig(bytes.NewReader(im.Data))
	if err != nil {
		return 0, 0, fmt.Errorf("the image's header cannot be read as PNG, JPEG, GIF or WebP: %w", err)
	}
	if c.Width <= 0 || c.Height <= 0 {
		return 0, 0, fmt.Errorf("the image's header says %d×%d pixels", c.Width, c.Height)
	}
	return c.Width, c.Height, nil
}

// webpSize reads the canvas size of a WebP file's first chunk (ok is false
// when b is not a RIFF WEBP file): VP8 (lossy), VP8L (lossless) or VP8X
// (extended), as the WebP container specification lays them out.
func webpSize(b []byte) (w, h int, ok bool, err error) {
	if len(b) < 12 || string(b[:4]) != "RIFF" || string(b[8:12]) != "WEBP" {
		return 0, 0, false, nil
	}
	bad := fmt.Errorf("the image's WebP header is truncated or malformed")
	if len(b) < 20 {
		return 0, 0, true, bad
	}
	chunk, data := string(b[12:16]), b[20:]
	need := 10 // VP8 and VP8X
	if chunk == "VP8L" {
		need = 5
	}
	if len(data) < need {
		return 0, 0, true, bad
	}
	switch chunk {
	case "VP8 ": // frame tag (3 bytes), start code 9d 01 2a, 14-bit sizes
		if data[3] != 0x9d || data[4] != 0x01 || data[5] != 0x2a {
			return 0, 0, true, bad
		}
		w = int(binary.LittleEndian.Uint16(data[6:]) & 0x3fff)
		h = int(binary.LittleEndian.Uint16(data[8:]) & 0x3fff)
	case "VP8L": // signature 0x2f, then 14 bits width-1, 14 bits height-1
		if data[0] != 0x2f {
			return 0, 0, true, bad
		}
		v := binary.LittleEndian.Uint32(data[1:])
		w, h = int(v&0x3fff)+1, int(v>>14&0x3fff)+1
	case "VP8X": // flags (4 bytes), then 24-bit canvas width-1, height-1
		w = int(uint32(data[4])|uint32(data[5])<<8|uint32(data[6])<<16) + 1
		h = int(uint32(data[7])|uint32(data[8])<<8|uint32(data[9])<<16) + 1
	default:
		return 0, 0, true, bad
	}
	if w <= 0 || h <= 0 {
		return 0, 0, true, bad
	}
	return w, h, true, nil
}
