// Package nativecorpus reads the corpus of real requests that the pinned
// host CLIs (Claude Code, Codex CLI, Copilot CLI) and the official SDKs
// (anthropic-sdk-go, openai-go) send, each with the provider answer it was
// given, for the gateway's passthrough conformance tests. The corpus lives
// in gateway/testdata/native/<host>-<version>/<NN>-<what>.json, one
// exchange a file (see [Exchange]); its README says how it was captured.
//
// # Capturing it again
//
// The capture is a test of this package behind an environment variable.
// It needs the pinned CLIs (scripts/install-host-clis.sh) and root, to run
// them in a network namespace that has only loopback (and a host name of
// its own), as internal/hostcli does:
//
//	scripts/install-host-clis.sh
//	CORTEXBUILD_CAPTURE_CORPUS=1 go test ./gateway/internal/nativecorpus -run TestCapture -count=1 -v
//
// It starts a loopback server that plays the providers (Anthropic Messages
// and count_tokens, OpenAI Chat Completions and Responses, unary and SSE,
// in the APIs' own framing), points each CLI at it with the gateway's
// recipe (docs/gateway.md) and drives the SDKs at it, and records every
// request (method, path and query, headers, body bytes) and the answer it
// sent (status, headers, body bytes). Before writing, it replaces every
// credential header's value with [Redacted] and the capture's temporary
// directory with /home/dev (the CLIs run with HOME=/home/dev and the
// project in /home/dev/project), fixing Content-Length to the new length;
// it then rewrites each host's directory and checks the result with
// [Check]. CORTEXBUILD_HOSTCLIS names where the CLIs are installed
// (default: .cache/hostclis in the repository).
package nativecorpus

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/cortexbuild/cortexbuild/provider"
)

// ProtoCountTokens is Anthropic's token-counting endpoint (POST
// /v1/messages/count_tokens), which Claude Code calls besides Messages.
const ProtoCountTokens = provider.ProtoCountTokens

// Redacted is the value every credential header holds in the corpus (after
// the scheme, for Authorization: "Bearer REDACTED"). A test that replays a
// request puts its own key in its place.
const Redacted = "REDACTED"

// Exchange is one request a client sent and the answer the capture server
// gave it. Bodies are kept byte for byte (base64 in the file).
type Exchange struct {
	// Host is the client: claude-code, codex, copilot, anthropic-sdk-go
	// or openai-go; Version its version.
	Host    string `json:"host"`
	Version string `json:"version"`
	// Flow names the scenario the exchange belongs to (several exchanges
	// of one conversation share it); Note says what this one shows.
	Flow string `json:"flow"`
	Note string `json:"note"`
	// Protocol is the API of the request: provider.ProtoMessages,
	// provider.ProtoChat, provider.ProtoResponses or ProtoCountTokens.
	Protocol provider.Protocol `json:"protocol"`
	Request  Request           `json:"request"`
	Response Response          `json:"response"`
	// File is the exchange's path relative to the corpus directory, set
	// by Load.
	File string `json:"-"`
}

// Request is a request as the client sent it.
type Request struct {
	Method string `json:"method"`
	// Path is the path and query ("/v1/messages?beta=true").
	Path string `json:"path"`
	// Header holds the headers as received (canonical names, Host
	// excluded), credentials redacted.
	Header http.Header `json:"headers"`
	Body   []byte      `json:"body_base64"`
}

// Response is the answer the capture server sent, as the provider would:
// the status, the headers it set (not Date, Content-Length or
// Transfer-Encoding, which the server adds), whether it is a stream of
// server-sent events, and the body bytes (for a stream, every event with
// its framing, in order).
type Response struct {
	Status int         `json:"status"`
	Header http.Header `json:"headers"`
	Stream bool        `json:"stream"`
	Body   []byte      `json:"body_base64"`
}

// Load reads every exchange under dir (dir/<host>-<version>/*.json), in
// the order of their paths, and checks each with [Check].
func Load(dir string) ([]Exchange, error) {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".json") {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("nativecorpus: %w", err)
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("nativecorpus: no exchange (*.json) under %s", dir)
	}
	slices.Sort(paths)
	out := make([]Exchange, 0, len(paths))
	for _, p := range paths {
		e, err := ReadFile(p)
		if err != nil {
			return nil, err
		}
		e.File, _ = filepath.Rel(dir, p)
		e.File = filepath.ToSlash(e.File)
		out = append(out, e)
	}
	return out, nil
}

// ReadFile reads one exchange file (fields unknown to [Exchange] are an
// error) and checks it with [Check].
func ReadFile(path string) (Exchange, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Exchange{}, fmt.Errorf("nativecorpus: %w", err)
	}
	var e Exchange
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return Exchange{}, fmt.Errorf("nativecorpus: %s: %w", path, err)
	}
	if dec.More() {
		return Exchange{}, fmt.Errorf("nativecorpus: %s: more than one JSON value", path)
	}
	if err := Check(e); err != nil {
		return Exchange{}, fmt.Errorf("nativecorpus: %s: %w", path, err)
	}
	return e, nil
}

// paths is the request path of each protocol (the query may follow).
var paths = map[provider.Protocol]string{
	provider.ProtoMessages:  "/v1/messages",
	ProtoCountTokens:        "/v1/messages/count_tokens",
	provider.ProtoChat:      "/v1/chat/completions",
	provider.ProtoResponses: "/v1/responses",
}

// Protocols lists the protocols an exchange may have.
func Protocols() []provider.Protocol {
	return []provider.Protocol{provider.ProtoMessages, ProtoCountTokens, provider.ProtoChat, provider.ProtoResponses}
}

// credentialHeaders are the request headers that carry a credential.
var credentialHeaders = []string{"Authorization", "X-Api-Key", "Api-Key", "Proxy-Authorization", "Cookie", "X-Goog-Api-Key"}

// secretPatterns match credentials of the vendors and hosts concerned, and
// the gateway's virtual keys, wherever they appear.
var secretPatterns = regexp.MustCompile(`sk-(?:ant-|proj-)?[A-Za-z0-9_-]{16,}|cbk_[A-Za-z0-9_-]{8,}|gh[opsu]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|AIza[0-9A-Za-z_-]{30,}|(?i:bearer)\s+[A-Za-z0-9._~+/=-]{12,}`)

// Check reports what is wrong with e, if anything: a missing field, a
// protocol or path it does not know, a body that is not what its protocol
// and headers say (request bodies are JSON objects; an answer is JSON or,
// when Stream, server-sent events whose data are JSON), a Content-Length
// that is not the body's, or a credential left in it.
func Check(e Exchange) error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	for _, f := range []struct{ name, v string }{{"host", e.Host}, {"version", e.Version}, {"flow", e.Flow}, {"note", e.Note}} {
		if f.v == "" {
			bad(f.name, "missing")
		}
	}
	want, ok := paths[e.Protocol]
	if !ok {
		bad("protocol", "%q is not one of %v", e.Protocol, Protocols())
	}
	rq := e.Request
	if rq.Method != http.MethodPost {
		bad("request.method", "%q, want POST", rq.Method)
	}
	if p, _, _ := strings.Cut(rq.Path, "?"); ok && p != want {
		bad("request.path", "%q is not the path of %s (%s)", rq.Path, e.Protocol, want)
	}
	if !gjson.ValidBytes(rq.Body) || !gjson.ParseBytes(rq.Body).IsObject() {
		bad("request.body_base64", "not a JSON object (%d bytes)", len(rq.Body))
	}
	if cl := rq.Header.Get("Content-Length"); cl != "" && cl != strconv.Itoa(len(rq.Body)) {
		bad("request.headers.Content-Length", "%s, but the body has %d bytes", cl, len(rq.Body))
	}
	for _, h := range credentialHeaders {
		for _, v := range rq.Header.Values(h) {
			if v != Redacted && !strings.HasSuffix(v, " "+Redacted) {
				bad("request.headers."+h, "holds a credential, want %q in its place", Redacted)
			}
		}
	}
	rs := e.Response
	if rs.Status < 100 || rs.Status > 599 {
		bad("response.status", "%d is not an HTTP status", rs.Status)
	}
	mt, _, _ := mime.ParseMediaType(rs.Header.Get("Content-Type"))
	switch {
	case rs.Stream && mt != "text/event-stream":
		bad("response.headers.Content-Type", "%q on a stream, want text/event-stream", mt)
	case !rs.Stream && mt != "application/json":
		bad("response.headers.Content-Type", "%q, want application/json", mt)
	}
	if rs.Stream {
		if err := checkEvents(rs.Body); err != nil {
			bad("response.body_base64", "%v", err)
		}
	} else if !gjson.ValidBytes(rs.Body) {
		bad("response.body_base64", "not JSON (%d bytes)", len(rs.Body))
	}
	if rs.Status == http.StatusOK && e.Protocol != ProtoCountTokens {
		if asked := gjson.GetBytes(rq.Body, "stream").Bool(); asked != rs.Stream {
			bad("response.stream", "%v, but the request's stream is %v", rs.Stream, asked)
		}
	}
	// The errors say where a credential is, never what it is.
	for where, b := range map[string][]byte{"request.body_base64": rq.Body, "response.body_base64": rs.Body} {
		if loc := secretPatterns.FindIndex(b); loc != nil {
			bad(where, "holds what looks like a credential at byte %d", loc[0])
		}
	}
	for where, h := range map[string]http.Header{"request.headers": rq.Header, "response.headers": rs.Header} {
		for k, vs := range h {
			for _, v := range vs {
				if secretPatterns.MatchString(v) {
					bad(where+"."+k, "holds what looks like a credential")
				}
			}
		}
	}
	return errors.Join(errs...)
}

// checkEvents checks that b is a complete stream of server-sent events:
// every event ends with a blank line, and every data line is JSON but for
// OpenAI's closing [DONE].
func checkEvents(b []byte) error {
	if len(b) == 0 {
		return errors.New("an empty stream")
	}
	if !bytes.HasSuffix(b, []byte("\n\n")) {
		return errors.New("the stream does not end with a blank line (a cut event)")
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, len(b)+1)
	n, events := 0, 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if line == "" {
			events++
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "data":
			if value != "[DONE]" && !gjson.Valid(value) {
				return fmt.Errorf("line %d: data is not JSON: %.60q", n, value)
			}
		case "event", "id", "retry", "":
		default:
			return fmt.Errorf("line %d: %q is not a server-sent event field", n, field)
		}
	}
	if events == 0 {
		return errors.New("no event")
	}
	return sc.Err()
}
