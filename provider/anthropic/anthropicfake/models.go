package anthropicfake

import (
	"net/url"
	"strconv"
	"time"
)

// Model is one entry of GET /v1/models.
type Model struct {
	ID             string
	DisplayName    string
	CreatedAt      time.Time
	MaxInputTokens int
	MaxTokens      int
}

type wireModel struct {
	Type           string `json:"type"`
	ID             string `json:"id"`
	DisplayName    string `json:"display_name"`
	CreatedAt      string `json:"created_at"`
	MaxInputTokens int    `json:"max_input_tokens,omitempty"`
	MaxTokens      int    `json:"max_tokens,omitempty"`
}

func (m Model) wire() wireModel {
	return wireModel{"model", m.ID, m.DisplayName, m.CreatedAt.UTC().Format(time.RFC3339), m.MaxInputTokens, m.MaxTokens}
}

type wireModelPage struct {
	Data    []wireModel `json:"data"`
	HasMore bool        `json:"has_more"`
	FirstID *string     `json:"first_id"`
	LastID  *string     `json:"last_id"`
}

func day(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }

// DefaultModels is the catalogue GET /v1/models serves unless [WithModels]
// replaces it, newest first like the real list. The ids are real model ids;
// creation dates and limits are illustrative.
func DefaultModels() []Model {
	return []Model{
		{"claude-opus-5-5", "Claude Opus 5.5", day(2026, 9, 22), 1_000_000, 128_000},
		{"claude-haiku-5-5", "Claude Haiku 5.5", day(2026, 9, 15), 1_000_000, 64_000},
		{"claude-sonnet-5-5", "Claude Sonnet 5.5", day(2026, 9, 1), 1_000_000, 64_000},
		{"claude-opus-5", "Claude Opus 5", day(2026, 7, 24), 1_000_000, 128_000},
		{"claude-sonnet-5", "Claude Sonnet 5", day(2026, 6, 30), 1_000_000, 64_000},
		{"claude-sonnet-4-6", "Claude Sonnet 4.6", day(2026, 2, 17), 1_000_000, 64_000},
		{"claude-opus-4-6", "Claude Opus 4.6", day(2026, 2, 5), 1_000_000, 128_000},
		{"claude-haiku-4-5-20251001", "Claude Haiku 4.5", day(2025, 10, 1), 200_000, 64_000},
	}
}

// modelPage pages models like the real API: limit (1..1000, default 20),
// after_id and before_id cursors. It returns an error message for a bad
// query.
func modelPage(models []Model, q url.Values) (wireModelPage, string) {
	limit := 20
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		switch {
		case err != nil:
			return wireModelPage{}, "limit: Input should be a valid integer"
		case n < 1:
			return wireModelPage{}, "limit: Input should be greater than or equal to 1"
		case n > 1000:
			return wireModelPage{}, "limit: Input should be less than or equal to 1000"
		}
		limit = n
	}
	index := func(id string) int {
		for i, m := range models {
			if m.ID == id {
				return i
			}
		}
		return -1
	}
	lo, hi := 0, len(models)
	fromEnd := false
	if id := q.Get("before_id"); id != "" {
		hi, fromEnd = max(index(id), 0), true
	}
	if id := q.Get("after_id"); id != "" {
		if i := index(id); i >= 0 {
			lo = i + 1
		} else {
			lo = len(models)
		}
	}
	if lo > hi {
		lo = hi
	}
	window := models[lo:hi]
	var page []Model
	hasMore := len(window) > limit
	if hasMore && fromEnd {
		page = window[len(window)-limit:]
	} else {
		page = window[:min(limit, len(window))]
	}
	out := wireModelPage{Data: []wireModel{}, HasMore: hasMore}
	for _, m := range page {
		out.Data = append(out.Data, m.wire())
	}
	if len(page) > 0 {
		first, last := page[0].ID, page[len(page)-1].ID
		out.FirstID, out.LastID = &first, &last
	}
	return out, ""
}
