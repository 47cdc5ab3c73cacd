package provider

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"testing"
)

// Size reads the width and height from the header of every inline format,
// whatever the media type says, and refuses what is not an image.
func TestImageSizeReadsTheHeader(t *testing.T) {
	enc := map[string]func(*bytes.Buffer, image.Image) error{
		"png":  func(b *bytes.Buffer, m image.Image) error { return png.Encode(b, m) },
		"jpeg": func(b *bytes.Buffer, m image.Image) error { return jpeg.Encode(b, m, nil) },
		"gif":  func(b *bytes.Buffer, m image.Image) error { return gif.Encode(b, m, nil) },
	}
	for name, e := range enc {
		for _, s := range [][2]int{{1, 1}, {385, 17}, {17, 2049}} {
			var b bytes.Buffer
			if err := e(&b, image.NewGray(image.Rect(0, 0, s[0], s[1]))); err != nil {
				t.Fatal(err)
			}
			w, h, err := (&Image{Data: b.Bytes(), MediaType: "image/png"}).Size()
			if err != nil || w != s[0] || h != s[1] {
				t.Errorf("%s %v: read %d×%d (%v)", name, s, w, h, err)
			}
		}
	}
	webp := func(chunk string, payload []byte) []byte {
		b := append([]byte("RIFF\x00\x00\x00\x00WEBP"+chunk+"\x00\x00\x00\x00"), payload...)
		binary.LittleEndian.PutUint32(b[4:], uint32(len(b)-8))
		binary.LittleEndian.PutUint32(b[16:], uint32(len(payload)))
		return b
	}
	lossless := []byte{0x2f, 0, 0, 0, 0}
	binary.LittleEndian.PutUint32(lossless[1:], uint32(3000-1)|uint32(40-1)<<14)
	lossy := []byte{0, 0, 0, 0x9d, 0x01, 0x2a, 0, 0, 0, 0}
	binary.LittleEndian.PutUint16(lossy[6:], 1568)
	binary.LittleEndian.PutUint16(lossy[8:], 882)
	extended := []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	extended[4], extended[5], extended[6] = 0xff, 0x3f, 0 // 16384-1
	extended[7], extended[8], extended[9] = 0x0f, 0, 0    // 16-1
	for _, c := range []struct {
		name string
		data []byte
		w, h int
	}{
		{"VP8L", webp("VP8L", lossless), 3000, 40},
		{"VP8", webp("VP8 ", lossy), 1568, 882},
		{"VP8X", webp("VP8X", extended), 16384, 16},
	} {
		w, h, err := (&Image{Data: c.data, MediaType: "image/webp"}).Size()
		if err != nil || w != c.w || h != c.h {
			t.Errorf("WebP %s: read %d×%d (%v), want %d×%d", c.name, w, h, err, c.w, c.h)
		}
	}
	for name, data := range map[string][]byte{
		"truncated PNG": []byte("\x89PNG"), "truncated WebP": webp("VP8L", []byte{0x2f}), "text": []byte("hello"),
	} {
		if _, _, err := (&Image{Data: data}).Size(); err == nil {
			t.Errorf("%s: read a size", name)
		}
	}
	if _, _, err := (&Image{URL: "https://example.com/a.png"}).Size(); err == nil {
		t.Error("an image by URL has a size")
	}
}
