package sim

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseFaultExamples(t *testing.T) {
	p := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, c := range []struct {
		in   string
		want Fault
	}{
		{"anthropic:529x2", Fault{Provider: "anthropic", Spec: "529", Count: 2}},
		{"anthropic:429:retry-after=2", Fault{Provider: "anthropic", Spec: "429", Params: p("retry-after", "2"), Count: 1}},
		{"anthropic:401", Fault{Provider: "anthropic", Spec: "401", Count: 1}},
		{"anthropic:400", Fault{Provider: "anthropic", Spec: "400", Count: 1}},
		{"anthropic:too-long", Fault{Provider: "anthropic", Spec: "too-long", Count: 1}},
		{"anthropic:402", Fault{Provider: "anthropic", Spec: "402", Count: 1}},
		{"anthropic:spend-limit", Fault{Provider: "anthropic", Spec: "spend-limit", Count: 1}},
		{"anthropic:500", Fault{Provider: "anthropic", Spec: "500", Count: 1}},
		{"anthropic:504", Fault{Provider: "anthropic", Spec: "504", Count: 1}},
		{"anthropic:midstream", Fault{Provider: "anthropic", Spec: "midstream", Count: 1}},
		{"anthropic:cut", Fault{Provider: "anthropic", Spec: "cut", Count: 1}},
		{"anthropic:502-html", Fault{Provider: "anthropic", Spec: "502-html", Count: 1}},
		{"anthropic:slow", Fault{Provider: "anthropic", Spec: "slow", Count: 1}},
		{"openai:429:retry-after=2", Fault{Provider: "openai", Spec: "429", Params: p("retry-after", "2"), Count: 1}},
		{"openai:429", Fault{Provider: "openai", Spec: "429", Count: 1}},
		{"openai:quota", Fault{Provider: "openai", Spec: "quota", Count: 1}},
		{"openai:401", Fault{Provider: "openai", Spec: "401", Count: 1}},
		{"openai:400", Fault{Provider: "openai", Spec: "400", Count: 1}},
		{"openai:too-long", Fault{Provider: "openai", Spec: "too-long", Count: 1}},
		{"openai:500", Fault{Provider: "openai", Spec: "500", Count: 1}},
		{"openai:503", Fault{Provider: "openai", Spec: "503", Count: 1}},
		{"openai:502-html", Fault{Provider: "openai", Spec: "502-html", Count: 1}},
		{"openai:midstream", Fault{Provider: "openai", Spec: "midstream", Count: 1}},
		{"openai:cut", Fault{Provider: "openai", Spec: "cut", Count: 1}},
		{"ollama:503x3", Fault{Provider: "ollama", Spec: "503", Count: 3}},
		{"ollama:too-long", Fault{Provider: "ollama", Spec: "too-long", Count: 1}},
		{"vllm:401", Fault{Provider: "vllm", Spec: "401", Count: 1}},
		{"vllm:cut:after=1", Fault{Provider: "vllm", Spec: "cut", Params: p("after", "1"), Count: 1}},
		{"gemini:429:retry-after=31", Fault{Provider: "gemini", Spec: "429", Params: p("retry-after", "31"), Count: 1}},
		{"gemini:daily-quota", Fault{Provider: "gemini", Spec: "daily-quota", Count: 1}},
		{"gemini:bad-key", Fault{Provider: "gemini", Spec: "bad-key", Count: 1}},
		{"gemini:too-long", Fault{Provider: "gemini", Spec: "too-long", Count: 1}},
		{"gemini:500", Fault{Provider: "gemini", Spec: "500", Count: 1}},
		{"gemini:503", Fault{Provider: "gemini", Spec: "503", Count: 1}},
		{"gemini:504", Fault{Provider: "gemini", Spec: "504", Count: 1}},
		{"gemini:midstream", Fault{Provider: "gemini", Spec: "midstream", Count: 1}},
		{"gemini:cut", Fault{Provider: "gemini", Spec: "cut", Count: 1}},
		{"gemini:blocked", Fault{Provider: "gemini", Spec: "blocked", Count: 1}},
		{"gemini:blocked:reason=prohibited_content", Fault{Provider: "gemini", Spec: "blocked", Params: p("reason", "prohibited_content"), Count: 1}},
		{"gemini:slow", Fault{Provider: "gemini", Spec: "slow", Count: 1}},
		// Counts.
		{"anthropic:529x0", Fault{Provider: "anthropic", Spec: "529", Count: 0}},
		{"anthropic:529xinf", Fault{Provider: "anthropic", Spec: "529", Count: 0}},
		{"vllm:slowxinf", Fault{Provider: "vllm", Spec: "slow", Count: 0}},
		{"anthropic:429:retry-after=2x3", Fault{Provider: "anthropic", Spec: "429", Params: p("retry-after", "2"), Count: 3}},
		{"openai:429:retry-after=1500ms", Fault{Provider: "openai", Spec: "429", Params: p("retry-after", "1500ms"), Count: 1}},
		// Case and spaces do not matter.
		{" Anthropic:529X2 ", Fault{Provider: "anthropic", Spec: "529", Count: 2}},
	} {
		got, err := ParseFault(c.in)
		if err != nil {
			t.Errorf("ParseFault(%q): %v", c.in, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseFault(%q) = %+v, want %+v", c.in, got, c.want)
		}
		// String round-trips.
		again, err := ParseFault(got.String())
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Errorf("ParseFault(%q.String() = %q) = %+v, %v", c.in, got.String(), again, err)
		}
	}
}

func TestParseFaultErrors(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string // substrings of the message
	}{
		{"", []string{"empty fault", Syntax}},
		{"bogus", []string{`unknown provider "bogus"`, "anthropic, openai, ollama, vllm, gemini"}},
		{"antropic:529", []string{`unknown provider "antropic"`, `did you mean "anthropic"?`}},
		{"anthropic", []string{"names no fault", "valid anthropic faults: 400, 401, 402"}},
		{"anthropic:", []string{"names no fault"}},
		{"anthropic:530", []string{`unknown anthropic fault "530"`, "valid anthropic faults: 400, 401, 402, 403, 404, 429, 500, 502-html, 504, 529, too-long, spend-limit, midstream, cut, slow"}},
		{"anthropic:quota", []string{`unknown anthropic fault "quota"`}},
		{"ollama:429", []string{`unknown ollama fault "429"`, "valid ollama faults: 400, 404, 500, 502-html, 503, too-long, midstream, cut, slow"}},
		{"ollama:401", []string{`unknown ollama fault "401"`}},
		{"vllm:429", []string{`unknown vllm fault "429"`, "valid vllm faults:"}},
		{"gemini:401", []string{`unknown gemini fault "401"`, "bad-key"}},
		{"gemini:too_long", []string{`did you mean "too-long"?`}},
		{"anthropic:529x", []string{`bad count "x"`, "x0 or xinf"}},
		{"anthropic:529x-1", []string{`bad count "x-1"`}},
		{"anthropic:529xmany", []string{`bad count "xmany"`}},
		{"anthropic:529x99999999999999999999", []string{"bad count"}},
		{"anthropic:429:retry-after", []string{`parameter "retry-after"`, "PARAM=VALUE"}},
		{"anthropic:429:retry-after=soon", []string{"retry-after=soon", "seconds (2, 0.5) or a duration (1500ms)"}},
		{"anthropic:429:retry-after=-1", []string{"between 0 and 24h"}},
		{"anthropic:429:retry-after=2:retry-after=3", []string{"given twice"}},
		{"anthropic:429:wait=2", []string{`takes no parameter "wait"`, "it takes: retry-after"}},
		{"anthropic:401:retry-after=2", []string{"anthropic:401 takes no parameters"}},
		{"anthropic:cut:after=0", []string{"after=0", "at least 1"}},
		{"openai:midstream:after=two", []string{"after=two", "whole number"}},
		{"gemini:blocked:reason=rude", []string{"reason=rude", "SAFETY, OTHER, BLOCKLIST, PROHIBITED_CONTENT, IMAGE_SAFETY"}},
	} {
		_, err := ParseFault(c.in)
		if err == nil {
			t.Errorf("ParseFault(%q) succeeded", c.in)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("ParseFault(%q) = %q; want it to contain %q", c.in, err, w)
			}
		}
	}
}

func TestFaultParams(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"anthropic:429:retry-after=2":      2 * time.Second,
		"anthropic:429:retry-after=0.5":    500 * time.Millisecond,
		"anthropic:529:retry-after=1500ms": 1500 * time.Millisecond,
		"gemini:429:retry-after=31":        31 * time.Second,
	} {
		f, err := ParseFault(in)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := f.compile()
		if !c.args.hasRetryAfter || c.args.retryAfter != want {
			t.Errorf("%s: retry-after %v, want %v", in, c.args.retryAfter, want)
		}
	}
}

// TestEveryFaultIsDocumented keeps the package documentation and the help in
// step with the catalogue.
func TestEveryFaultIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	text, help := string(doc), FaultHelp()
	start := map[string]int{}
	var starts []int
	for _, p := range Providers() {
		i := strings.Index(text, "\n// "+p+":\n")
		if i < 0 {
			i = strings.Index(text, "\n// "+p+" (") // a remark before the colon
		}
		if i < 0 {
			t.Fatalf("doc.go has no section for %s", p)
		}
		start[p] = i
		starts = append(starts, i)
	}
	slices.Sort(starts)
	for _, p := range Providers() {
		end := len(text)
		if k := slices.Index(starts, start[p]); k+1 < len(starts) {
			end = starts[k+1]
		}
		section := text[start[p]:end]
		for _, name := range FaultNames(p) {
			if !strings.Contains(section, "//\t"+name+" ") {
				t.Errorf("doc.go does not document %s:%s", p, name)
			}
			if _, err := ParseFault(p + ":" + name); err != nil {
				t.Errorf("%s:%s: %v", p, name, err)
			}
			if !strings.Contains(help, p+":"+name) {
				t.Errorf("FaultHelp lacks %s:%s", p, name)
			}
		}
	}
}
