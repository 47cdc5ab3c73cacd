package openaicompat_test

import (
	"testing"

	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat"
)

// Only OpenAI's own API is said to fetch image URLs on its side; every
// local server profile, a gateway and OpenAI's profile at another base URL
// may fetch them from this machine's network.
func TestFetchesImageURLsOnlyAtOpenAI(t *testing.T) {
	for _, c := range []struct {
		profile, base string
		want          bool
	}{
		{"openai", "", true},
		{"openai", "https://api.openai.com/v1", true},
		{"openai", "http://127.0.0.1:8080/v1", false},
		{"ollama", "", false},
		{"vllm", "", false},
		{"lmstudio", "", false},
		{"gateway", "https://openrouter.ai/api/v1", false},
		{"", "http://10.0.0.5:8000/v1", false},
	} {
		a, err := openaicompat.New(provider.Settings{Name: "x", Profile: c.profile, BaseURL: c.base, Credentials: map[string]string{"api_key": "sk-test"}})
		if err != nil {
			t.Fatal(err)
		}
		if got := a.FetchesImageURLs(); got != c.want {
			t.Errorf("%q at %q: FetchesImageURLs = %v, want %v", c.profile, c.base, got, c.want)
		}
	}
}
