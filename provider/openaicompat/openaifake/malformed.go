package openaifake

// Malformed is a 200 answer that starts like Chat Completions' and breaks
// off inside it (truncated) or, when invalid, turns into something that is
// not JSON: a JSON body for a unary request, an event stream whose first
// data line is not JSON for a streaming one.
func Malformed(stream, invalid bool) Reply {
	if stream {
		return Reply{Status: 200, RawContentType: "text/event-stream",
			RawBody: "data: " + malformed(`{"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hel`, invalid) + "\n\n"}
	}
	return Reply{Status: 200, RawBody: malformed(`{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hel`, invalid)}
}

// malformed is doc as a 200 answer that breaks off inside it (truncated)
// or, when invalid, turns into something that is not JSON.
func malformed(doc string, invalid bool) string {
	if invalid {
		return doc + `}}]},"usage":` + "\n"
	}
	return doc
}
