package ledger

import (
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/cortexbuild/cortexbuild/provider"
)

// The journal's line format is JSON, written by hand on the call path
// (encoding/json's reflection and Money's decimal text cost more than the
// rest of a settlement's bookkeeping) and read back with encoding/json on
// replay. Amounts are integer nano-dollars, times Unix nanoseconds.

type jrecord struct {
	V      int      `json:"v"`
	Op     string   `json:"op"`
	Lease  string   `json:"lease,omitempty"`
	Settle *jsettle `json:"settle,omitempty"`
}

type jsettle struct {
	ID       string  `json:"id"`
	Cost     int64   `json:"cost"`
	Scopes   []Scope `json:"scopes"`
	Lease    string  `json:"lease,omitempty"`
	Reserved int64   `json:"reserved,omitempty"`
	Entry    jrow    `json:"entry"`
	Earlier  []jrow  `json:"earlier,omitempty"`
}

type jrow struct {
	ID         string `json:"id"`
	At         int64  `json:"at"`
	Task       string `json:"task"`
	Agent      string `json:"agent"`
	Provider   string `json:"provider"`
	Model      string `json:"model"`
	Outcome    string `json:"outcome"`
	In         int64  `json:"in"`
	Out        int64  `json:"out"`
	CacheRead  int64  `json:"cache_read"`
	CacheWrite int64  `json:"cache_write"`
	Cost       int64  `json:"cost"`
	CacheHit   bool   `json:"cache_hit"`
	Saving     int64  `json:"saving"`
	Estimated  bool   `json:"estimated"`
	// Unpriced is absent from records written before it existed.
	Unpriced bool `json:"unpriced,omitempty"`
	// The virtual key and the host's session and agents: absent when
	// empty, and from the records of earlier versions, which read as
	// rows without them (see the note on journalVersion).
	Key         string `json:"key,omitempty"`
	Session     string `json:"session,omitempty"`
	HostAgent   string `json:"host_agent,omitempty"`
	ParentAgent string `json:"parent_agent,omitempty"`
}

// appendRecord appends r's line (without the newline) to b.
func appendRecord(b []byte, r record) []byte {
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, journalVersion, 10)
	b = append(b, `,"op":`...)
	b = appendString(b, r.Op)
	if r.Lease != "" {
		b = append(b, `,"lease":`...)
		b = appendString(b, r.Lease)
	}
	if s := r.Settle; s != nil {
		b = append(b, `,"settle":{"id":`...)
		b = appendString(b, s.InvocationID)
		b = append(b, `,"cost":`...)
		b = strconv.AppendInt(b, int64(s.Cost), 10)
		b = append(b, `,"scopes":[`...)
		for i, sc := range s.Scopes {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, string(sc))
		}
		b = append(b, ']')
		if s.Lease != "" {
			b = append(b, `,"lease":`...)
			b = appendString(b, s.Lease)
			b = append(b, `,"reserved":`...)
			b = strconv.AppendInt(b, int64(s.Reserved), 10)
		}
		b = append(b, `,"entry":`...)
		b = appendRow(b, s.Entry)
		if len(s.Earlier) > 0 {
			b = append(b, `,"earlier":[`...)
			for i, a := range s.Earlier {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendRow(b, a)
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

func appendRow(b []byte, a AttemptRow) []byte {
	str := func(k, v string) {
		b = append(b, ',', '"')
		b = append(b, k...)
		b = append(b, '"', ':')
		b = appendString(b, v)
	}
	num := func(k string, v int64) {
		b = append(b, ',', '"')
		b = append(b, k...)
		b = append(b, '"', ':')
		b = strconv.AppendInt(b, v, 10)
	}
	flag := func(k string, v bool) {
		b = append(b, ',', '"')
		b = append(b, k...)
		b = append(b, '"', ':')
		b = strconv.AppendBool(b, v)
	}
	b = append(b, `{"id":`...)
	b = appendString(b, a.InvocationID)
	at := int64(0)
	if !a.Time.IsZero() {
		at = a.Time.UnixNano()
	}
	num("at", at)
	str("task", a.Task)
	str("agent", a.Agent)
	str("provider", a.Provider)
	str("model", a.Model)
	str("outcome", a.Outcome)
	num("in", a.InputTokens)
	num("out", a.OutputTokens)
	num("cache_read", a.CacheReadTokens)
	num("cache_write", a.CacheWriteTokens)
	num("cost", int64(a.Cost))
	flag("cache_hit", a.CacheHit)
	num("saving", int64(a.Saving))
	flag("estimated", a.EstimatedUsage)
	if a.Unpriced {
		flag("unpriced", true)
	}
	if a.Key != "" {
		str("key", a.Key)
	}
	// Client input, bounded as the stores record it: no line grows with
	// what a client sends.
	if a.Session != "" {
		str("session", HostID(a.Session))
	}
	if a.HostAgent != "" {
		str("host_agent", HostID(a.HostAgent))
	}
	if a.ParentAgent != "" {
		str("parent_agent", HostID(a.ParentAgent))
	}
	return append(b, '}')
}

// appendString appends v as a JSON string: quotes, backslashes and control
// characters escaped, invalid UTF-8 replaced (the store refuses it anyway).
func appendString(b []byte, v string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for _, r := range v {
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[r>>4], hex[r&0xf])
		default:
			b = utf8.AppendRune(b, r)
		}
	}
	return append(b, '"')
}

// settlement turns a decoded journal settlement back into a Settlement.
func (s *jsettle) settlement() Settlement {
	out := Settlement{InvocationID: s.ID, Cost: provider.Money(s.Cost), Scopes: s.Scopes, Lease: s.Lease, Reserved: provider.Money(s.Reserved), Entry: s.Entry.row()}
	for _, r := range s.Earlier {
		out.Earlier = append(out.Earlier, r.row())
	}
	return out
}

func (r jrow) row() AttemptRow {
	a := AttemptRow{InvocationID: r.ID, Task: r.Task, Agent: r.Agent, Provider: r.Provider, Model: r.Model, Outcome: r.Outcome,
		InputTokens: r.In, OutputTokens: r.Out, CacheReadTokens: r.CacheRead, CacheWriteTokens: r.CacheWrite,
		Cost: provider.Money(r.Cost), CacheHit: r.CacheHit, Saving: provider.Money(r.Saving), EstimatedUsage: r.Estimated, Unpriced: r.Unpriced,
		Key: r.Key, Session: r.Session, HostAgent: r.HostAgent, ParentAgent: r.ParentAgent}
	if r.At != 0 {
		a.Time = time.Unix(0, r.At).UTC()
	}
	return a
}
