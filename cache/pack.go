package cache

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/cortexbuild/cortexbuild/provider"
)

// packEntry writes e as one block of bytes, the form the in-memory store
// holds it in: strings and byte strings preceded by their lengths
// (uvarints), numbers as varints, the tool calls and parts (rare in a
// relayed answer's entry, and rich) as their JSON, the relayed answer's
// headers name by name. unpackEntry reads it back as a copy the caller
// owns, exactly but for what JSON normalises in the tool calls and parts
// (as a Redis entry's are).
func packEntry(e Entry) ([]byte, error) {
	var p packer
	p.str(e.Content)
	if err := p.json(e.ToolCalls, e.ToolCalls != nil); err != nil {
		return nil, err
	}
	if err := p.json(e.Parts, e.Parts != nil); err != nil {
		return nil, err
	}
	u := e.Usage
	for _, n := range []int64{u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens, u.CacheWriteLongTokens, u.ReasoningTokens, u.WebSearchRequests} {
		p.int(n)
	}
	p.str(u.ServiceTier)
	p.bool(u.Estimated)
	p.int(int64(e.Cost))
	p.str(e.Provider)
	p.str(e.Model)
	p.str(string(e.StopReason))
	p.str(e.RawStopReason)
	p.str(e.RequestID)
	at, err := e.StoredAt.MarshalBinary()
	if err != nil {
		return nil, err
	}
	p.bytes(at)
	p.bool(e.Native != nil)
	if n := e.Native; n != nil {
		p.int(int64(n.Status))
		p.bool(n.Header != nil)
		p.uint(uint64(len(n.Header)))
		for k, vs := range n.Header {
			p.str(k)
			p.strs(vs)
		}
		p.bool(n.Body != nil)
		p.bytes(n.Body)
		p.strs(n.Edits)
	}
	return p.b, nil
}

// unpackEntry is the entry packEntry packed into b.
func unpackEntry(b []byte) (Entry, error) {
	u := unpacker{b: b}
	var e Entry
	e.Content = u.str()
	if u.unjson(&e.ToolCalls); u.err == nil {
		u.unjson(&e.Parts)
	}
	us := &e.Usage
	for _, n := range []*int64{&us.InputTokens, &us.OutputTokens, &us.CacheReadTokens, &us.CacheWriteTokens, &us.CacheWriteLongTokens, &us.ReasoningTokens, &us.WebSearchRequests} {
		*n = u.int()
	}
	us.ServiceTier = u.str()
	us.Estimated = u.bool()
	e.Cost = provider.Money(u.int())
	e.Provider = u.str()
	e.Model = u.str()
	e.StopReason = provider.StopReason(u.str())
	e.RawStopReason = u.str()
	e.RequestID = u.str()
	if at := u.bytes(); u.err == nil {
		u.fail(e.StoredAt.UnmarshalBinary(at))
	}
	if u.bool() {
		n := &provider.NativeReply{Status: int(u.int())}
		hasHeader := u.bool()
		if k := u.count(); hasHeader {
			n.Header = make(http.Header, k)
			for range k {
				name := u.str()
				n.Header[name] = u.strs()
			}
		}
		if hasBody, body := u.bool(), u.bytes(); hasBody {
			n.Body = bytes.Clone(body)
		}
		n.Edits = u.strs()
		e.Native = n
	}
	if u.err == nil && len(u.b) != 0 {
		u.err = errors.New("bytes left over")
	}
	if u.err != nil {
		return Entry{}, errors.New("cache: a stored entry does not unpack: " + u.err.Error())
	}
	return e, nil
}

type packer struct{ b []byte }

func (p *packer) uint(n uint64) { p.b = binary.AppendUvarint(p.b, n) }
func (p *packer) int(n int64)   { p.b = binary.AppendVarint(p.b, n) }
func (p *packer) str(s string)  { p.uint(uint64(len(s))); p.b = append(p.b, s...) }
func (p *packer) bytes(s []byte) {
	p.uint(uint64(len(s)))
	p.b = append(p.b, s...)
}

func (p *packer) bool(v bool) {
	if v {
		p.b = append(p.b, 1)
	} else {
		p.b = append(p.b, 0)
	}
}

// strs packs ss, nil apart from empty.
func (p *packer) strs(ss []string) {
	if ss == nil {
		p.uint(0)
		return
	}
	p.uint(uint64(len(ss)) + 1)
	for _, s := range ss {
		p.str(s)
	}
}

// json packs v's JSON when set, nothing but the flag otherwise.
func (p *packer) json(v any, set bool) error {
	p.bool(set)
	if !set {
		return nil
	}
	j, err := json.Marshal(v)
	if err != nil {
		return err
	}
	p.bytes(j)
	return nil
}

type unpacker struct {
	b   []byte
	err error
}

func (u *unpacker) fail(err error) {
	if u.err == nil && err != nil {
		u.err = err
	}
}

func (u *unpacker) uint() uint64 { return varint(u, binary.Uvarint) }
func (u *unpacker) int() int64   { return varint(u, binary.Varint) }

// varint reads one varint with read (binary.Uvarint or binary.Varint).
func varint[T uint64 | int64](u *unpacker, read func([]byte) (T, int)) T {
	if u.err != nil {
		return 0
	}
	n, w := read(u.b)
	if w <= 0 {
		u.fail(errors.New("a number is cut"))
		return 0
	}
	u.b = u.b[w:]
	return n
}

// count is a number of items, each at least a byte, that must fit in
// what is left.
func (u *unpacker) count() int {
	n := u.uint()
	if n > uint64(len(u.b)) {
		u.fail(errors.New("a count is past the end"))
		return 0
	}
	return int(n)
}

func (u *unpacker) bytes() []byte {
	n := u.count()
	if u.err != nil {
		return nil
	}
	v := u.b[:n:n]
	u.b = u.b[n:]
	return v
}

func (u *unpacker) str() string { return string(u.bytes()) }

func (u *unpacker) bool() bool {
	if u.err != nil {
		return false
	}
	if len(u.b) == 0 || u.b[0] > 1 {
		u.fail(errors.New("a flag is cut"))
		return false
	}
	v := u.b[0] == 1
	u.b = u.b[1:]
	return v
}

func (u *unpacker) strs() []string {
	n := u.uint() // the number of strings plus one; 0 for nil
	if u.err != nil || n == 0 {
		return nil
	}
	if n-1 > uint64(len(u.b)) {
		u.fail(errors.New("a count is past the end"))
		return nil
	}
	ss := make([]string, n-1)
	for i := range ss {
		ss[i] = u.str()
	}
	return ss
}

func (u *unpacker) unjson(v any) {
	if !u.bool() {
		return
	}
	if j := u.bytes(); u.err == nil {
		u.fail(json.Unmarshal(j, v))
	}
}
