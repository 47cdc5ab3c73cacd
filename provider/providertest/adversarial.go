package providertest

import (
	"encoding/base64"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cortexbuild/cortexbuild/provider"
)

// AdversarialTexts are prompts on which tokenizers disagree most: long
// runs of one character, whitespace, characters JSON escapes, random
// bytes (valid UTF-8 and not), CJK, emoji, base64, code and mixtures. They
// are deterministic (seeded).
func AdversarialTexts() map[string]string {
	rnd := rand.New(rand.NewPCG(17, 3))
	randBytes := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rnd.UintN(256))
		}
		return b
	}
	randRunes := func(n int, lo, hi rune) string {
		var b strings.Builder
		for b.Len() < n {
			r := lo + rune(rnd.IntN(int(hi-lo)))
			if utf8.ValidRune(r) {
				b.WriteRune(r)
			}
		}
		return b.String()
	}
	pick := func(n int, alphabet string) string {
		var b strings.Builder
		for range n {
			b.WriteByte(alphabet[rnd.IntN(len(alphabet))])
		}
		return b.String()
	}
	code := strings.Repeat("func (s *Server) serve(w http.ResponseWriter, r *http.Request) {\n\tif err := s.check(r); err != nil {\n\t\thttp.Error(w, err.Error(), 400)\n\t\treturn\n\t}\n}\n", 120)
	prose := strings.Repeat("A budget is never exceeded: every call holds an upper bound of its cost before it is sent. ", 100)
	return map[string]string{
		"tiny":           "x",
		"run of =":       strings.Repeat("=", 40000),
		"run of a":       strings.Repeat("a", 30000),
		"run of spaces":  strings.Repeat(" ", 30000),
		"run of newline": strings.Repeat("\n", 20000),
		"run of <":       strings.Repeat("<", 20000), // escaped as \u003c by some encoders
		"run of quotes":  strings.Repeat(`"\`, 10000),
		"run of emoji":   strings.Repeat("🙂", 5000),
		"whitespace":     pick(20000, " \t\n\r"),
		"random ASCII":   pick(20000, "!#$%&()*+,-./0123456789:;=?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[]^_`abcdefghijklmnopqrstuvwxyz{|}~"),
		"random control": pick(5000, "\x00\x01\x02\x07\x08\x0b\x0c\x1b\x1f\x7f"),
		"random runes":   randRunes(20000, 0x80, 0x10ffff),
		"random BMP":     randRunes(20000, 0x80, 0xffff),
		"raw bytes":      string(randBytes(15000)),
		"CJK":            randRunes(24000, 0x4e00, 0x9fff),
		"emoji":          randRunes(20000, 0x1f300, 0x1faff),
		"base64":         base64.StdEncoding.EncodeToString(randBytes(15000)),
		"code":           code,
		"prose":          prose,
		"mixture":        prose[:3000] + strings.Repeat("=", 8000) + randRunes(3000, 0x4e00, 0x9fff) + string(randBytes(2000)) + code[:3000] + strings.Repeat(" ", 5000),
	}
}

// estimateBoundAdversarial: whatever the text, what the fake bills with
// its own counts (nothing scripted) is at most the estimate, and the
// output billed is at most the request's max tokens.
func estimateBoundAdversarial(t *testing.T, e *Env) {
	answer := strings.Repeat("The answer goes on and on. ", 3000) // ~80 KB: longer than any small limit
	texts := AdversarialTexts()
	for _, name := range sortedKeys(texts) {
		text := texts[name]
		for _, maxTokens := range []int{1, 7, 300, 0, 1<<31 - 1} {
			reqs := map[string]*provider.Request{
				"prompt": {Prompt: text, MaxTokens: maxTokens},
				"system": {System: text, Prompt: "Answer.", MaxTokens: maxTokens},
			}
			if maxTokens == 300 {
				reqs["tool"] = &provider.Request{Prompt: "Use the tool.", MaxTokens: maxTokens,
					Tools: []provider.ToolDef{{Name: "lookup", Description: text, InputSchema: weatherTool.InputSchema}}}
			}
			for _, where := range sortedKeys(reqs) {
				req := reqs[where]
				est, err := e.Adapter.EstimateCost(req)
				if err != nil {
					t.Fatalf("%s in %s, max_tokens %d: %v", name, where, maxTokens, err)
				}
				e.Fake.Script(Reply{Text: answer})
				res, err := e.Adapter.Invoke(ctx(t), req)
				if err != nil {
					t.Fatalf("%s in %s, max_tokens %d: %v", name, where, maxTokens, err)
				}
				if limit := int64(req.EffectiveMaxTokens()); res.Usage.OutputTokens > limit {
					t.Errorf("%s in %s: %d output tokens billed for max_tokens %d", name, where, res.Usage.OutputTokens, limit)
				}
				if sent := e.Fake.Last().MaxTokens; sent > req.EffectiveMaxTokens() || sent <= 0 {
					t.Errorf("%s in %s: max tokens sent %d for a request asking %d", name, where, sent, req.EffectiveMaxTokens())
				}
				if e.Pricer == nil {
					continue
				}
				// What is sent is clamped to the model's output limit, the
				// limit the estimate prices.
				if l, err := e.Pricer.Limits(e.Namespace, e.Model); err == nil && int64(e.Fake.Last().MaxTokens) > l.MaxOutputTokens {
					t.Errorf("%s in %s: max tokens sent %d above %s's output limit %d", name, where, e.Fake.Last().MaxTokens, e.Model, l.MaxOutputTokens)
				}
				if res.Cost <= 0 || res.Cost > est {
					t.Errorf("%s in %s, max_tokens %d: billed $%s (usage %+v) above the estimate $%s", name, where, maxTokens, res.Cost, res.Usage, est)
				}
			}
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
