package anthropicfake

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
)

// BetaContextManagement is the anthropic-beta value without which the API
// refuses a request's context_management ("context_management: Extra
// inputs are not permitted").
const BetaContextManagement = "context-management-2025-06-27"

// The context edits the API applies and reports in
// context_management.applied_edits.
const (
	EditClearToolUses = "clear_tool_uses_20250919"
	EditClearThinking = "clear_thinking_20251015"
)

// The error codes of a web_search_tool_result_error.
const (
	SearchErrorInvalidInput    = "invalid_tool_input"
	SearchErrorUnavailable     = "unavailable"
	SearchErrorMaxUsesExceeded = "max_uses_exceeded"
	SearchErrorTooManyRequests = "too_many_requests"
	SearchErrorQueryTooLong    = "query_too_long"
	SearchErrorRequestTooLarge = "request_too_large"
)

var searchErrorCodes = map[string]bool{
	SearchErrorInvalidInput: true, SearchErrorUnavailable: true, SearchErrorMaxUsesExceeded: true,
	SearchErrorTooManyRequests: true, SearchErrorQueryTooLong: true, SearchErrorRequestTooLarge: true,
}

// WebSearch scripts one search the model runs with the web search server
// tool before its answer (see Reply.WebSearches). The request must offer
// that tool: a tool of type web_search_20250305 or a later web_search_*.
type WebSearch struct {
	// Query is what the model searches for; it must not be empty.
	Query string
	// Results are the pages found; nil means one page derived from Query
	// (an example.org URL, cited by the answer).
	Results []SearchResult
	// ErrorCode, when set, makes the search fail: its result is a
	// web_search_tool_result_error with that error_code (one of the
	// SearchError* constants), and it is not billed. A search past the
	// tool's max_uses fails with max_uses_exceeded on its own.
	ErrorCode string
}

// SearchResult is one page a search found.
type SearchResult struct {
	URL   string
	Title string
	// PageAge is the page's age as the API words it ("April 30, 2025");
	// empty sends null.
	PageAge string
	// EncryptedContent is the opaque page content; empty means one
	// derived from URL.
	EncryptedContent string
	// CitedText, when set, is quoted from the page by a
	// web_search_result_location citation on the answer's text.
	CitedText string
}

// AppliedEdit is one context edit the API reports having applied to a
// request that asked for context management (see Reply.AppliedEdits).
type AppliedEdit struct {
	// Type is EditClearToolUses or EditClearThinking.
	Type string
	// ClearedToolUses is the tool uses cleared (EditClearToolUses).
	ClearedToolUses int
	// ClearedThinkingTurns is the thinking turns cleared
	// (EditClearThinking).
	ClearedThinkingTurns int
	// ClearedInputTokens is the prompt tokens the edit removed; a derived
	// usage reports that many input tokens fewer.
	ClearedInputTokens int
}

// MarshalJSON encodes the edit as the API reports it.
func (e AppliedEdit) MarshalJSON() ([]byte, error) {
	if e.Type == EditClearThinking {
		return marshal(struct {
			Type                 string `json:"type"`
			ClearedThinkingTurns int    `json:"cleared_thinking_turns"`
			ClearedInputTokens   int    `json:"cleared_input_tokens"`
		}{e.Type, e.ClearedThinkingTurns, e.ClearedInputTokens}), nil
	}
	return marshal(struct {
		Type               string `json:"type"`
		ClearedToolUses    int    `json:"cleared_tool_uses"`
		ClearedInputTokens int    `json:"cleared_input_tokens"`
	}{e.Type, e.ClearedToolUses, e.ClearedInputTokens}), nil
}

// validateServerTools reports a scripting mistake in r's searches and
// edits.
func (r *Reply) validateServerTools() error {
	for i, ws := range r.WebSearches {
		if strings.TrimSpace(ws.Query) == "" {
			return fmt.Errorf("WebSearches[%d]: empty Query", i)
		}
		if ws.ErrorCode != "" && !searchErrorCodes[ws.ErrorCode] {
			return fmt.Errorf("WebSearches[%d]: unknown ErrorCode %q", i, ws.ErrorCode)
		}
		for j, res := range ws.Results {
			if res.URL == "" || res.Title == "" {
				return fmt.Errorf("WebSearches[%d].Results[%d]: URL and Title are required", i, j)
			}
		}
	}
	for i, e := range r.AppliedEdits {
		if e.Type != EditClearToolUses && e.Type != EditClearThinking {
			return fmt.Errorf("AppliedEdits[%d]: unknown Type %q", i, e.Type)
		}
	}
	return nil
}

// WebSearchTool is the web search server tool a request offers.
type WebSearchTool struct {
	// Type is the tool's version, e.g. "web_search_20250305".
	Type string
	// Name is the tool's name ("web_search").
	Name string
	// MaxUses is the most searches the model may run; 0 for no limit.
	MaxUses int
}

// WebSearchTool is the web search server tool the request offers, nil
// when it offers none.
func (r Recorded) WebSearchTool() *WebSearchTool {
	var b struct {
		Tools []struct {
			Type    string `json:"type"`
			Name    string `json:"name"`
			MaxUses int    `json:"max_uses"`
		} `json:"tools"`
	}
	if json.Unmarshal(r.Body, &b) != nil {
		return nil
	}
	for _, t := range b.Tools {
		if strings.HasPrefix(t.Type, "web_search_") {
			return &WebSearchTool{Type: t.Type, Name: cmpOr(t.Name, "web_search"), MaxUses: t.MaxUses}
		}
	}
	return nil
}

// ContextManagement is the request's context_management value as sent,
// nil when it has none.
func (r Recorded) ContextManagement() json.RawMessage {
	var b struct {
		CM json.RawMessage `json:"context_management"`
	}
	if json.Unmarshal(r.Body, &b) != nil || string(b.CM) == "null" {
		return nil
	}
	return b.CM
}

// Betas are the request's anthropic-beta values, every header line split
// at its commas.
func (r Recorded) Betas() []string { return betas(r.Header.Values("anthropic-beta")) }

func betas(lines []string) []string {
	var out []string
	for _, l := range lines {
		for v := range strings.SplitSeq(l, ",") {
			if v = strings.TrimSpace(v); v != "" {
				out = append(out, v)
			}
		}
	}
	return out
}

// resolvedSearch is a scripted search with its defaults filled in.
type resolvedSearch struct {
	id, name  string
	input     []byte // compact {"query":…}
	results   []SearchResult
	errorCode string
}

// resolveSearches fills in the defaults of the scripted searches for a
// request offering tool, and returns them with the citations of the
// answer's text and the number of searches billed.
func (s *Server) resolveSearches(scripted []WebSearch, tool *WebSearchTool) (out []resolvedSearch, cites []citation, billed int) {
	for i, ws := range scripted {
		in := marshal(struct {
			Query string `json:"query"`
		}{ws.Query})
		rs := resolvedSearch{id: s.newID("srvtoolu_01", 22), name: tool.Name, input: in, errorCode: ws.ErrorCode}
		if rs.errorCode == "" && tool.MaxUses > 0 && i >= tool.MaxUses {
			rs.errorCode = SearchErrorMaxUsesExceeded
		}
		if rs.errorCode == "" {
			billed++
			rs.results = ws.Results
			if rs.results == nil {
				rs.results = []SearchResult{derivedResult(ws.Query)}
			}
			for j := range rs.results {
				r := &rs.results[j]
				r.EncryptedContent = cmpOr(r.EncryptedContent, opaque("content", r.URL))
				if r.CitedText != "" {
					cites = append(cites, citation{Type: "web_search_result_location", CitedText: r.CitedText, URL: r.URL, Title: r.Title,
						EncryptedIndex: opaque("index", r.URL+"\x00"+r.CitedText)})
				}
			}
		}
		out = append(out, rs)
	}
	return out, cites, billed
}

// derivedResult is the page a search finds when the script names none.
func derivedResult(query string) SearchResult {
	slug := strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return unicode.ToLower(r)
		}
		return '-'
	}, query)
	return SearchResult{
		URL: "https://www.example.org/" + strings.Trim(slug, "-"), Title: query + " - Example",
		PageAge: "March 1, 2026", CitedText: "An example page about " + query + ".",
	}
}

// opaque is a stable stand-in for the API's encrypted values.
func opaque(kind, s string) string {
	sum := sha256.Sum256([]byte(kind + "\x00" + s))
	return "Eq" + base64.StdEncoding.EncodeToString(sum[:])
}

// The wire shapes of the web search blocks, in the real API's field order
// (as it streams them).

type serverToolUseBlock struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type searchResultBlock struct {
	Type      string `json:"type"`
	ToolUseID string `json:"tool_use_id"`
	Content   any    `json:"content"` // []webSearchResult or searchError
	Caller    caller `json:"caller"`
}

type caller struct {
	Type string `json:"type"`
}

type webSearchResult struct {
	Type             string  `json:"type"`
	Title            string  `json:"title"`
	URL              string  `json:"url"`
	EncryptedContent string  `json:"encrypted_content"`
	PageAge          *string `json:"page_age"`
}

type searchError struct {
	Type      string `json:"type"`
	ErrorCode string `json:"error_code"`
}

type citation struct {
	Type           string `json:"type"`
	CitedText      string `json:"cited_text"`
	URL            string `json:"url"`
	Title          string `json:"title"`
	EncryptedIndex string `json:"encrypted_index"`
}

// citedTextBlock is a text block with citations.
type citedTextBlock struct {
	Citations []citation `json:"citations"`
	Type      string     `json:"type"`
	Text      string     `json:"text"`
}

// resultBlock is the web_search_tool_result of rs.
func (rs *resolvedSearch) resultBlock() searchResultBlock {
	b := searchResultBlock{Type: "web_search_tool_result", ToolUseID: rs.id, Caller: caller{"direct"}}
	if rs.errorCode != "" {
		b.Content = searchError{"web_search_tool_result_error", rs.errorCode}
		return b
	}
	list := make([]webSearchResult, len(rs.results))
	for i, r := range rs.results {
		list[i] = webSearchResult{Type: "web_search_result", Title: r.Title, URL: r.URL, EncryptedContent: r.EncryptedContent}
		if r.PageAge != "" {
			age := r.PageAge
			list[i].PageAge = &age
		}
	}
	b.Content = list
	return b
}

// wireServerToolUse is usage.server_tool_use.
type wireServerToolUse struct {
	WebSearchRequests int `json:"web_search_requests"`
	WebFetchRequests  int `json:"web_fetch_requests"`
}

// wireContextManagement is the context_management of an answer.
type wireContextManagement struct {
	AppliedEdits []AppliedEdit `json:"applied_edits"`
}
