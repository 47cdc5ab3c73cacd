package pricing

import (
	"testing"

	"github.com/cortexbuild/cortexbuild/provider"
)

// An image counts ImageTokens before a call, whatever its byte size, so
// that an estimate bounds what the providers bill for it.
func TestImagesCountBeforeACall(t *testing.T) {
	text := provider.Request{Messages: []provider.Message{provider.UserText("What is this?")}}
	img := text
	img.Messages = []provider.Message{{Role: provider.RoleUser, Parts: []provider.Part{
		{Type: provider.PartText, Text: "What is this?"},
		{Type: provider.PartImage, Image: &provider.Image{Data: []byte("\x89PNG"), MediaType: "image/png"}},
	}}}
	if got, want := CountRequestTokens(&img)-CountRequestTokens(&text), int64(ImageTokens); got != want {
		t.Errorf("an image adds %d tokens, want %d", got, want)
	}
	if BoundRequestTokens(&img, nil)-BoundRequestTokens(&text, nil) < ImageTokens {
		t.Error("the bound counts an image below ImageTokens")
	}
}
