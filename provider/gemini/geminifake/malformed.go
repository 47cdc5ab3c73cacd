package geminifake

// Malformed is a 200 answer that starts like Gemini's and breaks off
// inside it (truncated) or, when invalid, turns into something that is not
// JSON: a JSON body for a unary request, an event stream whose first data
// line is not JSON for a streaming one.
func Malformed(stream, invalid bool) Reply {
	if stream {
		return Reply{RawContentType: "text/event-stream",
			RawBody: "data: " + malformed(`{"candidates": [{"content": {"parts": [{"text": "hel`, invalid) + "\n\n"}
	}
	return Reply{RawBody: malformed(`{"candidates": [{"content": {"parts": [{"text": "hel`, invalid)}
}

// malformed is doc as a 200 answer that breaks off inside it (truncated)
// or, when invalid, turns into something that is not JSON.
func malformed(doc string, invalid bool) string {
	if invalid {
		return doc + `}}]},"usage":` + "\n"
	}
	return doc
}
