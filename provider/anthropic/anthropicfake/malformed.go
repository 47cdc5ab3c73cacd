package anthropicfake

// Malformed is a 200 answer that starts like Anthropic's and breaks off
// inside it (truncated) or, when invalid, turns into something that is not
// JSON: a JSON body for a unary request, an event stream whose first data
// line is not JSON for a streaming one.
func Malformed(stream, invalid bool) Reply {
	if stream {
		return Reply{Status: 200, RawContentType: "text/event-stream",
			RawBody: "event: message_start\ndata: " + malformed(`{"type":"message_start","message":{"id":"msg_01","content":[`, invalid) + "\n\n"}
	}
	return Reply{Status: 200, RawBody: malformed(`{"id":"msg_01","type":"message","role":"assistant","content":[{"type":"text","text":"hel`, invalid)}
}

// malformed is doc as a 200 answer that breaks off inside it (truncated)
// or, when invalid, turns into something that is not JSON.
func malformed(doc string, invalid bool) string {
	if invalid {
		return doc + `}}]},"usage":` + "\n"
	}
	return doc
}
