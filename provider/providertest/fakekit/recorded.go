package fakekit

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
)

// RecordedBase is the protocol-independent part of a recorded request. A
// fake's Recorded type embeds it, which promotes the fields Method, Path,
// RawQuery, Header and Body and the methods Query and Decode (a fake may
// shadow Decode with its own).
type RecordedBase struct {
	Method   string
	Path     string
	RawQuery string
	Header   http.Header
	Body     []byte
}

// NewRecordedBase records r as sent: its method, path, raw query, a clone
// of its header, and body (which the caller has read).
func NewRecordedBase(r *http.Request, body []byte) RecordedBase {
	return RecordedBase{
		Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery,
		Header: r.Header.Clone(), Body: body,
	}
}

// CloneBase deep-copies b's header and body, so that the copy shares no
// memory with b. It is a function rather than a method so that it is not
// promoted into the fakes' Recorded types.
func CloneBase(b RecordedBase) RecordedBase {
	b.Header = b.Header.Clone()
	b.Body = slices.Clone(b.Body)
	return b
}

// Query parses RawQuery.
func (b RecordedBase) Query() url.Values {
	v, _ := url.ParseQuery(b.RawQuery)
	return v
}

// Decode unmarshals the JSON body into v.
func (b RecordedBase) Decode(v any) error {
	return json.Unmarshal(b.Body, v)
}

// ReadBody reads r's body up to limit bytes. tooLarge reports a body
// longer than limit, in which case body holds its first limit bytes; err
// is the read error, if any.
func ReadBody(r *http.Request, limit int64) (body []byte, tooLarge bool, err error) {
	body, err = io.ReadAll(io.LimitReader(r.Body, limit+1))
	if int64(len(body)) > limit {
		return body[:limit], true, err
	}
	return body, false, err
}
