package fakekit

import (
	"encoding/base64"
	"strings"

	"github.com/cortexbuild/cortexbuild/provider"
)

// ImageSize returns the width and height of an image sent as base64 (or
// as a base64 data URL), read from its header as a provider's decoder
// reads it.
func ImageSize(b64 string) (w, h int, err error) {
	if _, data, ok := strings.Cut(b64, ";base64,"); ok && strings.HasPrefix(b64, "data:") {
		b64 = data
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return 0, 0, err
	}
	return (&provider.Image{Data: b}).Size()
}

// ScaleDown scales a w×h image by s (at most 1), keeping its aspect ratio
// as providers do: sides rounded down, at least 1 pixel, and at least one
// pixel off the longer side so that repeated scaling always ends.
func ScaleDown(w, h int, s float64) (int, int) {
	nw, nh := max(1, int(float64(w)*s)), max(1, int(float64(h)*s))
	if nw == w && nh == h {
		if w >= h {
			nw = max(1, w-1)
		} else {
			nh = max(1, h-1)
		}
	}
	return nw, nh
}
